"""Which tools a policy violation in ``tools.py`` blocks: its method's tool alone, or the whole file.

A violation inside a method of a class blocks that method, and every method that reaches it
through ``self.<name>`` (its callers, transitively), so that no call the audit makes can run
the offending line. Tools are blocked by name; the others still run on every row. A violation
anywhere else (module level, imports, ``__init__``, the dispatcher, a helper function outside
a class) runs when the module loads or on every call, so it blocks the whole file, as does a
method the constructor or the dispatcher itself needs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from sopforge.checks import CheckResult
from sopforge.pyast import parse_python

__all__ = ["PolicyScope", "policy_scope"]

_WHOLE_FILE_METHODS = ("__init__", "__new__", "__init_subclass__", "__getattr__", "__getattribute__",
                       "__del__", "__post_init__")
_DISPATCHER = "process_tool_call"


@dataclass
class PolicyScope:
    """Where the violations of one file sit."""

    whole_file: list[int] = field(default_factory=list)  # lines that block the file
    blocked_tools: dict[str, list[int]] = field(default_factory=dict)  # tool -> violating lines it reaches


def _methods(tree: ast.Module) -> dict[str, tuple[int, int, ast.AST]]:
    """Method name -> (first line, last line, node) for every method of every class (first definition wins)."""
    found: dict[str, tuple[int, int, ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name not in found:
                    first = min([item.lineno, *(d.lineno for d in item.decorator_list)])
                    found[item.name] = (first, item.end_lineno or item.lineno, item)
    return found


def _self_references(node: ast.AST) -> set[str]:
    """Names reached as ``self.<name>`` (or ``cls.<name>``) inside a method."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")}


def policy_scope(source: str, results: list[CheckResult], tool_names: set[str]) -> PolicyScope:
    """Attribute the failed policy results of ``source`` (tools.py) to tools, or to the whole file.

    Args:
        source: the file's text.
        results: its ``check_code`` results (failed ones carry ``details['violations']`` with lines).
        tool_names: the toolspec names.
    """
    scope = PolicyScope()
    lines = sorted({v.get("line", 0) for r in results if not r.passed
                    for v in r.details.get("violations", [{"line": r.details.get("line", 0)}])})
    if not lines:
        return scope
    try:
        methods = _methods(parse_python(source))
    except (SyntaxError, ValueError):
        scope.whole_file = lines
        return scope
    bad: dict[str, list[int]] = {}
    for line in lines:
        owner = next((name for name, (first, last, _) in methods.items() if first <= line <= last), None)
        if owner is None or owner in _WHOLE_FILE_METHODS or owner == _DISPATCHER:
            scope.whole_file.append(line)
        else:
            bad.setdefault(owner, []).append(line)
    refs = {name: _self_references(node) for name, (_, _, node) in methods.items()}
    changed = True
    while changed:  # callers of a blocked method are blocked too
        changed = False
        for name, reached in refs.items():
            if name == _DISPATCHER:
                continue  # it names every tool; the audit never asks it for a blocked one
            hit = [line for other in reached & set(bad) if other != name for line in bad[other]]
            if hit and not set(hit) <= set(bad.get(name, [])):
                bad.setdefault(name, []).extend(x for x in hit if x not in bad.get(name, []))
                changed = True
    for name in _WHOLE_FILE_METHODS:
        if name in bad:
            scope.whole_file += bad[name]
    scope.blocked_tools = {name: sorted(set(v)) for name, v in bad.items() if name in tool_names}
    return scope
