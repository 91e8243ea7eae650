"""Distractor data fields verified by perturbation, on the pharmacy fixture bundle (real sandbox runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.verify.distractor_fields import verify_distractor_fields
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.sandbox import SandboxLimits

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BUNDLE = FIXTURES / "bundle" / "pharmacy"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)
BRANCHES = ["north", "south", "east"]


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    """The fixture domain plus a column no tool or procedure step reads (a true distractor)."""
    schema = DataSchema.parse((FIXTURES / "answers" / "schema.txt").read_text(encoding="utf-8"))
    graph = APIGraph.parse((FIXTURES / "answers" / "api_graph.txt").read_text(encoding="utf-8"))
    rows = DatasetBatch.parse((FIXTURES / "answers" / "dataset_batch1.txt").read_text(encoding="utf-8"), schema).rows
    template = next(f for f in schema.existing if f.choices)
    branch = template.model_copy(update={"name": "store_branch", "choices": BRANCHES, "decision": False,
                                         "description": "Branch that received the request"})
    schema = schema.model_copy(update={"fields": [*schema.fields, branch]})
    rows = [{**row, "store_branch": BRANCHES[i % 3]} for i, row in enumerate(rows)]
    bundle = tmp_path_factory.mktemp("bundle")
    for part in ("tools.py", "toolspecs.json", "reference_procedure.py"):
        shutil.copy(BUNDLE / part, bundle / part)
    baseline, _ = compute_ground_truth(bundle, schema, graph, rows, limits=LIMITS)
    assert len(baseline.tasks) == len(rows)
    return bundle, schema, graph, rows, baseline


def test_only_a_field_that_drives_no_answer_is_verified(domain):
    bundle, schema, graph, rows, baseline = domain
    verdicts = {v.field: v for v in verify_distractor_fields(
        bundle, schema, graph, rows, ["store_branch", "refills_remaining", "insurance_status"], baseline=baseline,
        limits=LIMITS)}
    assert verdicts["store_branch"].verified, verdicts["store_branch"].reason
    assert "unchanged" in verdicts["store_branch"].reason
    # "Distractors" that change labels are caught and name the tasks they changed.
    for name in ("refills_remaining", "insurance_status"):
        verdict = verdicts[name]
        assert not verdict.verified and verdict.changed_tasks, verdict
        assert "not a distractor" in verdict.reason and verdict.changed_tasks[0] in verdict.reason


def test_candidates_that_cannot_be_distractors_are_refused_without_running(domain):
    bundle, schema, graph, rows, baseline = domain
    constant = [{**row, "store_branch": "north"} for row in rows]
    verdicts = verify_distractor_fields(bundle, schema, graph, constant,
                                        ["prescription_id", "refill_decision", "no_such_field", "store_branch"],
                                        baseline=baseline, limits=LIMITS)
    reasons = {v.field: v.reason for v in verdicts if not v.verified}
    assert "input column" in reasons["prescription_id"]
    assert "computed by the procedure" in reasons["refill_decision"]
    assert "not a field of the schema" in reasons["no_such_field"]
    assert "proves nothing" in reasons["store_branch"]
