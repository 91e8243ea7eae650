"""Source surgery for distractor tools: read the ``DistractorTools`` mixin, cut it down, merge it into tools.py.

The model writes every distractor as a method of one mixin class ``DistractorTools``. Tools
that fail verification must leave no trace in the export, so the mixin is cut down by **line
ranges** found with :mod:`ast` (never ``ast.unparse``: the model's own text, comments and
formatting are what a reviewer reads). Members the kept tools do not reference (helpers of
dropped tools) go too, so a helper that would shadow something of the Manager cannot survive
through a tool that was kept.

Merging (our decision, docs/hardening/distractors.md): SOP-Bench's harness instantiates the
one public ``*Manager`` of tools.py and calls ``process_tool_call``; the tools stage's contract
check wants every tool as a method *in that class's body*. So the merged module is

1. the base tools.py with its Manager renamed ``_<Manager>Base`` (one token edit);
2. the kept mixin source;
3. a generated ``class <Manager>(_<Manager>Base, DistractorTools)`` holding one delegating
   method per real and per distractor tool (each names the class that implements it, so the
   MRO cannot swap one for the other) and a ``process_tool_call`` that routes distractor names
   to the mixin and every other name to the original dispatcher.

The base class comes first in the MRO: nothing in the mixin can replace a Manager member.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from sopforge.pyast import parse_python

__all__ = ["MIXIN_CLASS", "MixinMember", "MixinSource", "base_manager_members", "merge_tools_source",
           "module_bindings", "read_mixin"]

MIXIN_CLASS = "DistractorTools"
_SECTION = "# ---- Distractor tools (sopforge distractors stage): no task needs any of them. ----"


@dataclass
class MixinMember:
    """One statement of the mixin's class body: a method or a class attribute."""

    name: str
    start: int  # 1-based first line (decorators and the comment lines right above included)
    end: int  # 1-based last line
    is_method: bool
    node: ast.stmt
    references: set[str] = field(default_factory=set)


@dataclass
class MixinSource:
    """The parsed distractor code: its lines, the mixin's members and the module-level imports."""

    source: str
    class_node: ast.ClassDef
    members: dict[str, MixinMember]
    imports: list[ast.stmt]

    def method(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        member = self.members.get(name)
        return member.node if member is not None and member.is_method else None  # type: ignore[return-value]

    def needed_members(self, tools: list[str]) -> set[str]:
        """The tools plus every member they reference, transitively (over-approximated by name)."""
        needed, todo = set(), [t for t in tools if t in self.members]
        while todo:
            name = todo.pop()
            if name in needed:
                continue
            needed.add(name)
            todo += [r for r in self.members[name].references if r in self.members and r not in needed]
        return needed

    def keep_only(self, tools: list[str]) -> str:
        """The source with only ``tools`` and the members they need left in the class ("" when none).

        Lines of removed members are cut out; a class left without statements gets ``pass``.
        """
        if not tools:
            return ""
        needed = self.needed_members(tools)
        drop: set[int] = set()
        for name, member in self.members.items():
            if name not in needed:
                drop.update(range(member.start, member.end + 1))
        lines = self.source.splitlines()
        kept = [line for i, line in enumerate(lines, start=1) if i not in drop]
        if not needed:
            kept.insert(self.class_node.lineno, "    pass")
        return "\n".join(kept).rstrip() + "\n"


def _member_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _references(node: ast.AST) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Name):
            names.add(sub.id)
    return names


def _start_line(node: ast.stmt, lines: list[str]) -> int:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    while start > 1 and lines[start - 2].strip().startswith("#"):
        start -= 1
    return start


def read_mixin(source: str) -> MixinSource:
    """Parse distractor code and locate the ``DistractorTools`` class and its members.

    Raises:
        SyntaxError: The code does not parse.
        ValueError: There is no top-level ``class DistractorTools``.
    """
    tree = parse_python(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == MIXIN_CLASS), None)
    if cls is None:
        raise ValueError(f"the code defines no top-level class {MIXIN_CLASS}")
    lines = source.splitlines()
    members: dict[str, MixinMember] = {}
    for node in cls.body:
        for name in _member_names(node):
            members[name] = MixinMember(name=name, start=_start_line(node, lines), end=node.end_lineno or node.lineno,
                                        is_method=isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)),
                                        node=node)
    for member in members.values():
        member.references = _references(member.node) - {member.name}
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return MixinSource(source=source, class_node=cls, members=members, imports=imports)


def module_bindings(tree: ast.Module) -> dict[str, str]:
    """Top-level name -> how it is bound (``import os``, ``from x import y``, ``def``, ``class``, ``=``)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name.split(".")[0]] = f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                found[a.asname or a.name] = f"from {'.' * node.level}{node.module or ''} import {a.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = "def"
        else:
            for name in _member_names(node):
                found[name] = "="
            if isinstance(node, (ast.For, ast.With)):
                found.update({n.id: "=" for n in ast.walk(node) if isinstance(n, ast.Name)
                              and isinstance(n.ctx, ast.Store)})
    return found


def _manager_class(tree: ast.Module, class_name: str) -> ast.ClassDef:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        raise ValueError(f"tools.py defines no top-level class {class_name}")
    return cls


def base_manager_members(base_source: str, class_name: str) -> set[str]:
    """Every name the real Manager has: methods, class attributes and ``self.<x>`` it assigns."""
    cls = _manager_class(parse_python(base_source), class_name)
    names = {n for node in cls.body for n in _member_names(node)}
    for sub in ast.walk(cls):
        if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"):
            names.add(sub.attr)
    return names


def _public_methods(cls: ast.ClassDef) -> list[ast.FunctionDef]:
    return [n for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
            and n.name != "process_tool_call"]


def _delegate(fn: ast.FunctionDef, owner: str) -> str:
    a = fn.args
    names = [x.arg for x in [*a.posonlyargs, *a.args]][1:]  # without self
    n_posonly = max(len(a.posonlyargs) - 1, 0)
    passed = [*names[:n_posonly], *(f"{n}={n}" for n in [*names[n_posonly:], *(x.arg for x in a.kwonlyargs)])]
    if a.vararg:
        passed.append(f"*{a.vararg.arg}")
    if a.kwarg:
        passed.append(f"**{a.kwarg.arg}")
    return (f"    def {fn.name}({ast.unparse(a)}):\n"
            f"        return {owner}.{fn.name}(self{''.join(', ' + p for p in passed)})\n")


def _unused_name(wanted: str, taken: set[str]) -> str:
    name = wanted
    while name in taken:
        name += "_"
    return name


def merge_tools_source(base_source: str, class_name: str, mixin_source: str, tools: list[str]) -> str:
    """tools.py with the distractor tools registered on its Manager (module docstring explains the form).

    Args:
        base_source: The accepted tools.py.
        class_name: Its Manager class.
        mixin_source: Distractor code holding ``class DistractorTools`` (already cut to the kept tools).
        tools: The distractor tool names to register, in export order.

    Returns:
        The merged module; ``base_source`` unchanged when ``tools`` is empty.

    Raises:
        ValueError: The Manager class or a distractor method is missing.
    """
    if not tools:
        return base_source
    tree = parse_python(base_source)
    cls = _manager_class(tree, class_name)
    mixin = read_mixin(mixin_source)
    base = _unused_name(f"_{class_name}Base", set(module_bindings(tree)) | {MIXIN_CLASS})
    lines = base_source.splitlines()
    line = lines[cls.lineno - 1]
    renamed, n = re.subn(rf"\bclass\s+{re.escape(class_name)}\b", f"class {base}", line, count=1)
    if n != 1:
        raise ValueError(f"cannot find 'class {class_name}' on line {cls.lineno} of tools.py")
    lines[cls.lineno - 1] = renamed
    methods = []
    for name in tools:
        fn = mixin.method(name)
        if not isinstance(fn, ast.FunctionDef):
            raise ValueError(f"{MIXIN_CLASS} has no plain method {name}")
        methods.append(_delegate(fn, MIXIN_CLASS))
    routes = "".join(f"            {name!r}: self.{name},\n" for name in tools)
    final = (
        f"class {class_name}({base}, {MIXIN_CLASS}):\n"
        f'    """The registry the agent sees: the SOP\'s tools plus distractor tools that no task needs.\n\n'
        f"    Every tool delegates to the class that implements it; process_tool_call sends distractor\n"
        f'    names to {MIXIN_CLASS} and every other name to the original dispatcher.\n    """\n\n'
        + "\n".join(_delegate(fn, base) for fn in _public_methods(cls)) + "\n"
        + "\n".join(methods) + "\n"
        "    def process_tool_call(self, tool_name, tool_input):\n"
        f"        distractors = {{\n{routes}        }}\n"
        "        if tool_name in distractors:\n"
        "            if not isinstance(tool_input, dict):\n"
        '                raise ValueError(f"tool_input for {tool_name} must be an object")\n'
        "            return distractors[tool_name](**tool_input)\n"
        f"        return {base}.process_tool_call(self, tool_name, tool_input)\n"
    )
    return "\n".join(lines).rstrip() + f"\n\n\n{_SECTION}\n\n" + mixin_source.rstrip() + "\n\n\n" + final
