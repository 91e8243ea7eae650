"""Distractor data fields verified by perturbation, on the pharmacy fixture bundle (real sandbox runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.models.distractors import assign_values, parse_field_answer
from sopforge.families.sop_tools.verify.distractor_fields import verify_distractor_fields, verify_field_candidates
from sopforge.parsing import ParseError
from sopforge.prompts import default_registry
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


# --- issue 16: binary fields and values consistent with the row ------------------------------------

def test_a_naturally_binary_field_gives_its_two_values_and_is_kept(domain):
    bundle, schema, graph, rows, baseline = domain
    [field] = parse_field_answer('<distractor_fields>[{"name": "auto_refill_enrolled", "origin": "new", "type": '
                                 '"boolean", "description": "Enrolled in automatic refills", "values": [true, false]}]'
                                 '</distractor_fields>')
    [kept] = verify_field_candidates([field], bundle_folder=bundle, schema=schema, api_graph=graph, rows=rows,
                                     id_field="prescription_id", baseline=baseline, limits=LIMITS)
    assert kept.kept, kept.reason
    assert set(kept.values.values()) == {True, False}
    prompt = default_registry().render("sop_bench/distractor_fields", **{
        p: "x" for p in default_registry().get("sop_bench/distractor_fields").header.parameters}).text
    assert "<2 to 8 plausible values of that type>" in prompt and "gives exactly its two values" in prompt
    assert "4 to 8" not in prompt


def test_values_that_depend_on_the_row_are_drawn_from_the_rows_own_pool(domain):
    bundle, schema, graph, rows, baseline = domain
    answer = ('<distractor_fields>[{"name": "shelf_zone", "origin": "new", "type": "string", "description": '
              '"Where the medication is shelved", "depends_on": "store_branch", "values_by": {'
              '"north": ["N-1", "N-2"], "south": ["S-1"], "east": ["E-1", "E-2"]}}]</distractor_fields>')
    [field] = parse_field_answer(answer)
    assert field.depends_on == "store_branch" and field.pools["south"] == ["S-1"]
    [kept] = verify_field_candidates([field], bundle_folder=bundle, schema=schema, api_graph=graph, rows=rows,
                                     id_field="prescription_id", baseline=baseline, limits=LIMITS)
    assert kept.kept, kept.reason
    for row in rows:  # no row gets another branch's shelf
        assert kept.values[row["prescription_id"]][0] == row["store_branch"][0].upper()
    again = assign_values(field, [r["prescription_id"] for r in rows], 0, [r["store_branch"] for r in rows])
    assert again == kept.values  # seeded, so reproducible


def test_a_dependent_field_without_a_pool_for_some_value_is_dropped_naming_it(domain):
    bundle, schema, graph, rows, baseline = domain
    [field] = parse_field_answer('<distractor_fields>[{"name": "shelf_zone", "origin": "new", "type": "string", '
                                 '"description": "Shelf", "depends_on": "store_branch", "values_by": '
                                 '{"north": ["N-1"], "south": ["S-1"]}}]</distractor_fields>')
    [dropped] = verify_field_candidates([field], bundle_folder=bundle, schema=schema, api_graph=graph, rows=rows,
                                        id_field="prescription_id", baseline=baseline, limits=LIMITS)
    assert not dropped.kept
    assert dropped.reason == ("values_by has no values for store_branch=east: such rows would get a value drawn "
                              "for another store_branch")
    with pytest.raises(ParseError, match='give "values_by"'):
        parse_field_answer('<distractor_fields>[{"name": "z", "origin": "new", "type": "string", "description": "d", '
                           '"depends_on": "store_branch"}]</distractor_fields>')
