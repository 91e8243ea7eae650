"""The funnel of the hardening stages: counting rules, and its table written with the artifact."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sopforge.funnel import Funnel, FunnelRow, funnel_table
from sopforge.store import queries


def demo_funnel() -> Funnel:
    funnel = Funnel()
    funnel.item("sop_variant", "implicit_decision_points", "implicit_decision_points", verified=True, kept=True)
    funnel.item("sop_variant", "ambiguity", "ambiguity", verified=False, kept=False, retried=True,
                reason="judge: changes_ground_truth after 3 cycles")
    funnel.item("distractor_tool", "off_domain", "getWeatherForecast", verified=True, kept=True)
    funnel.item("distractor_tool", "off_domain", "getRefillHistory", verified=False, kept=False,
                reason="name collides with a real tool")
    return funnel


def test_items_are_counted_per_component_and_type_with_reasons_for_every_drop():
    funnel = demo_funnel()
    rows = {(r.component, r.item_type): r for r in funnel.rows()}
    assert [(r.generated, r.verified, r.retried, r.dropped, r.kept) for r in rows.values()] == [
        (1, 1, 0, 0, 1), (1, 0, 1, 1, 0), (2, 1, 0, 1, 1)]
    assert [(d.item, d.reason) for d in funnel.drops] == [
        ("ambiguity", "judge: changes_ground_truth after 3 cycles"),
        ("getRefillHistory", "name collides with a real tool")]


def test_an_item_that_failed_verification_cannot_be_kept():
    with pytest.raises(ValueError, match="cannot be kept"):
        Funnel().item("sop_variant", "branching", "branching", verified=False, kept=True)


def test_inconsistent_counts_are_refused():
    with pytest.raises(ValidationError, match="inconsistent funnel counts"):
        FunnelRow(component="dialogue", item_type="dialogue", generated=2, verified=1, kept=1, dropped=0)


def test_the_table_aligns_numbers_under_their_headers():
    table = funnel_table(demo_funnel().rows()).splitlines()
    assert table[0].split() == ["component", "type", "generated", "verified", "retried", "dropped", "kept"]
    assert table[3].split() == ["distractor_tool", "off_domain", "2", "1", "0", "1", "1"]
    assert len({len(line) for line in table}) == 1


def test_the_funnel_is_stored_with_its_artifact_and_queryable_with_sql(store, run_id, save, sql):
    record = save(run_id, "manipulations", funnel=demo_funnel().rows())
    assert store.funnel_for(record.id) == demo_funnel().rows()
    assert sql("SELECT component, sum(generated), sum(kept) FROM funnel WHERE run_id = ? GROUP BY 1 ORDER BY 1",
               [run_id]) == [("distractor_tool", 2, 1), ("sop_variant", 2, 1)]


def test_a_failed_write_leaves_no_funnel_rows(store, run_id, save, sql, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    stage_run = store.start_stage(run_id, "manipulations")
    monkeypatch.setattr(queries, "finish_stage_run", explode)  # the last write, after the funnel rows
    with pytest.raises(RuntimeError, match="disk on fire"):
        save(run_id, "manipulations", funnel=demo_funnel().rows(), stage_run_id=stage_run)
    assert sql("SELECT count(*) FROM funnel") == [(0,)]
    assert sql("SELECT count(*) FROM artifacts") == [(0,)]
