"""Policy rules against reaching a name the checks cannot see (issue 20, item 5).

The checks in ``policy.py`` and ``reach.py`` judge names and attributes as they are written.
Each bypass of the issue made one of them be written somewhere the checks did not look; this
module closes them as classes, not as the five one-liners:

* **names rebound to builtins**: no name of :data:`rules.NEVER_BOUND` (``exec``, ``open``,
  ``getattr``, ...) may be bound anywhere: assignment, augmented or annotated assignment,
  walrus, ``for``/``with``/``except``/``match`` targets, comprehension variables, parameters
  (which is how ``def f(open=open)`` shadows ``open`` inside ``f``), ``def``, ``class`` and
  ``import ... as``. ``policy.py`` then never treats these names as shadowed;
* **pattern matching**: a class pattern reads attributes by keyword (``case
  object(__self__=b)``), so its keywords obey the attribute rules; ``__match_args__``, which
  names attributes for positional patterns, cannot be bound (see above);
* **attribute access through formatting**: ``.format`` and ``.format_map`` only as a direct
  call on a string literal (folded when it is concatenated from literals), whose fields read no
  dunder, private or internal attribute: a template built at run time (``"{0." + name + "}"``)
  is refused, since its fields cannot be read from the source;
* **attribute access through ``operator``**: ``attrgetter`` and ``methodcaller`` only as a
  direct call (``reach.py`` checks their literal names); used as a value, or asked for by name
  (``getattr(operator, "attrgetter")``, ``methodcaller("format", ...)``), they are refused.

None of this is the boundary: code that gets past it is still inside the OS sandbox.
"""

from __future__ import annotations

import ast
import string
from collections.abc import Callable

from sopforge.sandbox.anchors import fold_str, qualify
from sopforge.sandbox.rules import DUNDER_ALLOWED, INTERNAL_ATTRS, NAME_REACHING_ATTRS, NEVER_BOUND

__all__ = ["ByNameVisitor"]

Flag = Callable[[str, ast.AST, str, str], None]
_GETTERS = ("operator.attrgetter", "operator.methodcaller")
_BIND_HINT = "never rebind or shadow a builtin that reaches code, files or attributes; choose another name"


def _bad_attribute(name: str) -> bool:
    dunder = name.startswith("__") and name.endswith("__") and len(name) > 4
    return (dunder and name not in DUNDER_ALLOWED) or name in INTERNAL_ATTRS or (name.startswith("_") and not dunder)


def template_problem(text: str) -> str | None:
    """What a ``str.format`` template reads that tools may not (None when it reads nothing)."""
    pending, fields = [text], []
    try:
        while pending:  # a format spec may hold fields of its own: "{0:{1.attr}}"
            for _, field, spec, _ in string.Formatter().parse(pending.pop()):
                if field is not None:
                    fields.append(field)
                if spec:
                    pending.append(spec)
    except ValueError as err:
        return f"a malformed format template ({err})"
    for field in fields:
        parts = field.replace("[", ".").replace("]", "").split(".")[1:]
        bad = [p for p in parts if _bad_attribute(p)]
        if bad:
            return f"a format field reading {bad[0]!r}"
    return None


class ByNameVisitor(ast.NodeVisitor):
    """Applies the rules above to one module; violations go to ``flag(kind, node, construct, detail)``."""

    def __init__(self, parents: dict[int, ast.AST], aliases: dict[str, str], flag: Flag):
        """``parents``: each node's parent by id (``pyast.walk_with_parents``)."""
        self.aliases, self.flag, self.parents = aliases, flag, parents

    # ----------------------------------------------------------------- bindings
    def bound(self, node: ast.AST, name: str | None) -> None:
        if name in NEVER_BOUND:
            self.flag("dynamic_code", node, f"binding the name '{name}'", _BIND_HINT)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.bound(node, node.id)
        else:
            self._check_getter_value(node)

    def visit_arg(self, node: ast.arg) -> None:
        self.bound(node, node.arg)
        self.generic_visit(node)

    def _visit_named(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.bound(node, node.name)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_named

    def visit_alias(self, node: ast.alias) -> None:
        self.bound(node, (node.asname or node.name).split(".")[0])

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self.bound(node, node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self.bound(node, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self.bound(node, node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.bound(node, node.rest)
        self.generic_visit(node)

    # ----------------------------------------------------------------- pattern matching
    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for name in node.kwd_attrs:
            if _bad_attribute(name):
                self.flag("dynamic_code", node, f"class pattern reading '{name}'",
                          "a class pattern reads attributes by name; tools may not reach internals that way")
        self.generic_visit(node)

    # ----------------------------------------------------------------- formatting and operator
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ("format", "format_map") and isinstance(node.ctx, ast.Load):
            self._check_format(node)
        self._check_getter_value(node)
        self.generic_visit(node)

    def _check_format(self, node: ast.Attribute) -> None:
        parent = self.parents.get(id(node))
        template = fold_str(node.value)
        if not (isinstance(parent, ast.Call) and parent.func is node) or template is None:
            self.flag("dynamic_code", node, f"'.{node.attr}' on {ast.unparse(node.value)[:40]}",
                      "call .format only directly on a string literal (or use an f-string), so its "
                      "fields can be read from the source")
            return
        problem = template_problem(template)
        if problem:
            self.flag("dynamic_code", node, f"format string {template[:40]!r}",
                      f"{problem}: tools may not reach internals through format fields")

    def _check_getter_value(self, node: ast.Name | ast.Attribute) -> None:
        dotted = qualify(node, self.aliases)
        if dotted not in _GETTERS:
            return
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute):
            return  # judged at the outer node
        if not (isinstance(parent, ast.Call) and parent.func is node):
            self.flag("dynamic_code", node, f"'{dotted}' used as a value",
                      "call it directly with literal attribute names")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = fold_str(node.args[1]) if len(node.args) >= 2 else None
        if isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "delattr", "hasattr") \
                and name in NAME_REACHING_ATTRS:
            self.flag("dynamic_code", node, f"{func.id}(..., {name!r})", "call it directly instead")
        if qualify(func, self.aliases) in _GETTERS:
            for arg in node.args:
                text = fold_str(arg)
                if text is not None and text.split(".")[-1] in NAME_REACHING_ATTRS:
                    self.flag("dynamic_code", node, f"{ast.unparse(func)[:40]}({text!r})",
                              "call the method directly on a string literal")
        self.generic_visit(node)
