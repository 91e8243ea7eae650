"""Counts like SOP-Bench Table 3 and TELLER Table 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sopforge.families.sop_tools.export.metadata import benchmark_stats, graph_stats
from sopforge.tokens import approx_token_count

GOOD = Path(__file__).resolve().parents[3] / "fixtures" / "sopbench" / "loan_triage"


@pytest.mark.parametrize("nodes, edges, density", [
    (20, 34, 0.0895), (10, 16, 0.1778), (11, 17, 0.1545), (13, 26, 0.1667), (17, 23, 0.0846),
])
def test_density_reproduces_teller_table_4(nodes, edges, density):
    # a chain of `nodes` APIs plus extra forward edges, `edges` in total
    names = [f"api{i}" for i in range(nodes)]
    pairs = [(names[i], names[j]) for i in range(nodes) for j in range(i + 1, nodes)][:edges]
    stats = graph_stats(edges=pairs, nodes=names)
    assert (stats.nodes, stats.edges) == (nodes, edges)
    assert round(stats.density, 4) == density


def test_graph_stats_ignore_self_loops_and_repeats():
    stats = graph_stats(edges=[("a", "b"), ("a", "b"), ("b", "b")])
    assert (stats.nodes, stats.edges, stats.density) == (2, 1, 0.5)
    assert graph_stats() is None


def test_token_count_splits_words_numbers_and_punctuation():
    assert approx_token_count("5.3 Decide: credit_score >= 700 -> approve") == 12
    assert approx_token_count("") == 0


def test_benchmark_stats_of_the_example():
    rows = [{"application_id": f"A-000{i}", "credit_score": s, "final_decision": d}
            for i, (s, d) in enumerate([(742, "approve"), (655, "refer"), (590, "decline"), (710, "refer")])]
    sop = (GOOD / "sop.txt").read_text()
    stats = benchmark_stats(sop_text=sop, toolspecs=json.loads((GOOD / "toolspecs.json").read_text()), rows=rows,
                            input_columns=["application_id"], output_columns=["final_decision"],
                            graph_edges=[("getCreditScore", "getDebtToIncome")],
                            tasks=[{"expected_calls": [1, 2]}, {"expected_calls": [1]}])
    assert (stats.num_tasks, stats.num_tools, stats.sop_words) == (4, 2, len(sop.split()))
    assert stats.sop_words < stats.sop_tokens < 2 * stats.sop_words
    assert stats.decision_distribution == {"final_decision": {"refer": 2, "approve": 1, "decline": 1}}
    assert stats.majority_share == {"final_decision": 0.5}
    assert (stats.num_input_columns, stats.num_hidden_columns, stats.num_output_columns) == (1, 1, 1)
    assert stats.graph.density == 0.5 and stats.mean_expected_calls == 1.5
