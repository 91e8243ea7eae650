"""Static helpers for the AST policy: import aliases, scopes, literals and anchored paths.

The file-access rule of ``policy.py`` needs to know, without running anything, whether a
path expression stays inside the module's own folder. ``PathAnchors`` answers that by
following every assignment to a name or attribute in the module: a name is anchored only
when *all* its assigned values are, so a later ``self.path = user_value`` cannot sneak in.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

__all__ = ["FILE", "DIR", "DIRSEP", "PathAnchors", "bound_names", "collect_aliases", "fold_str", "qualify"]

FILE, DIR, DIRSEP = "file", "dir", "dirsep"  # the module file; its folder (or below); folder + os.sep
_PATH_WRAPPERS = ("os.path.abspath", "os.path.realpath", "os.path.normpath")


def fold_str(node: ast.AST | None) -> str | None:
    """Evaluate a string built only from literals ('op' + 'en', f'{"x"}'); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold_str(node.left), fold_str(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [fold_str(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None  # type: ignore[arg-type]
    return None


def clean_literal(text: str | None, *, leading_sep: bool) -> bool:
    """A path literal that stays under its anchor: relative (or '/'-led after +), no '..'."""
    if not text or "\x00" in text or "~" in text:
        return False
    if leading_sep != text.startswith(("/", "\\")):
        return False
    return ".." not in re.split(r"[/\\]", text)


def collect_aliases(nodes: Iterable[ast.AST]) -> dict[str, str]:
    """Map each import-bound name to the dotted name it stands for (np -> numpy), from every node
    of a module (``ast.walk`` or ``pyast.walk_with_parents``)."""
    aliases: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def qualify(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """Dotted name of an expression rooted at an import alias ('np.random' -> 'numpy.random')."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = qualify(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


def bound_names(scope: ast.AST) -> set[str]:
    """Names bound directly in a scope (not in nested functions), for builtin shadowing."""
    names: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        names.update(x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x)
    body = scope.body if isinstance(scope.body, list) else [scope.body]  # type: ignore[attr-defined]
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        elif isinstance(node, ast.Lambda):
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return names


class PathAnchors:
    """Decides whether path expressions of one module are anchored at its own file."""

    def __init__(self, nodes: Iterable[ast.AST], aliases: dict[str, str]):
        """``nodes``: every node of the module (``ast.walk`` or ``pyast.walk_with_parents``)."""
        self.aliases = aliases
        self.bindings: dict[tuple[str, str], list[ast.AST | None]] = {}
        self.dynamic_setattr = False
        self._collect(nodes)

    def _record(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            self.bindings.setdefault(("name", target.id), []).append(value)
        elif isinstance(target, ast.Attribute):
            self.bindings.setdefault(("attr", target.attr), []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._record(elt, None)
        elif isinstance(target, ast.Starred):
            self._record(target.value, None)

    def _collect(self, nodes: Iterable[ast.AST]) -> None:
        """Record every value assigned to each name/attribute; None marks an unknown value."""
        unknown = lambda name: self._record(ast.Name(id=name, ctx=ast.Store()), None)  # noqa: E731
        for node in nodes:
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and len(node.args) > 1:
                name = fold_str(node.args[1])
                if name is None:
                    self.dynamic_setattr = True
                else:
                    self._record(ast.Attribute(value=node.args[0], attr=name, ctx=ast.Store()), None)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._record(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._record(node.target, node.value)
            elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension)):
                self._record(node.target, None)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                self._record(node.optional_vars, None)
            elif isinstance(node, ast.arg):
                unknown(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    unknown((a.asname or a.name).split(".")[0])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                unknown(node.name)

    def kind(self, node: ast.AST | None, seen: frozenset[tuple[str, str]] = frozenset()) -> str | None:
        """FILE/DIR/DIRSEP when ``node`` is anchored at the module file, else None."""
        if node is None:
            return None
        if isinstance(node, ast.Name) and node.id == "__file__":
            return None if ("name", "__file__") in self.bindings else FILE
        if isinstance(node, ast.Attribute) and self.dynamic_setattr:
            return None  # setattr(obj, name, value) with a computed name can rebind any attribute
        if isinstance(node, (ast.Name, ast.Attribute)):
            key = ("name", node.id) if isinstance(node, ast.Name) else ("attr", node.attr)
            values = self.bindings.get(key)
            if not values or key in seen:
                return None
            kinds = {self.kind(v, seen | {key}) for v in values}
            return kinds.pop() if len(kinds) == 1 else None
        if isinstance(node, ast.Call):
            return self._call_kind(node, seen)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.kind(node.left, seen)
            if left == DIR and qualify(node.right, self.aliases) in ("os.sep", "os.path.sep"):
                return DIRSEP
            text = fold_str(node.right)
            if left == DIR and clean_literal(text, leading_sep=True):
                return DIR
            if left == DIRSEP and clean_literal(text, leading_sep=False):
                return DIR
            return None
        if isinstance(node, ast.JoinedStr) and node.values:
            head, *tail = node.values
            if not (isinstance(head, ast.FormattedValue) and head.conversion == -1 and head.format_spec is None):
                return None
            text = fold_str(ast.JoinedStr(values=tail))
            return DIR if self.kind(head.value, seen) == DIR and clean_literal(text, leading_sep=True) else None
        return None

    def _call_kind(self, node: ast.Call, seen: frozenset[tuple[str, str]]) -> str | None:
        if node.keywords or not node.args:
            return None
        func = qualify(node.func, self.aliases)
        first = self.kind(node.args[0], seen)
        if func in _PATH_WRAPPERS and len(node.args) == 1:
            return first
        if func == "os.path.dirname" and len(node.args) == 1:
            return DIR if first == FILE else None  # a second dirname would climb out of the folder
        if func == "os.path.join" and first in (DIR, DIRSEP):
            rest = node.args[1:]
            if all(clean_literal(fold_str(a), leading_sep=False) for a in rest):
                return DIR if rest else first
        return None
