"""Checks of an API dependency graph against the schema and the SOP (TELLER P4, teller.md §7 items 4–6).

Acyclic, unique and well-formed names, dependencies that exist, provenance closure (every input
is an existing field or an upstream output; every intermediate to-be-obtained field is produced;
no API returns a decision), and the SOP-order consistency of every edge (inversions are warnings).
"""

from __future__ import annotations

import re
from typing import Any, Literal


from sopforge.families.sop_tools.models.api_graph import API_NAME_RE, APIGraph, _cycle_text
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import find_id_field
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.write_conditions import alternatives, parse_entry

__all__ = ["check_graph"]

_STEP_RE = re.compile(r"^\d+(?:\.\d+)*$")
_TABLE_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_TYPE_ALIASES = {"int": "integer", "str": "string", "text": "string", "bool": "boolean",
                 "number": "float", "double": "float", "decimal": "float"}
_LOOSE_TYPES = {"enum": {"string"}, "date": {"string"}, "datetime": {"string"}}


def _step_key(step: str) -> tuple[int, ...]:
    return tuple(int(p) for p in step.split("."))


def _result(name: str, bad: list[str], fail: str, ok: str, *, severity: Literal["error", "warning"] = "error",
            **details: Any) -> CheckResult:
    return check(name, not bad, fail if bad else ok, severity=severity, **details)


def _type_matches(declared: str, schema_type: str) -> bool:
    t = "".join(declared.lower().split())
    t = _TYPE_ALIASES.get(t, t)
    return t == schema_type or t in _LOOSE_TYPES.get(schema_type, set())


def check_graph(graph: APIGraph, schema: DataSchema, sop: SOPDocument) -> list[CheckResult]:
    """Checks that must hold before the dataset stage runs (DESIGN, chain row 'api_graph').

    Args:
        graph: A parsed API graph.
        schema: The data schema the graph's parameters must use.
        sop: The SOP whose steps the APIs implement.

    Returns:
        One CheckResult per check, passed or not.
    """
    results = []
    fields = {f.name: f for f in schema.fields}
    names = graph.names
    import networkx as nx  # loaded by the check, not by every command that loads the family

    g = graph.to_networkx()

    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    dupes = [n for n, c in counts.items() if c > 1]
    results.append(_result("api_graph.names_unique", dupes,
                           f"API names used more than once: {', '.join(dupes)}; give every API its own name",
                           "API names are unique", names=dupes))

    bad = [n for n in dict.fromkeys(names) if not API_NAME_RE.match(n)]
    results.append(_result("api_graph.names_valid", bad,
                           f"invalid API names: {', '.join(map(repr, bad))}; use lowerCamelCase or snake_case "
                           "(a letter, then letters, digits or _; at most 64 characters)",
                           "API names are valid identifiers", names=bad))

    dangling = [f"{a.api_name} -> {d.dependent_api}" for a in graph.apis for d in a.direct_dependencies
                if d.dependent_api not in counts]
    results.append(_result("api_graph.dependencies_exist", dangling,
                           f"dependencies on APIs that are not in the graph: {', '.join(dangling)}; "
                           "name an API defined in the graph or remove the dependency",
                           "every dependency names an API of the graph", dependencies=dangling))

    acyclic = nx.is_directed_acyclic_graph(g)
    cycle = _cycle_text(g) if not acyclic else ""
    results.append(check("api_graph.acyclic", acyclic,
                         f"dependency cycle: {cycle}; an API cannot need (directly or indirectly) its own result, "
                         "remove the dependency that carries no data" if cycle else "the graph is acyclic",
                         cycle=cycle.split(" -> ") if cycle else []))

    unknown = [f"{a.api_name}.{p.name}" for a in graph.apis
               for p in [*a.input_parameters, *a.output_parameters] if p.name not in fields]
    results.append(_result("api_graph.parameters_in_schema", unknown,
                           f"parameters that are not schema fields: {', '.join(unknown)}; every input and output "
                           f"must be named exactly as a schema field ({', '.join(fields)})",
                           "every parameter is a schema field", parameters=unknown))

    not_existing = [f"{a.api_name}.{p.name}" for a in graph.apis for p in a.input_parameters
                    if p.source == "user_input" and p.name in fields and fields[p.name].role != "existing"]
    results.append(_result("api_graph.user_inputs_existing", not_existing,
                           f"user_input parameters that are to-be-obtained fields: {', '.join(not_existing)}; "
                           "only <Existing_fields> come with the case, take these from the API that outputs them "
                           "(source other_api)", "every user_input is an existing field", parameters=not_existing))

    producers: dict[str, list[str]] = {}
    for a in graph.apis:
        for name in a.output_names:
            producers.setdefault(name, []).append(a.api_name)
    # The caller passes every input of a tool (its toolSpec lists them all), so an existing field read "from the
    # case record" must be one the caller can know: supplied with the case, or returned by an upstream API.
    given = {p.name for a in graph.apis for p in a.input_parameters if p.source == "user_input"}
    unsourced, unsourced_items = [], []
    for a in graph.apis:
        upstream = nx.ancestors(g, a.api_name) if a.api_name in g else set()
        for p in a.input_parameters:
            field = fields.get(p.name)
            if field is None or p.source == "user_input" or (field.decision and a.writes):
                continue  # a decision a write records is the agent's (api_graph.decision_inputs)
            if p.source == "system_state" and field.role == "existing" and p.name in given:
                continue  # on the case record, and supplied with the case
            if any(prod in upstream for prod in producers.get(p.name, [])):
                continue
            where = _where_from(field.decision, field.role, producers.get(p.name, []), a.api_name)
            unsourced.append(f"{a.api_name}.{p.name} ({p.source}) {where}")
            unsourced_items.append({"api": a.api_name, "parameter": p.name, "source": p.source,
                                    "producers": producers.get(p.name, [])})
    results.append(_result("api_graph.inputs_provenance", unsourced,
                           f"inputs with no upstream producer: {'; '.join(unsourced)}",
                           "every other_api/system_state input is produced upstream", inputs=unsourced_items))

    orphans = [f.name for f in schema.to_be_obtained if not f.decision and f.name not in producers]
    results.append(_result("api_graph.to_be_obtained_produced", orphans,
                           f"to-be-obtained fields no API outputs: {', '.join(orphans)}; add each to the outputs of "
                           "the API that computes it", "every intermediate to-be-obtained field is produced",
                           fields=orphans))

    decided = [f"{api} outputs {f.name}" for f in schema.decisions for api in producers.get(f.name, [])]
    results.append(_result("api_graph.no_decision_outputs", decided,
                           f"APIs that return a [decision] field: {', '.join(decided)}; the agent decides by applying "
                           "the SOP to API outputs, so remove the decision from every API's outputs",
                           "no API returns a decision field", outputs=decided))

    consumed = {(p.name, a.api_name) for a in graph.apis for p in a.input_parameters}
    # An existing field returned for display is how hidden case data reaches the agent (its
    # decision rules read it), so only outputs meant for other APIs or storage can be orphans.
    unused = [f"{a.api_name}.{o.name}" for a in graph.apis for o in a.output_parameters
              if o.name in fields and fields[o.name].role == "existing" and o.destination != "ui_display"
              and not any(n == o.name and consumer != a.api_name for n, consumer in consumed)]
    results.append(_result("api_graph.orphan_outputs", unused,
                           f"outputs no API consumes and that are not to-be-obtained fields: {', '.join(unused)}; "
                           "pass them to the API that needs them or drop them", "every output is used",
                           severity="warning", outputs=unused))

    mistyped = [f"{a.api_name}.{p.name} ({p.data_type}, schema says {fields[p.name].type})" for a in graph.apis
                for p in [*a.input_parameters, *a.output_parameters]
                if p.name in fields and not _type_matches(p.data_type, fields[p.name].type)]
    results.append(_result("api_graph.parameter_types", mistyped,
                           f"data_type differs from the schema: {', '.join(mistyped)}; copy the field's schema type",
                           "parameter types match the schema", severity="warning", parameters=mistyped))

    results += _write_checks(graph, schema)

    known_steps = {s.number for s in sop.steps}
    no_steps = [a.api_name for a in graph.apis if not a.sop_steps]
    missing = [f"{a.api_name}: {s}" for a in graph.apis for s in a.sop_steps if s not in known_steps]
    problems = ([f"APIs without sop_steps: {', '.join(no_steps)}"] if no_steps else []) + \
               ([f"steps not in 5. Main Procedure: {', '.join(missing)}"] if missing else [])
    results.append(_result("api_graph.sop_steps_valid", problems,
                           f"{'; '.join(problems)}; list the numbers of the Main Procedure steps each API implements "
                           f"(the SOP has {', '.join(s.number for s in sop.steps) or 'none'})",
                           "every API implements existing SOP steps", apis_without_steps=no_steps, missing=missing))

    steps = {a.api_name: sorted((_step_key(s) for s in a.sop_steps if s in known_steps and _STEP_RE.match(s)))
             for a in graph.apis}
    inversions = []
    for u, v in g.edges:
        if steps.get(u) and steps.get(v) and steps[u][0] > steps[v][-1]:
            inversions.append(f"{u} ({_fmt(steps[u][0])}) -> {v} ({_fmt(steps[v][-1])})")
    results.append(_result("api_graph.sop_order", inversions,
                           f"prerequisites whose first SOP step comes after the last step of the API that depends on "
                           f"them: {', '.join(inversions)}; check the dependency direction and the sop_steps",
                           "dependencies follow the SOP step order", severity="warning", inversions=inversions))
    return results


def _fmt(key: tuple[int, ...]) -> str:
    return ".".join(map(str, key))


def _where_from(decision: bool, role: str, producers: list[str], api: str) -> str:
    if decision:
        return ("is a [decision] field: no API produces it, and only a write API takes it (source decision) "
                "to record the agent's decision")
    others = [p for p in producers if p != api]
    if others:
        return f"is output by {', '.join(others)}, which {api} does not depend on: add a dependency"
    if role == "existing":
        return ("is on the case record, but the agent calling the tool is neither given it with the case nor "
                "returned it by any API, and every input of a tool is passed by its caller: take it as user_input, "
                "or add it to the outputs of an upstream read API (such as the record lookup) and depend on that API")
    return "is output by no API: add it to the outputs of the API that computes it"


def condition_problems(when: Any, fields: dict[str, Any]) -> list[str]:
    """What is wrong with a write's ``when``: unknown fields, labels the field does not have, comparisons on a
    field that is not a number (``models/write_conditions.py`` defines the forms)."""
    problems = []
    if isinstance(when, list) and any(not option for option in when):
        problems.append("an alternative of the list is empty (leave when out, or {}, for every branch)")
    for option in alternatives(when):
        for name, entries in option.items():
            field = fields.get(name)
            if field is None:
                problems.append(f"{name} is not a field of the schema")
                continue
            if not entries:
                problems.append(f"{name} lists no value")
            numeric = field.type in ("integer", "float")
            labels = {x.lower() for x in field.labels()}
            for entry in entries:
                op, operand = parse_entry(entry)
                if isinstance(operand, float):
                    if not numeric:
                        problems.append(f"{entry!r} compares {name} with a number, but {name} is a {field.type}")
                elif op not in ("==", "!="):
                    problems.append(f"{entry!r}: {op} needs a number")
                elif numeric:
                    problems.append(f"{entry!r} is not a number, and {name} is a {field.type}")
                elif not labels:
                    problems.append(f"{name} is a {field.type} without a fixed set of values: name an enum or "
                                    "boolean field, or compare a number")
                elif str(operand).lower() not in labels:
                    problems.append(f"{operand} is not a value of {name} ({' | '.join(field.labels())})")
    return problems


def _write_checks(graph: APIGraph, schema: DataSchema) -> list[CheckResult]:
    """Reads and writes: what each declares, where decisions may flow, and on which branch each write happens."""
    fields = {f.name: f for f in schema.fields}
    id_field = find_id_field(schema)
    effects, outputs, keys, conditions, decision_inputs = [], [], [], [], []
    for a in graph.apis:
        if a.writes:
            if not a.writes_table or not _TABLE_RE.match(a.writes_table):
                effects.append(f"{a.api_name} is a write without a snake_case writes_table")
            if a.output_parameters:
                outputs.append(f"{a.api_name} is a write and outputs {', '.join(a.output_names)} (a write returns "
                               "only the record_id of the record it made: list no output_parameters)")
            if id_field and id_field not in a.input_names:
                keys.append(f"{a.api_name} does not take {id_field} (a write records one case, named by its id)")
            conditions += [f"{a.api_name}.when: {p}" for p in condition_problems(a.when, fields)]
        else:
            if a.writes_table or a.when:
                effects.append(f"{a.api_name} is a read but declares writes_table/when (set effect: \"write\" if "
                               "it changes the database)")
            if not a.output_parameters:
                outputs.append(f"{a.api_name} is a read with no output_parameters")
        for p in a.input_parameters:
            field = fields.get(p.name)
            if field is None:
                continue
            if field.decision and not a.writes:
                decision_inputs.append(f"{a.api_name}.{p.name}: a read API never takes a [decision] field")
            elif field.decision and p.source != "decision":
                decision_inputs.append(f"{a.api_name}.{p.name}: write it with source \"decision\"")
            elif p.source == "decision" and not field.decision:
                decision_inputs.append(f"{a.api_name}.{p.name}: source \"decision\" is only for [decision] fields")
    writes = graph.write_apis
    conditional = [a.api_name for a in writes if a.conditional]
    return [
        _result("api_graph.effects", effects, f"{'; '.join(effects)}", "reads and writes are declared consistently",
                problems=effects),
        _result("api_graph.outputs_by_effect", outputs, f"{'; '.join(outputs)}",
                "reads return schema fields, writes return only a record_id", problems=outputs),
        _result("api_graph.writes_present", [] if writes else ["none"],
                "no API writes: add the write APIs the SOP's actions need (record the decision, open a referral, "
                "notify a party), each with effect \"write\", a writes_table and the branch it happens on (when)",
                f"{len(writes)} write API(s): {', '.join(a.api_name for a in writes)}", writes=[a.api_name for a in writes]),
        _result("api_graph.write_keys", keys, f"{'; '.join(keys)}", "every write names the case it records",
                problems=keys),
        _result("api_graph.write_conditions", conditions,
                f"{'; '.join(conditions)}; write when as {{field: [entries]}} with schema fields, each entry a value of "
                "the field or, for a number, a comparison such as \"> 0\" or \"!= 0\"",
                "every write's branch condition uses schema values", problems=conditions),
        _result("api_graph.decision_inputs", decision_inputs, f"{'; '.join(decision_inputs)}",
                "decisions flow only into writes, with source decision", problems=decision_inputs),
        _result("api_graph.branch_dependent_writes", [] if conditional or not writes else ["none"],
                "every write happens on every branch (no when): the SOP's branches then leave the same records "
                "behind; give the writes that belong to one branch (a referral, a review) their when condition",
                f"writes that depend on the branch: {', '.join(conditional)}", severity="warning",
                writes=conditional),
    ]
