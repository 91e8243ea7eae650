"""Checks of the tools stage: API docs, toolspecs and tools.py against the graph, the data and each other.

Three families, all named ``tools.*`` with one actionable line per message:

* **static**: docs and toolspecs cover exactly the API graph's nodes with exactly its parameters;
  every ``inputSchema.json`` is a valid JSON Schema of type object; ``tools.py`` passes the
  sandbox's AST policy and defines one public ``*Manager`` class with ``process_tool_call`` and
  one method per toolSpec whose parameters are the spec's properties.
* **rows vs specs**: every dataset row, read back from the bundle CSV by schema type, gives
  arguments that validate against each spec whose parameters are all existing fields.
* **runtime**: the tools run on every row in a sandboxed child (two processes in all).

The runtime family lives in :mod:`sopforge.families.sop_tools.verify.tool_runtime` (its results are judged in
:mod:`sopforge.families.sop_tools.verify.tool_judging`); helpers shared by all three are in
:mod:`sopforge.families.sop_tools.verify.tool_common`. Every public name of those modules is importable from here.
"""

from __future__ import annotations

import ast
from typing import Any

from sopforge.pyast import parse_python
from sopforge.parsing import one_line
from sopforge.families.sop_tools.models.api_graph import API_NAME_RE, APIGraph
from sopforge.checks import CheckResult
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset, row_label
from sopforge.families.sop_tools.models.tools import APIDocs, ToolCode, ToolSpecs
from sopforge.sandbox import check_code
from sopforge.families.sop_tools.verify.tool_judging import RECORD_ID
from sopforge.families.sop_tools.verify.tool_common import (
    _few, _Findings, _result, _schema_problem, _set_diff, _valid_schemas, _validator, typed_row,
)

__all__ = ["WRITE_MARKER", "check_api_docs", "check_code_static", "check_rows_against_specs", "check_toolspecs"]

# How a toolSpec tells an agent (and the checks) that calling it changes the database. SOP-Bench's
# harness forwards only name, description and inputSchema.json, so the declaration lives in the
# description, where the function-calling and the ReAct agents both see it (and in metadata.json).
WRITE_MARKER = "[WRITE]"

_JSON_TYPES = {"string": "string", "enum": "string", "date": "string", "datetime": "string",
               "integer": "integer", "float": "number", "boolean": "boolean"}


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
        if d := _set_diff(list(doc.response), [RECORD_ID] if api.writes else api.output_names):
            named = sorted(decisions & set(doc.response))
            hint = f" ({', '.join(named)} is a [decision] field: the agent decides it, no API returns it)" \
                if named else ""
            if api.writes:
                hint += f" (a write returns only {{\"{RECORD_ID}\": \"<table>/<case id>\"}})"
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
    params, types, required, described, effects = [], [], [], [], []
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
        if api.writes and not text.lstrip().startswith(WRITE_MARKER):
            effects.append(f"{name} writes {api.writes_table} but its description does not start with {WRITE_MARKER}")
        elif not api.writes and WRITE_MARKER in text:
            effects.append(f"{name} is a read but its description says {WRITE_MARKER}")
        unnamed = [p for p in props if p not in text]
        if unnamed:
            described.append(f"{name}: {', '.join(unnamed)}")
    results += [
        _result("tools.specs.parameters", params, "properties must be exactly the API's graph inputs: " + _few(params),
                "parameters match the graph inputs", apis=params),
        _result("tools.specs.types", types, "property types must match the schema (string, integer, number, boolean, "
                "array): " + _few(types), "property types match the schema", properties=types),
        _result("tools.specs.write_declared", effects, "a toolSpec must not hide a write as a read (nor the "
                f"reverse): {_few(effects)}; start the description of every write tool with {WRITE_MARKER} and say "
                "which record it makes", "every write tool declares itself in its description", tools=effects),
        _result("tools.specs.required", required, "parameters the graph marks required are not in \"required\": "
                + _few(required), "required parameters are listed", severity="warning", apis=required),
        _result("tools.specs.descriptions", described, "descriptions should name every parameter (the ReAct agent "
                "sees only name and description): " + _few(described), "descriptions name every parameter",
                severity="warning", apis=described),
    ]
    return results


def check_rows_against_specs(dataset: Dataset, specs: ToolSpecs, schema: DataSchema) -> list[CheckResult]:
    """Arguments built from every row validate against each spec whose parameters are all existing fields.

    Returns:
        ``tools.specs.rows_valid``, quoting the first few (row, tool, error).
    """
    columns = set(dataset.fields)
    conditional = {f.name for f in schema.existing if f.present_if is not None}
    checked = {name: _validator(s) for name, s in _valid_schemas(specs).items()
               if set(specs.properties(name)) <= columns}
    found = _Findings()
    for i, row in enumerate(dataset.rows):
        typed = typed_row(row, schema)
        for name, validator in checked.items():
            args = {p: typed[p] for p in specs.properties(name) if p in typed}
            if any(v is None and p in conditional for p, v in args.items()):
                continue  # a conditional field without a value: the case never calls this tool with it
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
_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add",
                       "discard", "remove", "__setitem__"})
_MUTABLE_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque"})


def _mutable(node: ast.AST | None) -> bool:
    if isinstance(node, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    return isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in _MUTABLE_CALLS


def _shared_state_writes(tree: ast.Module, cls: ast.ClassDef | None) -> list[str]:
    """Lines where a method changes state that outlives the instance (module or class variables).

    Flags ``global``/``nonlocal``, mutation of a module-level mutable (``_LOG.append``, ``_DB[k] = v``),
    assignment to a class attribute through the class (``Manager.count += 1``, ``type(self).x = ...``),
    and mutation of a mutable class attribute that ``__init__`` never rebinds on ``self``
    (``_tables = {}`` in the class body, then ``self._tables[t][k] = record``: one dict for every Manager).
    """
    module_mutables = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                       for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                       if isinstance(t, ast.Name) and _mutable(node.value)}
    class_name = cls.name if cls is not None else None
    class_mutables: set[str] = set()
    init_binds: set[str] = set()
    methods: list[ast.AST] = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if cls is not None:
        for node in cls.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and _mutable(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                class_mutables |= {t.id for t in targets if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.append(node)
                if node.name == "__init__":
                    init_binds |= {t.attr for sub in ast.walk(node) if isinstance(sub, (ast.Assign, ast.AnnAssign))
                                   for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])
                                   if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                   and t.value.id == "self"}
    shared_attrs = class_mutables - init_binds

    def root(node: ast.AST) -> str | None:
        """'module:X', 'class:X' or 'self:X' for the variable a target or receiver expression changes."""
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            base = node.value
            if isinstance(node, ast.Attribute) and isinstance(base, ast.Name):
                if base.id == "self" and node.attr in shared_attrs:
                    return f"self.{node.attr} (a class-level {node.attr} shared by every Manager)"
                if base.id == class_name:
                    return f"{class_name}.{node.attr}"
            if isinstance(node, ast.Attribute) and isinstance(base, ast.Call) and getattr(base.func, "id", "") == "type":
                return f"type(self).{node.attr}"
            node = base
        if isinstance(node, ast.Name) and node.id in module_mutables:
            return f"{node.id} (a module-level variable)"
        return None

    found: list[str] = []
    for fn in methods:
        for node in ast.walk(fn):
            where = None
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                where = f"{'global' if isinstance(node, ast.Global) else 'nonlocal'} {', '.join(node.names)}"
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    if isinstance(target, (ast.Subscript, ast.Attribute)) and (name := root(target)):
                        where = f"assigns into {name}"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in _MUTATORS and (name := root(node.func.value)):
                where = f"calls {node.func.attr}() on {name}"
            if where:
                found.append(f"line {node.lineno}: {fn.name} {where}")
    return found


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
        tree = parse_python(code.source)
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
    shared = _shared_state_writes(tree, cls)
    results.append(_result("tools.code.state_in_instance", shared, "write tools may change only the Manager's own "
                           "tables (self._tables, created in __init__): " + _few(shared) + "; state kept in a module "
                           "or class variable outlives the instance and leaks between cases and runs",
                           "every change is made to the instance's own state", problems=shared))
    unordered = _set_iterations(tree)
    results.append(_result("tools.code.set_order", [str(n) for n in unordered],
                           f"line {', '.join(map(str, unordered))}: iterating a set gives an order that changes between "
                           "runs; iterate a list or sorted(...) instead", "no order is taken from a set",
                           severity="warning", lines=unordered))
    return results
