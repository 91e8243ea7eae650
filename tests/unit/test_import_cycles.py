"""No import circles in the package: every module can be read (and loaded) after the ones it imports.

An edge is any import a module runs: at module level, inside a function (a lazy import is still a
dependency), and ``importlib.import_module`` of a literal or f-string name (how the registry loads
families). Imports under ``if TYPE_CHECKING:`` are annotations and are not edges. ``from pkg import
sub`` where ``sub`` is a submodule is an edge to the submodule only: Python imports the parent
package first whoever asks, so it is no dependency of the importer on the package's own code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "sopforge"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    return skipped


def _dynamic_names(node: ast.Call, modules: set[str]) -> list[str]:
    """Modules ``importlib.import_module(...)`` may load: a literal, or every module an f-string matches."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "import_module" and node.args):
        return []
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr):
        pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) else r"[\w.]+" for v in arg.values)
        return [m for m in modules if re.fullmatch(pattern, m)]
    return []


def import_graph(sources: dict[str, tuple[str, bool]]) -> nx.DiGraph:
    """Edges module -> module it imports, over ``sources`` (name -> (source, is package))."""
    modules = set(sources)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, (source, is_package) in sources.items():
        tree = ast.parse(source)
        skipped = _type_checking_nodes(tree)
        base = module.split(".") if is_package else module.split(".")[:-1]
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    prefix = ".".join(base[: len(base) - node.level + 1])
                    target = f"{prefix}.{node.module}" if node.module else prefix
                submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                targets = submodules + ([target] if len(submodules) < len(node.names) else [])
            elif isinstance(node, ast.Call):
                targets = _dynamic_names(node, modules)
            graph.add_edges_from((module, t) for t in targets if t in modules and t != module)
    return graph


def circles(graph: nx.DiGraph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def package_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py") for p in PACKAGE.rglob("*.py")}


def test_the_package_has_no_import_circle():
    assert circles(import_graph(package_sources())) == []


def test_a_circle_through_a_lazy_import_or_the_registry_is_found():
    lazy = {"p": ("", True), "p.a": ("import p.b\n", False), "p.b": ("def f():\n    from p.a import x\n", False)}
    assert circles(import_graph(lazy)) == [["p.a", "p.b"]]
    registry = {"p": ("import importlib\ndef load(n):\n    return importlib.import_module(f'p.{n}.decl')\n", True),
                "p.x": ("", True), "p.x.decl": ("from p import Spec\n", False)}
    assert circles(import_graph(registry)) == [["p", "p.x.decl"]]
    annotations_only = {"p": ("", True), "p.a": ("import p.b\n", False),
                        "p.b": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import x\n", False)}
    assert circles(import_graph(annotations_only)) == []
