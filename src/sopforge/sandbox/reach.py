"""Policy rules that keep tool code to the objects it made itself (issue 10, class 1).

The import and call rules of ``policy.py`` are only as good as the objects they talk about:
code that may *assign* ``os.path.realpath = ...`` or ``json.dumps = ...``, or reach an
attribute by a computed name (``getattr(x, "".join([...]))``), walks from an allowed object
to ``__class__``, ``__subclasses__`` and ``__globals__`` and from there to ``os.system``.
These rules close that, statically:

* **Attribute assignment** (``=``, ``+=``, annotated, ``del``, ``for``/``with`` targets,
  ``setattr``/``delattr``) only on ``self`` inside a method of a class defined in the module
  (first parameter named ``self``, not a staticmethod), or on a name every binding of which
  is an instance the module constructs (``m = MyManager()``). Never on modules, classes, or
  objects the code was given. Item assignment into a module's attribute (``mod.table[k] =``)
  is rejected too.
* **Class objects stay put**: a class defined in the module may be instantiated, subclassed,
  used in ``isinstance``/``issubclass``/``except``/``raise``/``super``, and its non-method
  attributes read; a method taken *from the class* must be called at once with ``self``
  first (``Base.__init__(self)``). Otherwise ``Cls.method(os.path, ...)`` would run a method
  that sets ``self.x`` with ``self`` bound to a module. ``type(...)`` results may be compared
  or give their ``__name__``; classmethod ``cls`` may be called or read likewise.
* **Names are literals**: ``getattr``/``setattr``/``delattr``/``hasattr`` and
  ``operator.attrgetter``/``methodcaller`` only with literal, non-dunder names, and only
  called (never passed around as values).
* **No dunder attributes** except ``DUNDER_ALLOWED`` (``rules.py``), no private attributes of
  modules (``mod._x``), no frame, code or generator internals (``gi_frame``, ``f_globals``,
  ...), and no annotation written as a string (``typing`` would ``eval`` it).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from sopforge.sandbox.anchors import fold_str, qualify
from sopforge.sandbox.rules import DUNDER_ALLOWED, INTERNAL_ATTRS

__all__ = ["ReachVisitor"]

Flag = Callable[[str, ast.AST, str, str], None]
_DYNAMIC_NAME_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")
_NAME_GETTERS = ("operator.attrgetter", "operator.methodcaller")
_TYPE_ATTRS = frozenset({"__name__", "__qualname__", "__module__"})
_ASSIGN_HINT = ("tools may set attributes only on self (or on instances of their own classes), never on "
                "modules, classes or objects they were given")


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {d.id for d in node.decorator_list if isinstance(d, ast.Name)}


class ReachVisitor(ast.NodeVisitor):
    """Applies the rules above to one module; violations go to ``flag(kind, node, construct, detail)``."""

    def __init__(self, walked: tuple[list[ast.AST], dict[int, ast.AST]], aliases: dict[str, str], flag: Flag):
        """``walked``: the module's nodes and parents (``pyast.walk_with_parents``)."""
        self.aliases, self.flag = aliases, flag
        nodes, self.parents = walked
        self.classes = {n.name for n in nodes if isinstance(n, ast.ClassDef)}
        self.methods: set[str] = set()
        for cls in (n for n in nodes if isinstance(n, ast.ClassDef)):
            for item in cls.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and "staticmethod" not in _decorators(item):
                    self.methods.add(item.name)
        self.instances = self._own_instances(nodes)
        self.method_self: list[bool] = []  # per function: is its first parameter a method's self?
        self.cls_names: list[str | None] = []  # per function: the classmethod's cls parameter

    # ----------------------------------------------------------------- what the module owns
    def _own_instances(self, nodes: list[ast.AST]) -> set[str]:
        """Names every binding of which is ``OwnClass(...)``."""
        values: dict[str, list[ast.AST | None]] = {}
        for node in nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        values.setdefault(target.id, []).append(node.value)
                    else:  # unpacking: the names it binds get unknown values (not x in x.attr = ...)
                        for name in ast.walk(target):
                            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                                values.setdefault(name.id, []).append(None)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For, ast.comprehension)):
                target = node.target
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(getattr(node, "value", None)
                                                            if isinstance(node, (ast.AnnAssign, ast.NamedExpr)) else None)
            elif isinstance(node, ast.arg):
                values.setdefault(node.arg, []).append(None)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                for name in ast.walk(node.optional_vars):
                    if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                        values.setdefault(name.id, []).append(None)
        return {name for name, bound in values.items() if bound and all(
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in self.classes for v in bound)}

    def _owned_target(self, base: ast.AST) -> bool:
        if not isinstance(base, ast.Name):
            return False
        if base.id == "self" and self.method_self and self.method_self[-1]:
            return True
        return base.id in self.instances

    def _class_object(self, node: ast.AST) -> bool:
        """An expression that evaluates to a class of this module (as far as syntax shows)."""
        if isinstance(node, ast.Name):
            return node.id in self.classes or (bool(self.cls_names) and node.id == self.cls_names[-1])
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"

    # ----------------------------------------------------------------- scopes
    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        parent = self.parents.get(id(node))
        args = node.args.posonlyargs + node.args.args
        first = args[0].arg if args else None
        decorators = _decorators(node)
        in_class = isinstance(parent, ast.ClassDef)
        is_method = in_class and first == "self" and not decorators & {"staticmethod", "classmethod"}
        # A function nested in a method sees the method's self unless it binds its own.
        inherits = bool(self.method_self) and self.method_self[-1] and not in_class and all(a.arg != "self" for a in args)
        self.method_self.append(is_method or inherits)
        self.cls_names.append(first if in_class and "classmethod" in decorators else None)
        for arg in ast.walk(node.args):
            if isinstance(arg, ast.arg) and arg.annotation is not None:
                self._check_annotation(arg.annotation)
        if node.returns is not None:
            self._check_annotation(node.returns)
        self.generic_visit(node)
        self.method_self.pop()
        self.cls_names.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.method_self.append(False)
        self.cls_names.append(None)
        self.generic_visit(node)
        self.method_self.pop()
        self.cls_names.pop()

    def _check_annotation(self, node: ast.AST) -> None:
        for part in ast.walk(node):
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                self.flag("dynamic_code", part, f"annotation {part.value[:40]!r}",
                          "write annotations as expressions (typing evaluates string annotations with eval)")

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_annotation(node.annotation)
        self.generic_visit(node)

    # ----------------------------------------------------------------- attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if isinstance(node.ctx, (ast.Store, ast.Del)) and not self._owned_target(node.value):
            self.flag("dynamic_code", node, f"assignment to attribute '{ast.unparse(node)[:60]}'", _ASSIGN_HINT)
        if _is_dunder(attr) and attr not in DUNDER_ALLOWED:
            self.flag("dynamic_code", node, f"attribute '{attr}'",
                      "tools may not reach interpreter internals through dunder attributes")
        elif attr in INTERNAL_ATTRS:
            self.flag("dynamic_code", node, f"attribute '{attr}'",
                      "tools may not reach frames, code objects or raw memory")
        dotted = qualify(node, self.aliases)
        if dotted and any(part.startswith("_") and not _is_dunder(part) for part in dotted.split(".")[1:]):
            self.flag("dynamic_code", node, dotted, "tools may not use private attributes of modules")
        if isinstance(node.ctx, ast.Load) and self._class_object(node.value):
            self._check_class_attribute(node)
        self.generic_visit(node)

    def _check_class_attribute(self, node: ast.Attribute) -> None:
        base = node.value
        if isinstance(base, ast.Call):  # type(x).something
            if node.attr not in _TYPE_ATTRS:
                self.flag("dynamic_code", node, f"{ast.unparse(node)[:60]}",
                          "use type(x) only to compare it or for its __name__")
            return
        if node.attr not in self.methods:
            return  # a constant, a staticmethod or an attribute the class does not define
        parent = self.parents.get(id(node))
        called_on_self = (isinstance(parent, ast.Call) and parent.func is node and parent.args
                          and isinstance(parent.args[0], ast.Name) and parent.args[0].id == "self"
                          and bool(self.method_self) and self.method_self[-1])
        if not called_on_self:
            self.flag("dynamic_code", node, f"method '{ast.unparse(node)[:60]}' taken from the class",
                      "call methods on an instance; Base.method(self, ...) is allowed inside methods")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)) and qualify(node.value, self.aliases):
            self.flag("dynamic_code", node, f"assignment into '{ast.unparse(node.value)[:60]}'",
                      "tools may not change the state of imported modules")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            parent = self.parents.get(id(node))
            is_callee = isinstance(parent, ast.Call) and parent.func is node
            if node.id in _DYNAMIC_NAME_BUILTINS and not is_callee:
                self.flag("dynamic_code", node, f"'{node.id}' used as a value", "call it directly with a literal name")
            elif self._class_object(node) and not is_callee and not self._class_use_ok(node, parent):
                self.flag("dynamic_code", node, f"class '{node.id}' used as a value",
                          "instantiate your classes or use them in isinstance/except/raise; do not pass them around")
        self.generic_visit(node)

    def _class_use_ok(self, node: ast.Name, parent: ast.AST | None) -> bool:
        if isinstance(parent, ast.Attribute):
            return True  # judged in _check_class_attribute
        if isinstance(parent, ast.ClassDef) or isinstance(parent, (ast.ExceptHandler, ast.Raise)):
            return True
        if isinstance(parent, ast.Tuple):  # except (A, B) / isinstance(x, (A, B))
            grand = self.parents.get(id(parent))
            return isinstance(grand, ast.ExceptHandler) or self._isinstance_arg(parent, grand)
        return self._isinstance_arg(node, parent) or (
            isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "super")

    @staticmethod
    def _isinstance_arg_any(parent: ast.AST | None) -> bool:
        return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                and parent.func.id in ("isinstance", "issubclass"))

    @staticmethod
    def _isinstance_arg(node: ast.AST, parent: ast.AST | None) -> bool:
        return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                and parent.func.id in ("isinstance", "issubclass") and len(parent.args) == 2 and parent.args[1] is node)

    # ----------------------------------------------------------------- dynamic names
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (isinstance(func, ast.Name) and func.id == "type" and len(node.args) == 1
                and not isinstance(node.args[0], ast.Constant)):  # type(None) is a plain builtin
            parent = self.parents.get(id(node))
            if isinstance(parent, ast.Tuple):
                parent = self.parents.get(id(parent))
            if not (isinstance(parent, (ast.Compare, ast.Attribute)) or self._isinstance_arg_any(parent)):
                self.flag("dynamic_code", node, f"{ast.unparse(node)[:40]} used as a value",
                          "use type(x) only to compare it or for its __name__")
        if isinstance(func, ast.Name) and func.id in _DYNAMIC_NAME_BUILTINS and len(node.args) >= 2:
            self._check_dynamic_name(node, func.id)
        dotted = qualify(func, self.aliases)
        if dotted in _NAME_GETTERS:
            for arg in node.args:
                text = fold_str(arg)
                parts = text.split(".") if text is not None else []
                if text is None or any(_is_dunder(p) or p in INTERNAL_ATTRS for p in parts):
                    self.flag("dynamic_code", node, f"{dotted}({ast.unparse(arg)[:40]})",
                              "name attributes with literal, non-dunder strings")
        self.generic_visit(node)

    def _check_dynamic_name(self, node: ast.Call, fname: str) -> None:
        target, name = node.args[0], fold_str(node.args[1])
        if name is None:
            self.flag("dynamic_code", node, f"{fname}() with a computed name",
                      "name the attribute with a literal string; to dispatch tools, use a dict of bound methods "
                      "such as {'getX': self.getX}")
            return
        if name in INTERNAL_ATTRS:
            self.flag("dynamic_code", node, f"{fname}(..., {name!r})", "tools may not reach frames or code objects")
        if fname in ("setattr", "delattr") and not self._owned_target(target):
            self.flag("dynamic_code", node, f"{fname}({ast.unparse(target)[:40]}, {name!r}, ...)", _ASSIGN_HINT)
        if self._class_object(target) and name in self.methods:
            self.flag("dynamic_code", node, f"{fname}({ast.unparse(target)[:40]}, {name!r})",
                      "call methods on an instance")
