"""``ast.parse`` that is safe to call from several threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so two threads
parsing at once (the flow runs independent stages and items in Prefect's worker threads) can fail
with ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905). Parsing is
fast next to everything around it, so one lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["literal_python", "parse_python", "walk_with_parents"]

_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time (raises SyntaxError like it)."""
    with _LOCK:
        return ast.parse(source)


def literal_python(text: str):
    """``ast.literal_eval(text)`` (which parses first), one thread at a time."""
    with _LOCK:
        return ast.literal_eval(text)


def walk_with_parents(tree: ast.AST) -> tuple[list[ast.AST], dict[int, ast.AST]]:
    """Every node in ``ast.walk``'s order and each node's parent by id, in one walk: the sandbox
    policy's visitors each walked a 30-40 kB tools.py for these, most of the policy's time."""
    nodes: list[ast.AST] = [tree]
    parents: dict[int, ast.AST] = {}
    for node in nodes:  # breadth first, as ast.walk: the list grows behind the loop
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            nodes.append(child)
    return nodes, parents
