"""Checks of the tools stage: API docs, toolspecs and tools.py against the graph, the data and each other.

Three families, all named ``tools.*`` with one actionable line per message:

* **static**: docs and toolspecs cover exactly the API graph's nodes with exactly its parameters;
  every ``inputSchema.json`` is a valid JSON Schema of type object; ``tools.py`` passes the
  sandbox's AST policy and defines one public ``*Manager`` class with ``process_tool_call`` and
  one method per toolSpec whose parameters are the spec's properties.
* **rows vs specs**: every dataset row, read back from the bundle CSV by schema type, gives
  arguments that validate against each spec whose parameters are all existing fields.
* **runtime**: the tools run on every row in a sandboxed child (two processes in all).

How runtime arguments are built (:func:`argument_sources`): an input comes from the row when
the graph marks it ``user_input`` or when no upstream API returns it; otherwise it is taken from
the result of the nearest upstream API (in topological order) that returns it, as an agent that
sees only the input columns must do. So a tool that returns ``"24"`` for an integer breaks its
consumers here exactly as it would for an agent. Since a sandbox payload is static, the chain is
run by a small driver module written next to ``tools.py`` (:data:`DRIVER_SOURCE`): each row is one
``run_function`` call whose plan names, per step, literal arguments and references to earlier
results. After the chain, the first tool is called again with the same arguments (write-back
state), and one extra call per tool that takes an identifier repeats the first row's chain and
then calls that tool with every identifier replaced by :data:`UNKNOWN_ID` (it must raise).

Determinism: the same calls run in a second fresh process with the rows in **reverse order**, and
every result is compared exactly. Reversing costs nothing and also catches results that depend on
earlier calls (a counter, a cache with too short a key), which differ between tasks run in another
order. The sandbox pins ``PYTHONHASHSEED=0``, so iteration over a set of strings is stable across
the two runs and is *not* caught at run time (a limitation of the current sandbox); the static
``tools.code.set_order`` warning catches the plain cases (``for x in {...}``, ``list(set(...))``).
"""

from __future__ import annotations

import ast
import csv
import datetime
import json
import tempfile
from pathlib import Path
from typing import Any, Literal

import networkx as nx
from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators

from sopforge.parsing import one_line
from sopforge.schemas.api_graph import API_NAME_RE, APIGraph
from sopforge.schemas.checks import CheckResult, check
from sopforge.schemas.data_schema import DataSchema
from sopforge.schemas.dataset import Dataset, row_label
from sopforge.schemas.tools import APIDocs, ToolCode, ToolSpecs, csv_cell, parse_cell
from sopforge.validation.sandbox import CallOutcome, SandboxLimits, SandboxResult, check_code, run_in_sandbox

__all__ = [
    "CSV_FILE", "DRIVER_FILE", "DRIVER_SOURCE", "TOOL_CHECK_LIMITS", "UNKNOWN_ID",
    "argument_sources", "check_api_docs", "check_code_static", "check_rows_against_specs", "check_runtime",
    "check_toolspecs", "typed_row", "write_bundle",
]

CSV_FILE = "test_set_with_outputs.csv"
DRIVER_FILE = "_sopforge_chain.py"
UNKNOWN_ID = "ZZ-NOT-ON-FILE-000000"
_UNKNOWN_INT_ID = -999999
MAX_QUOTED = 3
# The arguments_valid warning validates this many calls (jsonschema costs ~0.1 ms a call; the
# blocking rows_valid check already covers every row's own values).
ARGUMENT_CHECK_CALLS = 2000
# Tighter than the sandbox default: a pandas-free tools.py runs thousands of rows in well under a second.
TOOL_CHECK_LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)
_JSON_TYPES = {"string": "string", "enum": "string", "date": "string", "datetime": "string",
               "integer": "integer", "float": "number", "boolean": "boolean"}
_HINTS = {
    "timeout": "every tool must return quickly: no unbounded loops, waits or retries",
    "cpu_limit": "every tool must return quickly: no unbounded loops or repeated scans of the table",
    "memory_limit": "keep memory small: load the CSV once and build no unbounded lists or copies",
    "policy_violation": "tools may only read their own CSV: no network, processes, environment or writes",
    "load_error": "tools.py must import cleanly and its Manager must construct with no arguments, "
                  f"reading {CSV_FILE} next to tools.py",
    "crash": "tools.py must not exit the interpreter or touch file descriptors",
    "bad_output": "tools.py must not exit the interpreter or write to stdout's descriptor",
}

DRIVER_SOURCE = '''\
"""sopforge tool-check driver: runs one planned chain of tool calls and returns every result.

Written next to tools.py for the runtime checks only; never part of an exported bundle.
"""

import json


def _snapshot(value):
    try:
        return json.loads(json.dumps(value)), None
    except (TypeError, ValueError):
        pass
    if isinstance(value, dict):
        for key, item in value.items():
            try:
                json.dumps(item)
            except (TypeError, ValueError):
                return None, str(key) + " holds a " + type(item).__name__
    return None, "a " + type(value).__name__


def run_chain(tools, steps):
    done = []
    for step in steps:
        entry = {"tool": step["tool"]}
        if "same_as" in step:
            base = done[step["same_as"]]
            if "input" not in base:
                entry["skipped"] = ["(the call it repeats was skipped)"]
                done.append(entry)
                continue
            args = dict(base["input"])
            args.update(step.get("override", {}))
        else:
            args = dict(step["args"])
            missing = []
            for param, ref in step["refs"].items():
                earlier = done[ref[0]].get("result")
                if isinstance(earlier, dict) and ref[1] in earlier:
                    args[param] = earlier[ref[1]]
                else:
                    missing.append(param)
            if missing:
                entry["skipped"] = missing
                done.append(entry)
                continue
        entry["input"] = json.loads(json.dumps(args))
        value = tools.process_tool_call(step["tool"], args)
        entry["result"], problem = _snapshot(value)
        if problem is not None:
            entry["unencodable"] = problem
        done.append(entry)
    return done
'''


def _result(name: str, bad: list[str], fail: str, ok: str, *, severity: Literal["error", "warning"] = "error",
            **details: Any) -> CheckResult:
    return check(name, not bad, fail if bad else ok, severity=severity, **details)


def _few(items: list[str], sep: str = "; ") -> str:
    shown = sep.join(items[:MAX_QUOTED])
    return shown + (f"{sep}… {len(items) - MAX_QUOTED} more" if len(items) > MAX_QUOTED else "")


def _set_diff(have: list[str], want: list[str], source: str = "the graph") -> str:
    """'missing a, b; not in <source> c' (empty when the two agree)."""
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    return "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                     + ([f"not in {source} {', '.join(extra)}"] if extra else []))


def _short(value: Any, limit: int = 120) -> str:
    return one_line(json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr), limit)


class _Findings:
    """Problems grouped by kind, so a message shows each distinct problem once, with its first row."""

    def __init__(self) -> None:
        self.groups: dict[Any, tuple[str, list[str]]] = {}

    def add(self, key: Any, label: str, text: str) -> None:
        self.groups.setdefault(key, (text, []))[1].append(label)

    @property
    def rows(self) -> int:
        return len({label for _, labels in self.groups.values() for label in labels})

    def lines(self) -> list[str]:
        out = []
        for text, labels in self.groups.values():
            more = len(labels) - 1
            out.append(f"{text} ({labels[0]}" + (f" and {more} more row{'s' if more > 1 else ''})" if more else ")"))
        return out


# ----------------------------------------------------------------------------- API docs

def check_api_docs(docs: APIDocs, graph: APIGraph, schema: DataSchema) -> list[CheckResult]:
    """The docs document exactly the graph's APIs with exactly their inputs and outputs.

    Returns:
        ``tools.docs.names``, ``tools.docs.request``, ``tools.docs.response`` and the
        ``tools.docs.dependencies`` warning.
    """
    names, nodes = docs.names, graph.names
    dupes = sorted({n for n in names if names.count(n) > 1})
    diff = _set_diff(names, nodes)
    bad = ([f"documented twice: {', '.join(dupes)}"] if dupes else []) + ([diff] if diff else [])
    results = [_result("tools.docs.names", bad, f"<API> blocks must be exactly the graph's APIs ({', '.join(nodes)}): "
                       f"{'; '.join(bad)}", "one <API> block per API of the graph", problems=bad)]
    decisions = {f.name for f in schema.decisions}
    request, response, deps = [], [], []
    for doc in docs.apis:
        if doc.name not in nodes:
            continue
        api = graph.api(doc.name)
        if d := _set_diff(list(doc.request_body), api.input_names):
            request.append(f"{doc.name}: {d}")
        if d := _set_diff(list(doc.response), api.output_names):
            named = sorted(decisions & set(doc.response))
            hint = f" ({', '.join(named)} is a [decision] field: the agent decides it, no API returns it)" \
                if named else ""
            response.append(f"{doc.name}: {d}{hint}")
        want = [x.dependent_api for x in api.direct_dependencies]
        if sorted(set(doc.dependencies)) != sorted(set(want)):
            deps.append(f"{doc.name}: [{', '.join(doc.dependencies)}], graph [{', '.join(want)}]")
    results.append(_result("tools.docs.request", request, "Request Body keys must be the API's graph inputs: "
                           + _few(request), "request bodies match the graph inputs", apis=request))
    results.append(_result("tools.docs.response", response, "Response keys must be the API's graph outputs: "
                           + _few(response), "responses match the graph outputs", apis=response))
    results.append(_result("tools.docs.dependencies", deps, "Dependencies differ from the graph's direct "
                           "dependencies: " + _few(deps), "dependencies match the graph", severity="warning",
                           apis=deps))
    return results


# ----------------------------------------------------------------------------- toolspecs

def _spec_label(index: int, spec: dict[str, Any]) -> str:
    name = spec.get("name")
    return f"toolSpec {index}" + (f" ({name})" if isinstance(name, str) else "")


def _valid_schemas(specs: ToolSpecs) -> dict[str, dict[str, Any]]:
    """name -> inputSchema.json for specs whose schema is a valid object schema."""
    found = {}
    for spec in specs.specs:
        schema = (spec.get("inputSchema") or {}).get("json") if isinstance(spec.get("inputSchema"), dict) else None
        if isinstance(spec.get("name"), str) and isinstance(schema, dict) and _schema_problem(schema) is None:
            found.setdefault(spec["name"], schema)
    return found


def _schema_problem(schema: dict[str, Any]) -> str | None:
    try:
        validators.validator_for(schema).check_schema(schema)
    except jsonschema_exceptions.SchemaError as exc:
        where = "/".join(map(str, exc.path)) or "json"
        return f"invalid JSON Schema at {where}: {one_line(exc.message, 100)}"
    remote = _remote_refs(schema)
    if remote:
        return f"only local \"$ref\" (\"#/...\") is allowed, not {remote[0]!r}"
    if schema.get("type") != "object":
        return "inputSchema.json must have \"type\": \"object\""
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        return "\"properties\" must be an object"
    extra = [r for r in schema.get("required", []) if r not in props]
    if extra:
        return f"\"required\" names {', '.join(map(str, extra))}, which \"properties\" does not define"
    return None


def _remote_refs(node: Any) -> list[str]:
    # A remote $ref would make the validator fetch it over the network, in this process.
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) and not node["$ref"].startswith("#") else []
        return own + [r for v in node.values() for r in _remote_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _remote_refs(v)]
    return []


def _declared_types(prop: Any) -> set[str]:
    kind = prop.get("type") if isinstance(prop, dict) else None
    return {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()


def check_toolspecs(specs: ToolSpecs, graph: APIGraph, schema: DataSchema) -> list[CheckResult]:
    """Shape, JSON Schema validity, names and parameters of the toolspecs against the graph.

    Returns:
        ``tools.specs.shape``, ``.json_schema``, ``.names_valid``, ``.names_unique``,
        ``.match_graph``, ``.parameters``, ``.types`` and the ``.required`` and
        ``.descriptions`` warnings.
    """
    shape, invalid = [], []
    for i, spec in enumerate(specs.specs):
        label = _spec_label(i, spec)
        holder = spec.get("inputSchema")
        inner = holder.get("json") if isinstance(holder, dict) else None
        missing = [k for k, ok in (("name", isinstance(spec.get("name"), str) and spec.get("name")),
                                   ("description", isinstance(spec.get("description"), str)
                                    and spec.get("description", "").strip()),
                                   ("inputSchema.json", isinstance(inner, dict))) if not ok]
        if missing:
            shape.append(f"{label}: missing {', '.join(missing)}")
        elif (problem := _schema_problem(inner)) is not None:
            invalid.append(f"{label}: {problem}")
    results = [
        _result("tools.specs.shape", shape, "every toolSpec needs a name, a description and inputSchema.json "
                "(type, properties, required all inside \"json\"): " + _few(shape), "every toolSpec is complete",
                specs=shape),
        _result("tools.specs.json_schema", invalid, "inputSchema.json must be a valid JSON Schema of type object "
                "whose required names are properties: " + _few(invalid), "every inputSchema is valid", specs=invalid),
    ]
    names = [n for n in specs.names if isinstance(n, str)]
    bad_names = [n for n in names if not API_NAME_RE.match(n)]
    results.append(_result("tools.specs.names_valid", bad_names,
                           f"invalid tool names {', '.join(map(repr, bad_names))}; "
                           "use the API names of the graph (a letter, then letters, digits or _; at most 64)",
                           "tool names are valid", names=bad_names))
    dupes = sorted({n for n in names if names.count(n) > 1})
    results.append(_result("tools.specs.names_unique", dupes, f"tool names used twice: {', '.join(dupes)}; write one "
                           "toolSpec per API", "tool names are unique", names=dupes))
    diff = _set_diff(names, graph.names)
    results.append(_result("tools.specs.match_graph", [diff] if diff else [],
                           f"toolSpec names must be exactly the graph's APIs ({', '.join(graph.names)}): {diff}",
                           "one toolSpec per API of the graph", missing=[n for n in graph.names if n not in names],
                           extra=[n for n in names if n not in graph.names]))
    fields = {f.name: f for f in schema.fields}
    params, types, required, described = [], [], [], []
    for name in dict.fromkeys(names):
        if name not in graph.names:
            continue
        api, props = graph.api(name), specs.properties(name)
        if d := _set_diff(props, api.input_names):
            params.append(f"{name}: {d}")
        raw_props = specs.input_schema(name).get("properties") or {}
        for p in props:
            want = _JSON_TYPES.get(fields[p].type, "array") if p in fields else None
            have = _declared_types(raw_props.get(p))
            if want and not (want in have or (want == "integer" and "number" in have)):
                types.append(f"{name}.{p}: {'/'.join(sorted(have)) or 'no type'}, schema type {fields[p].type} "
                             f"needs \"{want}\"")
        req = specs.input_schema(name).get("required") or []
        lacking = [p.name for p in api.input_parameters if p.required and p.name in props and p.name not in req]
        if lacking:
            required.append(f"{name}: {', '.join(lacking)}")
        text = str(specs.spec(name).get("description", ""))
        unnamed = [p for p in props if p not in text]
        if unnamed:
            described.append(f"{name}: {', '.join(unnamed)}")
    results += [
        _result("tools.specs.parameters", params, "properties must be exactly the API's graph inputs: " + _few(params),
                "parameters match the graph inputs", apis=params),
        _result("tools.specs.types", types, "property types must match the schema (string, integer, number, boolean, "
                "array): " + _few(types), "property types match the schema", properties=types),
        _result("tools.specs.required", required, "parameters the graph marks required are not in \"required\": "
                + _few(required), "required parameters are listed", severity="warning", apis=required),
        _result("tools.specs.descriptions", described, "descriptions should name every parameter (the ReAct agent "
                "sees only name and description): " + _few(described), "descriptions name every parameter",
                severity="warning", apis=described),
    ]
    return results


def _validator(schema: dict[str, Any]):
    cls = validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def typed_row(row: dict[str, Any], schema: DataSchema) -> dict[str, Any]:
    """A dataset row as the Manager reads it: written to the CSV, then converted by schema type."""
    types = {f.name: f.type for f in schema.fields}
    return {k: parse_cell(csv_cell(v), types.get(k, "string")) for k, v in row.items()}


def check_rows_against_specs(dataset: Dataset, specs: ToolSpecs, schema: DataSchema) -> list[CheckResult]:
    """Arguments built from every row validate against each spec whose parameters are all existing fields.

    Returns:
        ``tools.specs.rows_valid``, quoting the first few (row, tool, error).
    """
    columns = set(dataset.fields)
    checked = {name: _validator(s) for name, s in _valid_schemas(specs).items()
               if set(specs.properties(name)) <= columns}
    found = _Findings()
    for i, row in enumerate(dataset.rows):
        typed = typed_row(row, schema)
        for name, validator in checked.items():
            args = {p: typed[p] for p in specs.properties(name) if p in typed}
            error = next(iter(sorted(validator.iter_errors(args), key=lambda e: list(e.path))), None)
            if error is not None:
                where = ".".join(map(str, error.path)) or "arguments"
                found.add((name, where, error.validator), row_label(row, i, dataset.id_field),
                          f"{name}.{where}: {one_line(error.message, 100)}")
    lines = found.lines()
    return [_result("tools.specs.rows_valid", lines, f"arguments built from {found.rows} dataset rows break their "
                    "toolSpec (relax the spec or fix its type, enum or range): " + _few(lines),
                    f"{len(dataset.rows)} rows validate against {len(checked)} toolSpecs", problems=lines[:20],
                    rows=found.rows, tools_checked=sorted(checked))]


# ----------------------------------------------------------------------------- code (static)

def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[str], bool]:
    a = fn.args
    names = [x.arg for x in [*a.posonlyargs, *a.args]][1:] + [x.arg for x in a.kwonlyargs]
    return names, a.vararg is not None or a.kwarg is not None


def _public_manager_names(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    found: list[tuple[str, ast.AST]] = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node.name, node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [(t.id, node) for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [((a.asname or a.name).split(".")[-1], node) for a in node.names]
    return [(n, node) for n, node in found if n.endswith("Manager") and not n.startswith("_")]


_ORDER_TAKERS = frozenset({"list", "tuple", "next", "iter", "enumerate", "zip", "join"})


def _set_iterations(tree: ast.Module) -> list[int]:
    """Lines that take an order from a set built in place (``for x in {...}``, ``list(set(...))``).

    The sandbox pins PYTHONHASHSEED, so such an order is stable in the runtime checks but changes
    between interpreter runs of the exported bundle. Only sets built in the expression are seen.
    """
    def is_set(node: ast.AST) -> bool:
        return isinstance(node, (ast.Set, ast.SetComp)) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset"))

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and is_set(node.iter):
            lines.append(node.iter.lineno)
        elif isinstance(node, ast.Call) and node.args and is_set(node.args[0]):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in _ORDER_TAKERS:
                lines.append(node.lineno)
    return sorted(set(lines))


def check_code_static(code: ToolCode, specs: ToolSpecs) -> list[CheckResult]:
    """The sandbox AST policy plus the Manager contract of ``docs/bundle.md``, without running anything.

    Returns:
        The ``tools.policy*`` results, ``tools.code.manager``, ``tools.code.methods`` and the
        ``tools.code.set_order`` warning (the last three only when the code parses).
    """
    results = check_code(code.source)
    try:
        tree = ast.parse(code.source)
    except (SyntaxError, ValueError):
        return results
    managers = _public_manager_names(tree)
    classes = [node for _, node in managers if isinstance(node, ast.ClassDef)]
    problems = []
    if len(managers) != 1 or not classes:
        shown = ", ".join(n for n, _ in managers) or "none"
        problems.append(f"tools.py must define exactly one public name ending in 'Manager', a class (found: {shown}); "
                        "prefix helpers with _")
    # Judge the methods of the class most likely meant as the Manager, so one stray name does not
    # bury the real class's problems.
    cls = next((c for c in classes if c.name == code.class_name), None) or next(
        (c for c in classes if any(getattr(n, "name", "") == "process_tool_call" for n in c.body)),
        classes[0] if classes else None)
    if cls is not None and cls.name != code.class_name:
        problems.append(f"the Manager class must be named {code.class_name}, not {cls.name}")
    methods = {n.name: n for n in (cls.body if cls else []) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init = methods.get("__init__")
    if init is not None and (len(init.args.posonlyargs) + len(init.args.args) - 1 > len(init.args.defaults)
                             or any(d is None for d in init.args.kw_defaults)):
        problems.append("__init__ must take no arguments besides self (the harness calls it with none)")
    dispatch = methods.get("process_tool_call")
    if cls is not None and (dispatch is None or len(_params(dispatch)[0]) != 2):
        problems.append(f"{cls.name} needs process_tool_call(self, tool_name, tool_input) dispatching every tool and "
                        "raising ValueError for an unknown name")
    results.append(_result("tools.code.manager", problems, "; ".join(problems), f"one Manager class {code.class_name}",
                           problems=problems))
    bad = []
    for name in dict.fromkeys(n for n in specs.names if isinstance(n, str)):
        fn = methods.get(name)
        if fn is None:
            bad.append(f"no method {name}")
            continue
        have, star = _params(fn)
        if isinstance(fn, ast.AsyncFunctionDef):
            bad.append(f"{name} must be a plain def, not async")
        if star:
            bad.append(f"{name} takes *args/**kwargs; name each parameter")
        if d := _set_diff(have, specs.properties(name), "the toolSpec"):
            bad.append(f"{name}({', '.join(have)}): {d}")
    if cls is not None:
        results.append(_result("tools.code.methods", bad, "the Manager needs one method per toolSpec whose parameters "
                               "are exactly the spec's properties: " + _few(bad),
                               "one method per toolSpec with its parameters", problems=bad))
    unordered = _set_iterations(tree)
    results.append(_result("tools.code.set_order", [str(n) for n in unordered],
                           f"line {', '.join(map(str, unordered))}: iterating a set gives an order that changes between "
                           "runs; iterate a list or sorted(...) instead", "no order is taken from a set",
                           severity="warning", lines=unordered))
    return results


# ----------------------------------------------------------------------------- runtime

def write_bundle(folder: Path, dataset: Dataset, code: ToolCode, specs: ToolSpecs | None = None) -> Path:
    """Write a generation-time bundle: the CSV of existing fields, tools.py and (optionally) toolspecs.json.

    Args:
        folder: Target folder (created if missing).
        dataset: Rows; columns are ``dataset.fields`` spelled by :func:`csv_cell`.
        code: The tools.py source.
        specs: The toolspecs, written as toolspecs.json when given.

    Returns:
        The folder.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / CSV_FILE).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(dataset.fields)
        writer.writerows([csv_cell(row.get(f)) for f in dataset.fields] for row in dataset.rows)
    (folder / "tools.py").write_text(code.source, encoding="utf-8")
    if specs is not None:
        (folder / "toolspecs.json").write_text(specs.to_json(), encoding="utf-8")
    return folder


def argument_sources(graph: APIGraph, columns: list[str]) -> dict[str, dict[str, str | None]]:
    """Where each API input comes from at run time: ``"row"``, an upstream API name, or None (nowhere).

    An input is read from the row when the graph marks it ``user_input`` or no upstream API returns
    it; otherwise from the nearest upstream producer in topological order.
    """
    order = graph.topological_order()
    position = {n: i for i, n in enumerate(order)}
    g = graph.to_networkx()
    sources: dict[str, dict[str, str | None]] = {}
    for name in order:
        api = graph.api(name)
        upstream = sorted(nx.ancestors(g, name), key=position.__getitem__, reverse=True)
        sources[name] = {}
        for p in api.input_parameters:
            producer = next((u for u in upstream if p.name in graph.api(u).output_names), None)
            if p.source != "user_input" and producer is not None:
                sources[name][p.name] = producer
            else:
                sources[name][p.name] = "row" if p.name in columns else None
    return sources


def _id_params(specs: ToolSpecs, name: str, schema: DataSchema, id_field: str | None) -> dict[str, Any]:
    fields = {f.name: f for f in schema.existing}
    out = {}
    for p in specs.properties(name):
        f = fields.get(p)
        if f is not None and (p == id_field or p == "id" or p.endswith("_id")) and f.type in ("string", "integer"):
            out[p] = UNKNOWN_ID if f.type == "string" else _UNKNOWN_INT_ID
    return out


def _chain(typed: dict[str, Any], order: list[str], sources: dict[str, dict[str, str | None]]) -> list[dict]:
    steps, index = [], {}
    for name in order:
        args, refs = {}, {}
        for param, source in sources[name].items():
            if source == "row":
                args[param] = typed[param]
            elif source is not None:
                refs[param] = [index[source], param]
        index[name] = len(steps)
        steps.append({"tool": name, "args": args, "refs": refs})
    return steps


def _failed_call(outcome: CallOutcome) -> tuple[Any, str]:
    """(group key, text) of the call that raised in a row."""
    calls = outcome.tool_calls or []
    bad = next((c for c in reversed(calls) if not c.ok), None)
    err = outcome.error
    where = f" at line {err.line}" if err and err.line else ""
    what = f"{err.type}{where}: {one_line(err.message, 100)}" if err else "failed"
    key = (bad.tool if bad else None, err.type if err else None, err.line if err else None)
    if bad is None:
        return key, f"the check driver raised {what}"
    return key, f"{bad.tool}({_short(bad.input, 90)}) raised {what}"


def _value_problem(value: Any, field) -> str | None:
    t = field.type
    if t == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif t == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif t == "boolean":
        ok = isinstance(value, bool)
    elif t.startswith("list"):
        ok = isinstance(value, list)
    else:
        ok = isinstance(value, str)
    if not ok:
        return f"{field.name}={_short(value, 40)} is a {type(value).__name__}, schema type {t}"
    if field.choices and value not in field.choices:
        return f"{field.name}={value!r} is not one of {' | '.join(field.choices)}"
    if t == "date" and not _is_date(value):
        return f"{field.name}={value!r} is not a date YYYY-MM-DD"
    return None


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _run(folder: Path, calls: list[dict], limits: SandboxLimits) -> SandboxResult:
    payload = {"op": "run_function", "function": "run_chain", "tools_entry": "tools.py", "calls": calls}
    return run_in_sandbox(folder, DRIVER_FILE, payload, limits=limits)


def _sandbox_failure(result: SandboxResult, labels: list[str], run: str) -> CheckResult:
    kind = result.error_kind or "crash"
    running = labels[result.completed] if result.completed < len(labels) else "after the last call"
    hint = _HINTS.get(kind, "")
    return check("tools.runtime.sandbox", False,
                 f"the {run} sandbox run stopped with {kind} ({one_line(result.error_message, 160)}) while running "
                 f"{running}; {hint}", error_kind=kind, completed=result.completed, wall_seconds=result.wall_seconds,
                 stderr_tail=result.stderr_tail[-2000:])


def _fingerprint(outcome: CallOutcome) -> Any:
    err = outcome.error.model_dump() if outcome.error else None
    return {"ok": outcome.ok, "result": outcome.result, "error": err}


def check_runtime(code: ToolCode, specs: ToolSpecs, graph: APIGraph, schema: DataSchema, dataset: Dataset, *,
                  limits: SandboxLimits = TOOL_CHECK_LIMITS) -> list[CheckResult]:
    """Run every tool on every row in the sandbox (two processes) and judge the results.

    Args:
        code: tools.py; must already pass :func:`check_code_static`.
        specs: The accepted toolspecs (used for the unknown-id probes and argument validation).
        graph: The API graph (call order and argument sources).
        schema: The data schema (field types, decisions).
        dataset: All rows; every one is run.
        limits: Sandbox limits of each of the two processes.

    Returns:
        ``tools.runtime.sandbox`` and, when the first run completed, ``.calls_succeed``,
        ``.results_shape``, ``.result_keys``, ``.no_decision_fields``, ``.result_types``,
        ``.matches_data``, ``.not_constant``, ``.unknown_id_raises``, ``.deterministic`` and the
        ``.idempotent`` and ``.arguments_valid`` warnings.
    """
    order = graph.topological_order()
    sources = argument_sources(graph, dataset.fields)
    rows = [typed_row(r, schema) for r in dataset.rows]
    labels = [row_label(r, i, dataset.id_field) for i, r in enumerate(dataset.rows)]
    plans = [_chain(t, order, sources) + [{"tool": order[0], "same_as": 0}] for t in rows]
    probes = []
    if rows:
        base = plans[0][:-1]
        for i, name in enumerate(order):
            override = _id_params(specs, name, schema, dataset.id_field)
            if override:
                probes.append((name, base + [{"tool": name, "same_as": i, "override": override}]))
    call_labels = labels + [f"the unknown-id probe of {name}" for name, _ in probes]
    forward = [{"args": [p]} for p in plans] + [{"args": [p]} for _, p in probes]
    backward = [{"args": [p]} for p in reversed(plans)] + [{"args": [p]} for _, p in probes]
    with tempfile.TemporaryDirectory(prefix="sopforge-tools-") as tmp:
        folder = write_bundle(Path(tmp), dataset, code)
        (folder / DRIVER_FILE).write_text(DRIVER_SOURCE, encoding="utf-8")
        first = _run(folder, forward, limits)
        second = _run(folder, backward, limits) if first.ok else None
    timing = {"rows": len(rows), "calls_per_row": len(order) + 1, "probes": len(probes),
              "first_run_seconds": first.wall_seconds, "second_run_seconds": second.wall_seconds if second else None,
              "peak_rss_bytes": first.peak_rss_bytes, "layers": first.layers}
    if not first.ok:
        return [_sandbox_failure(first, call_labels, "first")]
    if second is not None and not second.ok:
        reversed_labels = list(reversed(labels)) + call_labels[len(labels):]
        return [_sandbox_failure(second, reversed_labels, "second (rows in reverse order)")]
    results = [check("tools.runtime.sandbox", True, f"{len(rows)} rows x {len(order) + 1} calls and {len(probes)} "
                     f"probes ran twice in {first.wall_seconds + (second.wall_seconds if second else 0):.2f} s",
                     **timing)]
    outcomes: list[CallOutcome] = list(first.results)  # type: ignore[arg-type]
    results += _judge_rows(outcomes[:len(rows)], rows, labels, order, specs, graph, schema)
    results.append(_judge_probes(outcomes[len(rows):], probes))
    assert second is not None
    again: list[CallOutcome] = list(second.results)  # type: ignore[arg-type]
    again = list(reversed(again[:len(rows)])) + again[len(rows):]
    diffs = _Findings()
    for label, a, b in zip(call_labels, outcomes, again):
        fa, fb = _fingerprint(a), _fingerprint(b)
        if fa != fb:
            key, text = _first_difference(fa, fb)
            diffs.add(key, label, text)
    lines = diffs.lines()
    results.append(_result("tools.runtime.deterministic", lines, "results differ between two runs (the second ran the "
                           "rows in reverse order): " + _few(lines) + "; a result must depend only on its arguments "
                           "and the row, never on the clock, randomness or earlier calls",
                           "two runs gave identical results", differences=lines[:10], rows=diffs.rows))
    return results


def _first_difference(a: dict, b: dict) -> tuple[Any, str]:
    """(group key, text) of the first call whose outcome differs between the two runs."""
    ra, rb = a.get("result"), b.get("result")
    if a["ok"] and b["ok"] and isinstance(ra, list) and isinstance(rb, list):
        for x, y in zip(ra, rb):
            if x != y:
                tool = x.get("tool")
                return tool, f"{tool}: {_short(x.get('result'), 80)} then {_short(y.get('result'), 80)}"
    return None, f"{_short(a, 80)} then {_short(b, 80)}"


def _judge_rows(outcomes: list[CallOutcome], rows: list[dict[str, Any]], labels: list[str], order: list[str],
                specs: ToolSpecs, graph: APIGraph, schema: DataSchema) -> list[CheckResult]:
    fields = {f.name: f for f in schema.fields}
    existing = {f.name for f in schema.existing}
    decisions = {f.name for f in schema.decisions}
    valid = {n: _validator(s) for n, s in _valid_schemas(specs).items()}
    raised, shape, keys, decided, types, data, recall, bad_args = (_Findings() for _ in range(8))
    seen: dict[str, dict[str, set[str]]] = {n: {"in": set(), "out": set(), "rows": set()} for n in order}
    checked_args = 0
    for label, row, outcome in zip(labels, rows, outcomes):
        if not outcome.ok:
            key, text = _failed_call(outcome)
            raised.add(key, label, text)
            continue
        if outcome.omitted or not isinstance(outcome.result, list):
            shape.add("size", label, f"one row's results are too large ({outcome.result_bytes} bytes); return only "
                      "the API's output fields")
            continue
        entries = outcome.result
        for step, entry in enumerate(entries):
            tool = entry.get("tool")
            if "skipped" in entry:
                keys.add((tool, "skipped"), label, f"{tool} was not called: no upstream value for "
                         f"{', '.join(entry['skipped'])}")
                continue
            value = entry.get("result")
            if step == len(order):
                if value != entries[0].get("result"):
                    recall.add(tool, label, f"{tool}: {_short(entries[0].get('result'), 60)} then {_short(value, 60)}")
                continue
            if "unencodable" in entry:
                shape.add((tool, "json"), label, f"{tool}: returned a value json.dumps cannot encode "
                          f"({entry['unencodable']})")
                continue
            if not isinstance(value, dict) or not value:
                shape.add((tool, "dict"), label, f"{tool}: returned {_short(value, 60)}, not a non-empty dict")
                continue
            api = graph.api(tool)
            unknown = [k for k in value if k not in fields]
            missing = [k for k in api.output_names if k not in value]
            if unknown or missing:
                keys.add((tool, tuple(unknown), tuple(missing)), label, f"{tool}: " + "; ".join(
                    ([f"unknown keys {', '.join(unknown)}"] if unknown else [])
                    + ([f"missing outputs {', '.join(missing)}"] if missing else [])))
            if hits := sorted(decisions & set(value)):
                decided.add(tool, label, f"{tool} returned {', '.join(hits)}")
            for k, v in value.items():
                if k in fields and k not in decisions and (problem := _value_problem(v, fields[k])):
                    types.add((tool, k), label, f"{tool}: {problem}")
                elif k in existing and k in row and not _same(v, row[k]):
                    data.add((tool, k), label, f"{tool}: {k}={_short(v, 30)} but the record holds {_short(row[k], 30)}")
            if tool in valid and checked_args < ARGUMENT_CHECK_CALLS and (
                    err := next(iter(valid[tool].iter_errors(entry.get("input", {}))), None)) is not None:
                bad_args.add((tool, tuple(err.path)), label, f"{tool}: {one_line(err.message, 80)}")
            checked_args += 1
            seen[tool]["in"].add(_short(entry.get("input"), 10_000))
            seen[tool]["out"].add(_short(value, 10_000))
            seen[tool]["rows"].update(_short(row.get(k), 200) + k for k in api.output_names if k in existing)
    stubs = []
    for name in order:
        s, outputs = seen[name], graph.api(name).output_names
        computed = [k for k in outputs if k not in existing]
        data_varies = len(s["rows"]) > len([k for k in outputs if k in existing])
        if len(s["in"]) >= 2 and len(s["out"]) == 1 and (computed or data_varies):
            stubs.append(f"{name} returned {next(iter(s['out']))[:80]} for all {len(s['in'])} distinct inputs")

    def judged(name: str, found: _Findings, lead: str, ok: str, **kw: Any) -> CheckResult:
        lines = found.lines()
        return _result(name, lines, f"{lead} {_few(lines)}", ok, problems=lines[:20], rows=found.rows, **kw)

    return [
        judged("tools.runtime.calls_succeed", raised, f"calls raised on {raised.rows} of {len(rows)} rows:",
               f"every call succeeded on {len(rows)} rows"),
        judged("tools.runtime.results_shape", shape, "every tool must return a non-empty, JSON-encodable dict "
               "(convert values with int(), float(), str(), bool()):", "results are JSON dicts"),
        judged("tools.runtime.result_keys", keys, "result keys must be schema fields and include every output of the "
               "API:", "result keys are the declared outputs"),
        judged("tools.runtime.no_decision_fields", decided, "tools must never return a [decision] field; the agent "
               "decides by applying the SOP:", "no tool returns a decision field"),
        judged("tools.runtime.result_types", types, "returned values must have their schema type (convert CSV "
               "strings) and one of its choices:", "returned values have their schema types"),
        judged("tools.runtime.matches_data", data, "returned existing fields must equal the record's values:",
               "returned record fields equal the data"),
        _result("tools.runtime.not_constant", stubs, "tools return the same result whatever the row (a stub): "
                + _few(stubs) + "; look the record up and compute from it", "every tool's results vary with its inputs",
                tools=stubs),
        judged("tools.runtime.idempotent", recall, "calling the first tool again after the chain gave another result:",
               "repeated calls give the same result", severity="warning"),
        judged("tools.runtime.arguments_valid", bad_args, "arguments passed along the chain break a toolSpec:",
               "chain arguments validate against the toolSpecs", severity="warning"),
    ]


def _judge_probes(outcomes: list[CallOutcome], probes: list[tuple[str, list[dict]]]) -> CheckResult:
    silent, inconclusive = [], []
    for (name, plan), outcome in zip(probes, outcomes):
        override = plan[-1]["override"]
        shown = ", ".join(f"{k}={v!r}" for k, v in override.items())
        if outcome.ok:
            entries = outcome.result if isinstance(outcome.result, list) else []
            last = entries[-1] if entries else {}
            if "skipped" in last:
                inconclusive.append(name)
            else:
                silent.append(f"{name}({shown}) returned {_short(last.get('result'), 60)}")
            continue
        calls = outcome.tool_calls or []
        last = calls[-1] if calls else None
        probed = (last is not None and not last.ok and last.tool == name and isinstance(last.input, dict)
                  and all(last.input.get(k) == v for k, v in override.items()))
        if not probed:
            inconclusive.append(name)  # the chain before the probe failed; calls_succeed reports it
    return _result("tools.runtime.unknown_id_raises", silent, "tools must look the record up and raise ValueError for "
                   "an unknown identifier: " + _few(silent), f"{len(probes) - len(inconclusive)} tools raise for an "
                   "unknown identifier", problems=silent, inconclusive=inconclusive)
