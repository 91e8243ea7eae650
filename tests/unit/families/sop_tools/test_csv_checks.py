"""The export's CSV rule runs upstream, where the model can still fix what would break it.

A text column of digits with leading zeros (a patient number ``0010023``) passes every stage check
that existed before issue 15, then fails the package stage after every LLM call was paid for:
pandas reads the exported CSV back as the number 10023. These tests put such values in the schema
and the dataset and expect the stage to say so, and the dataset stage to re-ask and accept the fix.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from sopforge.errors import ValidationFailed
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.models.distractors import DistractorField
from sopforge.families.sop_tools.stages import dataset as dataset_stage
from sopforge.families.sop_tools.stages.dataset import DatasetInputs
from sopforge.families.sop_tools.verify.distractor_fields import _pool_problem
from sopforge.families.sop_tools.verify.ground_truth import cells_that_may_be_empty, compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import CSV_FILE
from sopforge.families.sop_tools.verify.schema_checks import check_schema
from sopforge.sandbox import SandboxLimits

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
PATIENT_LINE = 'patient_id - string, pseudonymous identifier of the patient (e.g., "P-10023")'


def failing(checks) -> list[str]:
    return [c.name for c in checks if not c.passed and c.severity == "error"]


def schema_with(schema_answer: str, line: str) -> DataSchema:
    assert schema_answer.count(PATIENT_LINE) == 1
    return DataSchema.parse(schema_answer.replace(PATIENT_LINE, line))


@pytest.mark.parametrize("line, value", [
    ('patient_number - string, patient number as the pharmacy system prints it (e.g., "0125481932")', "0125481932"),
    ("patient_number - string, patient number (e.g., 0125481932)", "0125481932"),
    ('patient_tier - enum, tier of the patient (e.g., "1") [choices: 1 | 2 | 3]', "'1'"),
    ('patient_flag - enum, a flag (e.g., "true") [choices: true | false]', "'true'"),
])
def test_a_text_field_the_csv_would_retype_fails_at_the_schema_stage(schema_answer, line, value):
    checks = check_schema(schema_with(schema_answer, line))
    assert failing(checks) == ["schema.values_survive_csv"]
    message = next(c.message for c in checks if c.name == "schema.values_survive_csv")
    assert value in message and "pandas" in message and "non-digit part" in message


def test_prefixed_identifiers_pass_and_the_message_says_so(schema_answer):
    checks = check_schema(schema_with(
        schema_answer, 'patient_number - string, patient number (e.g., "PT-0125481932")'))
    result = next(c for c in checks if c.name == "schema.values_survive_csv")
    assert result.passed and "read back unchanged" in result.message


def _leading_zero_batch(text: str) -> str:
    """The fixture batch with patient ids rewritten as digit-only patient numbers: P-10023 -> 0010023."""
    text = text.replace('"patient_id"', '"patient_number"')
    return re.sub(r'"patient_number": "P-(\d+)"', r'"patient_number": "00\1"', text)


def _prefixed_batch(text: str) -> str:
    return re.sub(r'"patient_number": "00(\d+)"', r'"patient_number": "PT-00\1"', _leading_zero_batch(text))


def test_the_dataset_stage_re_asks_for_values_the_csv_would_retype_and_keeps_the_fix(
        scripted, settings, schema_answer, good_context, good_sop, slug):
    schema = schema_with(schema_answer, 'patient_number - string, patient number (e.g., "PT-0010023")')
    batch = (ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8")
    llm, provider = scripted([_leading_zero_batch(batch), _prefixed_batch(batch)])
    inputs = DatasetInputs(theme_slug=slug, context=good_context, schema=schema, sop=good_sop, n_rows=14,
                           batch_size=14)
    result = dataset_stage.run(inputs, llm=llm, settings=settings, model="fake-1", temperature=0.1)

    reask = provider.requests[1].messages[-1].content
    assert "dataset.values_survive_csv" in reask and "patient_number" in reask and "read back by pandas as 41584" in reask
    numbers = [row["patient_number"] for row in result.artifact.rows]
    assert numbers and all(n.startswith("PT-00") for n in numbers)
    final = next(c for c in result.checks if c.name == "dataset.values_survive_csv")
    assert final.passed and final.message == f"all {len(numbers)} rows read back unchanged from the exported CSV"


def test_the_dataset_stage_fails_when_the_model_keeps_the_digits(scripted, settings, schema_answer, good_context,
                                                                 good_sop, slug):
    schema = schema_with(schema_answer, 'patient_number - string, patient number (e.g., "PT-0010023")')
    batch = _leading_zero_batch((ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8"))
    llm, _ = scripted([batch] * settings.max_attempts)
    inputs = DatasetInputs(theme_slug=slug, context=good_context, schema=schema, sop=good_sop, n_rows=14,
                           batch_size=14)
    with pytest.raises(ValidationFailed, match="dataset.values_survive_csv"):
        dataset_stage.run(inputs, llm=llm, settings=settings, model="fake-1", temperature=0.1)


def test_a_distractor_field_the_csv_would_retype_is_dropped_with_the_reason():
    field = DistractorField(name="loyalty_number", origin="new", type="string", description="loyalty card",
                            pool=["0042", "0077", "0131"])
    assert "would not keep" in _pool_problem(field) and "'0042'" in _pool_problem(field)
    assert _pool_problem(field.model_copy(update={"pool": ["LC-0042", "LC-0077"]})) is None


def test_the_reference_stage_checks_every_column_it_would_export(tmp_path, schema_answer):
    """Before the distractors and manipulations stages spend their calls: the computed rows as the CSV."""
    schema = DataSchema.parse(schema_answer)
    graph = APIGraph.parse((ANSWERS / "api_graph.txt").read_text(encoding="utf-8"))
    rows = DatasetBatch.parse((ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8"), schema).rows
    bundle = tmp_path / "bundle"
    shutil.copytree(ANSWERS.parent / "bundle" / "pharmacy", bundle)
    (bundle / CSV_FILE).unlink()  # written again from the rows below
    digits = [{**r, "patient_id": r["patient_id"].replace("P-", "00")} for r in rows]
    _, checks = compute_ground_truth(bundle, schema, graph, digits, limits=SandboxLimits(wall_seconds=60))
    result = next(c for c in checks if c.name == "ground_truth.values_survive_csv")
    assert not result.passed and "'patient_id'" in result.message and "'0041584'" in result.message


def test_a_conditional_input_may_be_an_empty_cell_in_the_ground_truth_too(schema_answer):
    """The permits trial: `[present_if: applicant_type = owner_builder]` input cells are empty for every
    other applicant; the dataset check allowed that and the reference check refused it three times."""
    line = next(line for line in schema_answer.splitlines() if line.startswith("prescription_written_date"))
    schema = DataSchema.parse(schema_answer.replace(line, line + " [present_if: medication_class = maintenance]"))
    shown = ["prescription_written_date", "patient_id"]
    gt = SimpleNamespace(columns=schema.names, input_columns=shown, output_columns=[f.name for f in schema.decisions])
    empty = cells_that_may_be_empty(gt, schema)
    assert "prescription_written_date" in empty and "patient_id" not in empty
    assert set(schema.names) - {*shown, *gt.output_columns} <= empty  # hidden columns
