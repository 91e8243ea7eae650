"""AST policy for LLM-written tool code: reject unsafe constructs before anything runs.

The policy is the first of the sandbox's layers (the runtime audit hook, resource limits and
a network namespace follow in ``runner.py``/``child.py``). Being static, it can only judge
what the source says; it is deliberately strict so that the re-ask message tells the model
exactly what to write instead.

File access rule (the one a static check can verify): ``open()`` and the pandas readers may
only be given a path *anchored at the module file*, i.e. built from ``__file__`` with
``os.path.dirname``/``abspath``/``realpath``/``normpath`` (one ``dirname`` at most, so the
path never climbs above the module's folder), then extended with ``os.path.join(anchor,
"<literal>", ...)``, ``anchor + "/<literal>"`` or ``f"{anchor}/<literal>"``, where every
literal is relative and has no ``..`` component. A variable or attribute (``_HERE``,
``self.data_path``) qualifies when *every* assignment to that name in the module is itself
anchored. The mode must be a literal without ``w``, ``a``, ``x`` or ``+``.

Object rules (``reach.py``): attributes may be assigned only on ``self`` in the module's own
methods or on instances the module constructs; attribute names given to ``getattr`` and its
kin must be literals; no dunder attribute outside a short allow-list, no private attribute
of a module, no frame or code internals; classes of the module are not passed around.

Two modes. ``generated`` (the default) is the rule above, for code sopforge asks a model to
write: it can be told exactly what to write instead. ``published`` is for folders written by
people (``sopforge audit``): their tools read data through paths kept on ``self``, log, parse
dates with dateutil and shuffle lists, so it accepts any *read* of a file however the path is
built (the OS boundary mounts nothing but a read-only copy of the folder, and the guard reports
a read outside it), the modules of ``rules.PUBLISHED_ALLOWED`` and ``ast.literal_eval``; it
reports randomness and clock as a passing note, because the audit measures their effect by
running the tools twice. Everything else (network, processes, writes, environment, dynamic
code, native code) is refused alike in both modes.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import asdict, dataclass
from typing import Literal

from sopforge.pyast import parse_python, walk_with_parents
from sopforge.checks import CheckResult, check
from sopforge.sandbox.anchors import PathAnchors, bound_names, collect_aliases, fold_str, qualify
from sopforge.sandbox.byname import ByNameVisitor
from sopforge.sandbox.reach import ReachVisitor
from sopforge.sandbox.rules import (
    AST_ALLOWED_ATTRS, CLOCK_ATTRS, CLOCK_PARSERS, DANGEROUS_DUNDER_STRINGS, DEFAULT_ALLOWED, DEFERRED_KINDS,
    DENIED_MODULES, DUNDER_ALLOWED, FORBIDDEN_BUILTINS, KINDS, NEVER_BOUND, NUMPY_IO, OS_ALLOWED_ATTRS, OS_PATH_DENIED,
    PANDAS_PATH_KWARGS, PANDAS_READERS, PANDAS_WRITERS, PATH_WRITERS, PUBLISHED_ALLOWED, PUBLISHED_LIFTED, REASONS,
    os_attribute_kind,
)

__all__ = ["DEFAULT_ALLOWED", "PUBLISHED_ALLOWED", "PolicyMode", "Violation", "check_code", "find_violations",
           "imported_modules"]

PolicyMode = Literal["generated", "published"]

_FORMAT_ATTR = re.compile(r"\{[^{}]*\.__\w+__")
_WRITER_TARGET_KWARGS = frozenset(PANDAS_PATH_KWARGS) | {"buf", "excel_writer", "path_or_buffer", "con", "name"}
_SHOWN_PER_KIND = 5
_PANDAS_FILE_OBJECTS = frozenset({"ExcelFile", "ExcelWriter", "HDFStore"})  # open paths unchecked


@dataclass(frozen=True)
class Violation:
    """One rejected construct; ``message`` is what the reviewer and the re-asked model see."""

    kind: str
    line: int
    construct: str
    detail: str

    @property
    def message(self) -> str:
        return f"line {self.line}: {self.construct} is not allowed ({self.detail})"


def check_code(source: str, *, allowed_imports: frozenset[str] | None = None,
               mode: PolicyMode = "generated") -> list[CheckResult]:
    """Check tool code against the sandbox policy without running it.

    Args:
        source: Python source of one module (tools or reference procedure).
        allowed_imports: importable dotted module names (a name allows its submodules); default
            ``DEFAULT_ALLOWED`` (``PUBLISHED_ALLOWED`` in published mode). Modules in the hard
            deny-list (network, processes, randomness, clock, ...) stay rejected even when listed here.
        mode: ``generated`` (sopforge's own generated code) or ``published`` (a folder written by
            people: reads anywhere the OS boundary allows, randomness and clock deferred to run time).

    Returns:
        One failed CheckResult per violation kind (``tools.policy.<kind>``, message listing
        each offending line), or a passing ``tools.policy`` result; in published mode a passing
        ``tools.policy.deferred`` note lists the randomness and clock uses (details ``lines``).
    """
    if allowed_imports is None:
        allowed_imports = PUBLISHED_ALLOWED if mode == "published" else DEFAULT_ALLOWED
    # Callers prefix the messages and extend the details: each gets its own copies of the kept verdict.
    return [r.model_copy(deep=True) for r in _verdict(source, frozenset(allowed_imports), mode)]


# A stage's checks, its sandbox runs and the package's audit judge the same few sources again and again
# (every sandbox run checks its whole folder): the policy's AST walks were a tenth of a demo generation's
# sampled CPU (py-spy) before verdicts were kept.
@functools.lru_cache(maxsize=256)
def _verdict(source: str, allowed_imports: frozenset[str], mode: PolicyMode) -> tuple[CheckResult, ...]:
    return tuple(_judge(source, allowed_imports, mode))


def _judge(source: str, allowed_imports: frozenset[str], mode: PolicyMode) -> list[CheckResult]:
    try:
        tree = parse_python(source)
    except SyntaxError as err:
        line = err.lineno or 0
        return [check("tools.policy.syntax", False, f"line {line}: syntax error: {err.msg}", line=line)]
    except ValueError as err:  # e.g. source containing NUL bytes
        return [check("tools.policy.syntax", False, f"line 0: source cannot be parsed: {err}", line=0)]
    found_all = find_violations(tree, allowed_imports=allowed_imports, mode=mode)
    violations = [v for v in found_all if not (mode == "published" and v.kind in DEFERRED_KINDS)]
    deferred = sorted((v for v in found_all if v not in violations), key=lambda v: v.line)
    notes = [check("tools.policy.deferred", True,
                   "uses randomness or the clock ("
                   + ", ".join(f"{v.construct} at line {v.line}" for v in deferred[:_SHOWN_PER_KIND])
                   + (f" and {len(deferred) - _SHOWN_PER_KIND} more" if len(deferred) > _SHOWN_PER_KIND else "")
                   + "): allowed in published code; running the tools twice shows whether it changes a result",
                   lines=[v.line for v in deferred], constructs=[v.construct for v in deferred])] if deferred else []
    if not violations:
        return [check("tools.policy", True, "code passes the sandbox policy"), *notes]
    results = []
    for kind in KINDS:
        found = sorted((v for v in violations if v.kind == kind), key=lambda v: v.line)
        if not found:
            continue
        message = "; ".join(v.message for v in found[:_SHOWN_PER_KIND])
        if len(found) > _SHOWN_PER_KIND:
            message += f"; and {len(found) - _SHOWN_PER_KIND} more"
        results.append(check(f"tools.policy.{kind}", False, message,
                             violations=[asdict(v) | {"message": v.message} for v in found]))
    return results + notes


@functools.lru_cache(maxsize=64)  # every sandbox run reads its whole folder's imports (see _verdict)
def imported_modules(source: str) -> frozenset[str]:
    """Return the absolute module names a source imports (empty if it does not parse)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return frozenset(names)


def find_violations(tree: ast.Module, *, allowed_imports: frozenset[str] = DEFAULT_ALLOWED,
                    mode: PolicyMode = "generated") -> list[Violation]:
    """Return every policy violation in a parsed module (deduplicated, unsorted); in published mode
    the randomness and clock ones are among them, for the caller to defer."""
    walked = walk_with_parents(tree)  # one walk for every rule set below
    visitor = _PolicyVisitor(tree, walked[0], allowed_imports, published=mode == "published")
    visitor.visit(tree)
    ReachVisitor(walked, visitor.aliases, visitor.flag).visit(tree)
    ByNameVisitor(walked[1], visitor.aliases, visitor.flag).visit(tree)
    return list(visitor.violations.values())


def _short(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _PolicyVisitor(ast.NodeVisitor):
    """Collects violations; one instance per module, visited once."""

    def __init__(self, tree: ast.Module, nodes: list[ast.AST], allowed: frozenset[str], *, published: bool = False):
        self.allowed = allowed
        self.published = published
        self.violations: dict[tuple[str, int, str], Violation] = {}
        self.aliases = collect_aliases(nodes)
        self.anchors = PathAnchors(nodes, self.aliases)
        self.scopes: list[set[str]] = [bound_names(tree)]
        self.checked_open: set[int] = set()
        self.inner_attributes: set[int] = set()

    # ----------------------------------------------------------------- bookkeeping
    def flag(self, kind: str, node: ast.AST, construct: str, detail: str | None = None) -> None:
        line = getattr(node, "lineno", 0)
        self.violations.setdefault((kind, line, construct),
                                   Violation(kind, line, construct, detail or REASONS[kind]))

    def qualify(self, node: ast.AST) -> str | None:
        return qualify(node, self.aliases)

    def shadowed(self, name: str) -> bool:
        # A builtin that may never be bound is never shadowed: binding it is itself a violation
        # (byname.py), and its uses are judged as the builtin's whatever else the module does.
        return name not in NEVER_BOUND and any(name in scope for scope in self.scopes)

    # ----------------------------------------------------------------- module rules
    def denied(self, dotted: str) -> tuple[str, str] | None:
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            prefix = ".".join(parts[:n])
            if self.published and prefix in PUBLISHED_LIFTED:
                return None  # the published mode lifts them (ast: literal_eval only, see check_qualified)
            if prefix in DENIED_MODULES:
                return prefix, DENIED_MODULES[prefix]
        return None

    def check_module(self, name: str, node: ast.AST) -> bool:
        hit = self.denied(name)
        if hit:
            self.flag(hit[1], node, f"import of '{name}'")
            return False
        parts = name.split(".")
        if not any(".".join(parts[:n]) in self.allowed for n in range(1, len(parts) + 1)):
            allowed = ", ".join(sorted(self.allowed))
            self.flag("imports", node, f"import of '{name}'", f"{REASONS['imports']}: {allowed}")
            return False
        return True

    def check_qualified(self, dotted: str, node: ast.AST) -> None:
        parts = dotted.split(".")
        if parts[0] == "os" and len(parts) > 1:
            attr = parts[1]
            if attr not in OS_ALLOWED_ATTRS:
                self.flag(os_attribute_kind(attr), node, f"os.{attr}")
            elif attr == "path" and len(parts) > 2 and parts[2] in OS_PATH_DENIED:
                self.flag(OS_PATH_DENIED[parts[2]], node, f"os.path.{parts[2]}")
            return
        hit = self.denied(dotted)
        if hit:
            self.flag(hit[1], node, dotted)
        if parts[0] == "ast" and len(parts) > 1 and parts[1] not in AST_ALLOWED_ATTRS:
            self.flag("dynamic_code", node, dotted, "only ast.literal_eval is allowed")
        if parts[0] == "numpy" and len(parts) > 1 and parts[1] in NUMPY_IO:
            self.flag("filesystem", node, f"numpy.{parts[1]}", "tools may not read or write files with numpy")
        last = parts[-1]
        if parts[0] == "pandas" and len(parts) > 1 and (
                (last.startswith("read_") and last not in PANDAS_READERS) or last in _PANDAS_FILE_OBJECTS):
            kind = "dynamic_code" if "pickle" in last else "filesystem"
            self.flag(kind, node, f"pandas.{last}", f"allowed pandas readers: {', '.join(sorted(PANDAS_READERS))}")

    # ----------------------------------------------------------------- visitors
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_module(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.flag("imports", node, "relative import", "tools are loaded by path; import modules absolutely")
            return
        if not self.check_module(node.module, node):
            return
        for a in node.names:
            if a.name == "*":
                self.flag("imports", node, f"'from {node.module} import *'", "import each name explicitly")
                continue
            dotted = f"{node.module}.{a.name}"
            if a.name.startswith("_") and not a.name.startswith("__"):
                self.flag("dynamic_code", node, f"import of '{dotted}'", "tools may not use private attributes of modules")
            hit = self.denied(dotted)
            if hit:
                self.flag(hit[1], node, f"import of '{dotted}'")
            else:
                self.check_qualified(dotted, node)

    def _visit_scope(self, node: ast.AST) -> None:
        self.scopes.append(bound_names(node))
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_scope

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and not self.shadowed(node.id):
            kind = FORBIDDEN_BUILTINS.get(node.id)
            if kind:
                self.flag(kind, node, f"use of '{node.id}'")
            elif node.id == "open" and id(node) not in self.checked_open:
                self.flag("filesystem", node, "'open' used as a value", "call open(...) directly so it can be checked")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in CLOCK_ATTRS:
            self.flag("clock", node, _short(node))
        # Judge a dotted chain once, at its outermost attribute, so os.environ.get is one finding.
        if isinstance(node.value, ast.Attribute):
            self.inner_attributes.add(id(node.value))
        dotted = self.qualify(node) if id(node) not in self.inner_attributes else None
        if dotted:
            self.check_qualified(dotted, node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            if node.value in DANGEROUS_DUNDER_STRINGS:
                self.flag("dynamic_code", node, f"string {node.value!r}")
            elif _FORMAT_ATTR.search(node.value):
                self.flag("dynamic_code", node, "format string reading a dunder attribute")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and not self.shadowed(func.id):
            if func.id == "open":
                self.checked_open.add(id(func))
                self._check_open(node)
            elif func.id in ("getattr", "setattr", "delattr", "hasattr"):
                self._check_getattr(node, func.id)
        elif isinstance(func, ast.Attribute):
            self._check_method_call(node, func)
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in CLOCK_PARSERS:
            for arg in (*node.args, *(k.value for k in node.keywords)):
                text = fold_str(arg)
                if text is not None and text.strip().lower() in ("now", "today"):
                    self.flag("clock", node, f"{name}({text!r})")
        self.generic_visit(node)

    def _check_open(self, node: ast.Call) -> None:
        keywords = {k.arg: k.value for k in node.keywords}
        path = node.args[0] if node.args else keywords.get("file")
        mode = node.args[1] if len(node.args) > 1 else keywords.get("mode")
        if mode is not None:
            text = fold_str(mode)
            if text is None:
                self.flag("filesystem", node, "open() with a computed mode", "use a literal read mode such as 'r'")
            elif set(text) & set("wax+"):
                self.flag("filesystem", node, f"open(..., {text!r})", "tools may not write files")
        self._check_path(node, path, "open")

    def _check_path(self, node: ast.Call, path: ast.AST | None, what: str) -> None:
        if self.published:
            return  # any read: the OS boundary mounts only the folder, and the guard reports reads outside it
        if self.anchors.kind(path) is None:
            shown = _short(path, 40) if path is not None else ""
            self.flag("filesystem", node, f"{what}({shown})",
                      "paths must be built from the module's own folder: "
                      "os.path.join(os.path.dirname(os.path.abspath(__file__)), '<file>')")

    def _check_getattr(self, node: ast.Call, fname: str) -> None:
        if len(node.args) < 2:
            return
        name = fold_str(node.args[1])
        if name is None:
            return  # a computed name is rejected by reach.py
        if name.startswith("__") and name.endswith("__") and name not in DUNDER_ALLOWED:
            self.flag("dynamic_code", node, f"{fname}(..., {name!r})")
        if name in FORBIDDEN_BUILTINS or name == "open":
            self.flag("dynamic_code", node, f"{fname}(..., {name!r})")
        if name in CLOCK_ATTRS:
            self.flag("clock", node, f"{fname}(..., {name!r})")
        base = self.qualify(node.args[0])
        if base:
            self.check_qualified(f"{base}.{name}", node)

    def _check_method_call(self, node: ast.Call, func: ast.Attribute) -> None:
        name, dotted = func.attr, self.qualify(func)
        keywords = {k.arg for k in node.keywords}
        if dotted and dotted.startswith("pandas.") and name in PANDAS_READERS:
            kw = {k.arg: k.value for k in node.keywords}
            path = node.args[0] if node.args else next((kw[k] for k in PANDAS_PATH_KWARGS if k in kw), None)
            self._check_path(node, path, f"pandas.{name}")
        if name in PANDAS_WRITERS and (node.args or keywords & _WRITER_TARGET_KWARGS):
            self.flag("filesystem", node, f".{name}(...) with a target", "tools may not write files")
        if name == "tofile":
            self.flag("filesystem", node, ".tofile()", "tools may not write files")
        if self.published and name in PATH_WRITERS:
            self.flag("filesystem", node, f".{name}()", "tools may not change files")
        if self.published and name == "open" and dotted is None:  # pathlib.Path(...).open(mode)
            kw = {k.arg: k.value for k in node.keywords}
            mode = node.args[0] if node.args else kw.get("mode")
            text = fold_str(mode) if mode is not None else "r"
            if text is None or set(text) & set("wax+"):
                self.flag("filesystem", node, ".open() for writing", "open files with a literal read mode such as 'r'")
        if name == "sample" and "random_state" not in keywords:
            self.flag("randomness", node, ".sample() without random_state")

