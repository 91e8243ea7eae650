"""§9 item 6 and the sandbox policy: what ``tools.py`` is, judged from its source alone.

The AST policy (``sopforge.sandbox.check_code``) runs first; code that fails it is
reported and never executed. The Manager rules mirror the harness's loader: the
alphabetically first public module-level name ending in ``Manager`` is instantiated with no
arguments, and tool calls go to ``process_tool_call(name, input)`` or, without it, to the
method named like the tool.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from sopforge.pyast import parse_python
from sopforge.audit.checks_data import shown
from sopforge.audit.loader import REFERENCE_FILE, FolderContents
from sopforge.checks import CheckResult, check
from sopforge.sandbox import PUBLISHED_ALLOWED, check_code

__all__ = ["CodeFacts", "analyze_tools", "check_policy", "check_tools_code"]


@dataclass
class _Method:
    params: list[str]
    required: list[str]
    var_keyword: bool
    var_positional: bool


@dataclass
class CodeFacts:
    """What the source says about the Manager the harness would pick."""

    manager_names: list[str] = field(default_factory=list)
    chosen: str | None = None
    chosen_is_class: bool = False
    methods: dict[str, _Method] = field(default_factory=dict)
    has_dispatcher: bool = False
    init: _Method | None = None
    external_bases: list[str] = field(default_factory=list)
    strings: set[str] = field(default_factory=set)
    hash_lines: list[int] = field(default_factory=list)


def _method(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> _Method:
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    if "staticmethod" not in decorators and positional:
        positional = positional[1:]  # self / cls
    required = [a.arg for a in positional[: max(0, len(positional) - len(args.defaults))]]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return _Method(params=[a.arg for a in [*positional, *args.kwonlyargs]], required=required,
                   var_keyword=args.kwarg is not None, var_positional=args.vararg is not None)


def _module_names(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level bound names (classes, functions, assignments, imports) -> defining node."""
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names[n.id] = node
    return names


def analyze_tools(source: str) -> CodeFacts | None:
    """Parse ``tools.py`` and describe its Manager; None when it does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    facts = CodeFacts()
    names = _module_names(tree)
    classes = {n: node for n, node in names.items() if isinstance(node, ast.ClassDef)}
    facts.manager_names = sorted(n for n in names if n.endswith("Manager") and not n.startswith("_"))
    facts.strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    facts.hash_lines = sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                               and isinstance(n.func, ast.Name) and n.func.id == "hash"})
    if not facts.manager_names:
        return facts
    facts.chosen = facts.manager_names[0]
    node = classes.get(facts.chosen)
    facts.chosen_is_class = node is not None
    # Walk the class and the bases defined in this module, nearest definition first (a simple MRO).
    queue, seen = [node] if node is not None else [], set()
    while queue:
        cls = queue.pop(0)
        if cls.name in seen:
            continue
        seen.add(cls.name)
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name not in facts.methods:
                facts.methods[item.name] = _method(item)
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                queue.append(classes[base.id])
            elif not (isinstance(base, ast.Name) and base.id == "object"):
                facts.external_bases.append(ast.unparse(base))
    facts.has_dispatcher = "process_tool_call" in facts.methods
    facts.init = facts.methods.get("__init__")
    return facts


def check_policy(folder: Path) -> tuple[list[CheckResult], set[str]]:
    """Run the sandbox's AST policy on every .py file; return the results and the failing files.

    Checks are named ``tools.policy.<kind>`` for tools.py, ``reference.policy.<kind>`` for the
    reference procedure and ``files.policy.<kind>`` for any other module (the sandbox refuses
    to run a folder in which any module fails). The policy is the sandbox's ``published`` mode:
    a folder written by people reads its files and imports its libraries as such folders do.
    """
    files = sorted(folder.rglob("*.py"))
    allowed = PUBLISHED_ALLOWED | {p.stem for p in files}
    results, failing = [], set()
    for path in files:
        rel = path.relative_to(folder).as_posix()
        prefix = {"tools.py": "tools", REFERENCE_FILE: "reference"}.get(rel, "files")
        for r in check_code(path.read_text(encoding="utf-8", errors="replace"), allowed_imports=allowed,
                            mode="published"):
            name = r.name.replace("tools.policy", f"{prefix}.policy", 1)
            results.append(r.model_copy(update={"name": name, "message": f"{rel}: {r.message}",
                                                "details": {**r.details, "file": rel}}))
            if not r.passed:
                failing.add(rel)
    return results, failing


def check_tools_code(c: FolderContents, facts: CodeFacts | None) -> list[CheckResult]:
    """Manager class, constructor, dispatch and method signatures against the toolspecs."""
    if c.tools_source is None:
        return []
    if facts is None:
        return [check("tools.parses", False, "tools.py does not parse as Python")]
    out = []
    if not facts.manager_names:
        return [check("tools.manager_class", False, "tools.py defines no public name ending in 'Manager'; "
                      "the harness cannot find the tool class")]
    first = facts.chosen
    if not facts.chosen_is_class:
        out.append(check("tools.manager_class", False,
                         f"the alphabetically first public *Manager name is {first!r}, which is not a class defined "
                         "in tools.py (an import or alias); the harness would instantiate it; rename it or prefix "
                         "it with '_'", names=facts.manager_names))
    elif not facts.has_dispatcher and not any(isinstance(s.name, str) and s.name in facts.methods for s in c.specs):
        out.append(check("tools.manager_class", False,
                         f"the harness instantiates {first!r} (the alphabetically first public *Manager name), which "
                         "has neither process_tool_call nor a method named like a tool"
                         + (f"; the tool class seems to be another of {shown(facts.manager_names)}: prefix helpers "
                            "with '_'" if len(facts.manager_names) > 1 else ""), names=facts.manager_names))
    else:
        out.append(check("tools.manager_class", True, f"tool class {first}", names=facts.manager_names))
    if len(facts.manager_names) > 1:
        out.append(check("tools.manager_unique", False,
                         f"several public names end in 'Manager' ({shown(facts.manager_names)}); the harness takes "
                         f"{first!r}; prefix helpers with '_'", severity="warning", names=facts.manager_names))
    if not facts.chosen_is_class:
        return out
    init = facts.init
    needs = list(init.required) if init else []
    out.append(check("tools.constructor_zero_args", not needs,
                     f"{first}.__init__ requires {', '.join(needs)}; the harness calls {first}() with no arguments"
                     if needs else f"{first}() takes no arguments", parameters=needs))
    specs = [s for s in c.specs if isinstance(s.name, str)]
    undispatchable = []
    for s in specs:
        if s.name in facts.methods:
            continue
        if facts.has_dispatcher and s.name in facts.strings:
            continue
        undispatchable.append(s.name)
    how = "process_tool_call" if facts.has_dispatcher else "a method of the same name (no process_tool_call)"
    out.append(check("tools.dispatch", not undispatchable,
                     f"toolspec names tools.py cannot dispatch via {how}: {shown(undispatchable)}"
                     if undispatchable else f"every toolspec name is dispatchable via {how}", tools=undispatchable))
    beyond, lacking_required, lacking_optional = [], [], []
    for s in specs:
        m = facts.methods.get(s.name)
        if m is None:
            continue
        props = set(s.properties)
        beyond += [f"{s.name}({p})" for p in m.required if p not in props]
        if m.var_keyword:
            continue
        accepted = set(m.params)
        lacking_required += [f"{s.name}.{p}" for p in s.required if p not in accepted]
        lacking_optional += [f"{s.name}.{p}" for p in props if p not in accepted and p not in s.required]
    out.append(check("tools.method_params", not (beyond or lacking_required),
                     "; ".join(filter(None, [
                         f"methods need parameters the schema does not have: {shown(beyond)}" if beyond else "",
                         f"required schema parameters the method does not accept (TypeError when passed): "
                         f"{shown(lacking_required)}" if lacking_required else ""]))
                     or "method parameters agree with the schemas", beyond=beyond, missing=lacking_required))
    if lacking_optional:
        out.append(check("tools.method_optional_params", False,
                         f"optional schema parameters the method does not accept: {shown(lacking_optional)}",
                         severity="warning", missing=lacking_optional))
    out.append(check("tools.no_hash_builtin", not facts.hash_lines,
                     f"tools.py calls hash() (line(s) {shown(facts.hash_lines)}): str/bytes hashes are salted per "
                     "process, so results differ between harness runs (the sandbox pins PYTHONHASHSEED=0 and "
                     "cannot observe it); derive values from the row's data instead"
                     if facts.hash_lines else "no hash() call", lines=facts.hash_lines))
    return out
