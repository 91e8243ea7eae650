"""The PROBE family end to end: the CLI in a subprocess, a real Prefect server, DuckDB, the recorded answers.

`sopforge generate examples/themes/pharmacy_refills.yaml --family probe` replays the shared context
and PROBE's answers from the previous round (``tests/fixtures/probe_handwritten``: the demo leaves
PROBE out until the PROBE issue re-records it), then a second run reuses everything and
``rerun --from probe_assembly`` asks only the adversary again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from answers import PROBE_CALLS
from sopforge.families import plan

pytestmark = pytest.mark.prefect
STAGES = plan(("probe",)).names
SAMPLES = ["p1-b1", "p2-b1", "p2-b2"]
ROOT = Path(__file__).resolve().parents[2]
DEMO_THEME = "examples/themes/pharmacy_refills.yaml"
FIXTURE = ROOT / "tests" / "fixtures" / "probe_handwritten"


def test_probe_demo_is_generated_verified_stored_exported_and_rerun_from_assembly(cli, tmp_path):
    theme = tmp_path / "pharmacy_refills.yaml"  # the demo theme, replaying the fixture's answers
    theme.write_text(re.sub(r"(?m)^recordings: .*$", f"recordings: {FIXTURE}", (ROOT / DEMO_THEME).read_text()))
    first = cli("generate", str(theme), "--family", "probe", "--json")
    assert first.code == 0, first.stderr
    summary = json.loads(first.stdout)
    assert [s["stage"] for s in summary["stages"]] == STAGES
    assert summary["llm_calls"] == PROBE_CALLS + 1  # the shared context, then every PROBE call

    funnel = {(r["component"], r["item_type"]): r for r in summary["funnel"]}
    components = {c for c, _ in funnel}
    assert {"bottleneck", "true_positive", "sample", "distractor", "hard_negative", "shortcut_gate"} <= components
    assert sum(r["kept"] for (c, _), r in funnel.items() if c == "shortcut_gate") == len(SAMPLES)
    assert all(r["generated"] == r["kept"] + r["dropped"] for r in summary["funnel"])
    probe = summary["families"]["probe"]
    assert any("shortcut gate" in t["title"] for t in probe["tables"])
    assert any("Table 1" in t["title"] for t in probe["tables"])
    assert any(line.startswith("PROBE two-sample tests") for line in probe["lines"])

    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        families = dict(con.execute("SELECT stage, family FROM artifacts").fetchall())
        assert families == {s: (None if s == "context" else "probe") for s in STAGES}
        calls = dict(con.execute("SELECT stage, count(*) FROM llm_calls GROUP BY 1").fetchall())
        assert sum(calls.values()) == PROBE_CALLS + 1 and "probe_package" not in calls
        assert con.execute("SELECT count(*) FROM llm_calls WHERE family = 'probe'").fetchone() == (PROBE_CALLS,)
        edges = con.execute("""SELECT p.stage FROM artifact_edges e JOIN artifacts c ON c.id = e.child
                               JOIN artifacts p ON p.id = e.parent WHERE c.stage = 'probe_evidence'""").fetchall()
        assert sorted(s for (s,) in edges) == ["probe_bottlenecks", "probe_plans", "probe_world"]
        assert con.execute("SELECT count(*) FROM funnel WHERE family = 'probe'").fetchone()[0] == len(summary["funnel"])
        gate = con.execute("SELECT stage, decision, source FROM reviews").fetchall()
        assert gate == [("probe_bottlenecks", "approve", "auto")]

    export = cli.home / "exports" / summary["run_id"] / "probe"
    records = [json.loads(line) for line in (export / "samples.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in records] == SAMPLES
    for record in records:
        assert json.loads((export / "samples" / f"{record['sample_id']}.json").read_text()) == record
        shown = json.dumps(record["agent_input"])
        assert "solves_bottleneck" not in shown and "true_positive" not in shown
        ids = [d["id"] for d in record["agent_input"]["datastore"]]
        assert set(record["ground_truth"]["true_positives"]) <= set(ids) and len(ids) == 10
        assert record["ground_truth"]["action"] in {a["id"] for a in record["agent_input"]["world_model"]["available_actions"]}
        assert all(h["changed"] for h in record["ground_truth"]["hard_negatives"])
    assert pq.read_table(export / "samples.parquet").num_rows == len(SAMPLES)
    metadata = json.loads((export / "metadata.json").read_text())
    assert metadata["table_1"]["documents"] == {"min": 10, "max": 10, "mean": 10.0, "std": 0.0}
    assert metadata["table_1"]["difficulty"] == {"easy": 1, "hard": 2}
    assert metadata["paper_table_1"]["documents"]["mean"] == 79.3
    assert set(metadata["shortcut_gate"]["per_sample"]) == set(SAMPLES)

    again = cli("generate", str(theme), "--family", "probe", "--json")
    assert again.code == 0, again.stderr
    assert json.loads(again.stdout)["llm_calls"] == 0

    rerun = cli("rerun", summary["run_id"], "--from", "probe_assembly", "--json")
    assert rerun.code == 0, rerun.stderr
    redone = json.loads(rerun.stdout)
    statuses = {s["stage"]: s["status"] for s in redone["stages"]}
    assert statuses["probe_evidence"] == "reused" and statuses["probe_assembly"] == "generated"
    assert redone["llm_calls"] == len(SAMPLES)  # one adversary per sample, nothing upstream
