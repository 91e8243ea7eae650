"""Benchmark statistics in the shape of SOP-Bench Table 3 and TELLER-Bench Table 4.

SOP-Bench reports per SOP: tasks n, tools t, SOP tokens τ. TELLER reports per scenario the
ground-truth API graph: nodes, edges, density E/(N(N−1)). We add the column roles and the
decision outcome distribution (with the majority share, i.e. the score of always answering
the most common label), which says whether every SOP outcome is exercised.

**SOP tokens** are approximate: see :mod:`sopforge.tokens` (``token_method`` is stored with them).
"""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import BaseModel, Field

from sopforge.families.sop_tools.export.cells import to_cell
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.tokens import TOKEN_METHOD, approx_token_count, label_distribution

__all__ = ["BenchmarkStats", "GraphStats", "benchmark_stats", "graph_stats"]

class GraphStats(BaseModel):
    """TELLER Table 4 columns."""

    nodes: int = Field(description="APIs in the ground-truth dependency graph.")
    edges: int = Field(description="Distinct directed dependencies between them.")
    density: float = Field(description="E / (N (N - 1)); 0 for fewer than two nodes.")


class BenchmarkStats(BaseModel):
    """Counts of one exported benchmark (SOP-Bench Table 3 + TELLER Table 4 + label balance)."""

    num_tasks: int = Field(description="Rows of the test set (SOP-Bench n).")
    num_tools: int = Field(description="Tools in toolspecs.json (SOP-Bench t).")
    sop_words: int = Field(description="Whitespace-separated words of sop.txt.")
    sop_tokens: int = Field(description="Approximate tokens of sop.txt (SOP-Bench τ); see token_method.")
    token_method: str = Field(TOKEN_METHOD, description="How sop_tokens was counted.")
    graph: GraphStats | None = Field(None, description="API dependency graph size (TELLER Table 4), when known.")
    num_input_columns: int = Field(description="Columns shown to the agent.")
    num_hidden_columns: int = Field(description="Columns only the tools read (lookup data, intermediate values).")
    num_output_columns: int = Field(description="Ground-truth columns.")
    decision_distribution: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="Per output column: label -> number of tasks, most common first.")
    majority_share: dict[str, float] = Field(
        default_factory=dict, description="Per output column: share of the most common label (always-majority score).")
    mean_expected_calls: float | None = Field(None, description="Mean length of the expected call sequences, if known.")


def graph_stats(*, api_graph: APIGraph | None = None, edges: Iterable[tuple[str, str]] | None = None,
                nodes: Iterable[str] | None = None) -> GraphStats | None:
    """Nodes, edges and density from an APIGraph, or from explicit edges (and nodes)."""
    if api_graph is not None:
        m = api_graph.metrics()
        return GraphStats(nodes=m.nodes, edges=m.edges, density=m.density)
    if edges is None and nodes is None:
        return None
    edge_set = {(a, b) for a, b in (edges or []) if a != b}
    node_set = set(nodes or []) | {n for e in edge_set for n in e}
    n, e = len(node_set), len(edge_set)
    return GraphStats(nodes=n, edges=e, density=e / (n * (n - 1)) if n > 1 else 0.0)


def benchmark_stats(*, sop_text: str, toolspecs: list, rows: list[dict[str, Any]], input_columns: list[str],
                    output_columns: list[str], api_graph: APIGraph | None = None,
                    graph_edges: Iterable[tuple[str, str]] | None = None,
                    tasks: list[dict] | None = None) -> BenchmarkStats:
    """Statistics of a benchmark about to be exported (values as Python objects).

    Args:
        sop_text: the SOP given to the agent.
        toolspecs: the toolspec elements.
        rows: one dict per task with every column.
        input_columns: columns shown to the agent.
        output_columns: ground-truth columns.
        api_graph: the ground-truth API graph (preferred source of the graph figures).
        graph_edges: ``(prerequisite, consumer)`` pairs when there is no APIGraph object.
        tasks: task dicts with ``expected_calls``, for the mean call count.
    """
    columns = list(dict.fromkeys(k for r in rows[:1] for k in r))
    dist, share = {}, {}
    for col in output_columns:
        dist[col], share[col] = label_distribution([to_cell(r[col]) if r.get(col) is not None else "" for r in rows])
    mean_calls = None
    if tasks:
        mean_calls = round(sum(len(t.get("expected_calls") or []) for t in tasks) / len(tasks), 3)
    return BenchmarkStats(
        num_tasks=len(rows), num_tools=len(toolspecs), sop_words=len(sop_text.split()),
        sop_tokens=approx_token_count(sop_text), graph=graph_stats(api_graph=api_graph, edges=graph_edges),
        num_input_columns=len(input_columns), num_output_columns=len(output_columns),
        num_hidden_columns=len([c for c in columns if c not in input_columns and c not in output_columns]),
        decision_distribution=dist, majority_share=share, mean_expected_calls=mean_calls,
    )


