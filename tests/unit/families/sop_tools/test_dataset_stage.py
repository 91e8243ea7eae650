"""Dataset stage ``run()``: batches, GX re-asks, de-duplication and the batch budget, with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sopforge.errors import ValidationFailed
from sopforge.families.sop_tools.models.dataset import Dataset
from sopforge.families.sop_tools.stages import dataset as dataset_stage
from sopforge.families.sop_tools.stages.dataset import DatasetInputs, existing_rows_hint

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
G = "dataset.gx."


def answer(n: int) -> str:
    return (ANSWERS / f"dataset_batch{n}.txt").read_text(encoding="utf-8")


def kw(settings, llm, **extra):
    return {"llm": llm, "settings": settings, "model": "fake-1", "temperature": 0.1, **extra}


@pytest.fixture
def inputs(slug, good_context, good_schema, good_sop):
    def make(**extra) -> DatasetInputs:
        return DatasetInputs(theme_slug=slug, context=good_context, schema=good_schema, sop=good_sop, **extra)
    return make


def by_name(checks, name):
    return next(c for c in checks if c.name == name)


def test_batches_accumulate_until_n_rows(scripted, settings, inputs):
    llm, provider = scripted([answer(1), answer(2)])
    result = dataset_stage.run(inputs(n_rows=20, batch_size=14), **kw(settings, llm))
    ds = result.artifact
    assert isinstance(ds, Dataset)
    assert ds.row_count == 24 and ds.rows_requested == 20 and ds.duplicates_dropped == 0
    assert ds.id_field == "prescription_id" and ds.ids[:2] == ["RX-004512", "RX-004519"] and ds.ids[-1] == "RX-005020"
    assert ds.fields == [f.name for f in inputs().data_schema.existing]
    assert [(b.batch, b.rows_requested, b.rows_returned, b.rows_kept, b.attempts) for b in ds.batches] == [
        (1, 14, 14, 14, 1), (2, 6, 10, 10, 1)]
    assert [r.call_key for r in provider.requests] == [
        "pharmacy-prescription-refills/dataset/batch1/a1", "pharmacy-prescription-refills/dataset/batch2/a1"]
    assert result.attempts == 2 and result.raw_texts == [answer(1), answer(2)]
    assert result.template_id == "sop_bench/dataset"
    assert ds.gx_suite["name"] == "sopforge_dataset" and ds.gx_suite["expectations"]

    first, second = (r.messages[0].content for r in provider.requests)
    assert "Write 14 new rows." in first and "<existing_rows>\nNone yet: this is the first batch.\n</existing_rows>" in first
    assert "<sop_contents>\n1. Purpose\n" in first and "<schema>\n<Existing_fields>\nprescription_id - string" in first
    assert "Write 6 new rows." in second and "14 rows exist already." in second
    assert "Identifiers already used (never reuse one): RX-004512, RX-004519," in second
    assert "- medication_class: maintenance 6, acute 3, schedule_ii 1, schedule_iii_v 4" in second
    assert "Additional requirements" not in first

    assert all(c.passed for c in result.checks)
    count = by_name(result.checks, "dataset.row_count")
    assert count.message == "24 unique rows kept of 20 requested (0 duplicates dropped over 2 batches)"
    assert (count.details["rows"], count.details["rows_requested"], count.details["batches"]) == (24, 20, 2)
    assert count.details["gx_failures_per_batch"] == [[0], [0]]
    assert len(count.details["gx_seconds_per_batch"]) == 2
    assert by_name(result.checks, G + "expect_column_values_to_be_unique.prescription_id").passed


def test_a_gx_failure_is_re_asked_with_the_offending_values(scripted, settings, inputs, edit):
    bad = edit(answer(1), '"refills_remaining": 11', '"refills_remaining": 12')
    bad = edit(bad, '"insurance_status": "lapsed"', '"insurance_status": "expired"')
    llm, provider = scripted([bad, answer(1)])
    result = dataset_stage.run(inputs(n_rows=14, batch_size=14), **kw(settings, llm))
    assert result.artifact.row_count == 14
    assert [r.call_key for r in provider.requests] == [
        "pharmacy-prescription-refills/dataset/batch1/a1", "pharmacy-prescription-refills/dataset/batch1/a2"]
    reask = provider.requests[1].messages[-1].content
    assert reask.startswith("Your answer could not be accepted:\n")
    assert (f"- {G}expect_column_values_to_be_between.refills_remaining: refills_remaining must be between 0 and 11 "
            "inclusive; broken by 1 of 14 values: 12 (prescription_id='RX-004733')") in reask
    assert (f"- {G}expect_column_values_to_be_in_set.insurance_status: insurance_status must be one of: "
            "active | lapsed | self_pay; broken by 1 of 14 values: 'expired' (prescription_id='RX-004792')") in reask
    assert provider.requests[1].messages[1].content == bad  # the refused answer stays in the conversation
    [record] = result.artifact.batches
    assert (record.attempts, record.gx_failures, record.parse_errors) == (2, [2, 0], 0)
    assert result.raw_texts == [bad, answer(1)]


def test_a_truncated_answer_is_re_asked(scripted, settings, inputs):
    cut = answer(1)[: answer(1).index('"patient_id": "P-41598"')]
    llm, provider = scripted([cut, answer(1)])
    result = dataset_stage.run(inputs(n_rows=10, batch_size=14), **kw(settings, llm))
    assert "- dataset.parse: unclosed <data> block: the answer stops before </data>, so the list is truncated" in \
        provider.requests[1].messages[-1].content
    assert result.artifact.batches[0].parse_errors == 1 and result.artifact.batches[0].gx_failures == [0]


def test_missing_and_extra_keys_are_re_asked_by_name(scripted, settings, inputs, edit):
    bad = edit(answer(1), '"patient_id": "P-41584", ', '"refill_decision": "approve", ')
    llm, provider = scripted([bad, answer(1)])
    dataset_stage.run(inputs(n_rows=14, batch_size=14), **kw(settings, llm))
    reask = provider.requests[1].messages[-1].content
    assert "- dataset.parse: every row must have exactly the existing fields" in reask
    assert "row 1: missing patient_id; to-be-obtained refill_decision (computed later; leave out)" in reask


def test_wrong_type_is_re_asked(scripted, settings, inputs, edit):
    bad = edit(answer(1), '"days_since_last_fill": 22,', '"days_since_last_fill": "22 days",')
    bad = edit(bad, '"refills_remaining": 3,', '"refills_remaining": True,')
    llm, provider = scripted([bad, answer(1)])
    dataset_stage.run(inputs(n_rows=14, batch_size=14), **kw(settings, llm))
    reask = provider.requests[1].messages[-1].content
    assert (f"- {G}expect_column_values_to_be_in_type_list.days_since_last_fill: days_since_last_fill must be a whole "
            "number such as 4; broken by 1 of 14 values: '22 days' (prescription_id='RX-004550')") in reask
    assert ("- dataset.rows.numbers: integer and float fields must hold numbers, never True/False: "
            "refills_remaining=True (prescription_id='RX-004519': a boolean, not a number)") in reask


def test_duplicate_ids_across_batches_are_dropped_and_counted(scripted, settings, inputs, edit):
    # Batch 2 repeats two identifiers of batch 1 with other values, and one batch-1 row verbatim.
    second = edit(answer(2), '"prescription_id": "RX-004798"', '"prescription_id": "RX-004512"')
    second = edit(second, '"prescription_id": "RX-004856"', '"prescription_id": "RX-004519"')
    first_row = next(line for line in answer(1).splitlines() if '"RX-004550"' in line)
    second = edit(second, "\n]\n</data>", ",\n" + first_row.rstrip(",") + "\n]\n</data>")
    llm, provider = scripted([answer(1), second, answer(2)])
    result = dataset_stage.run(inputs(n_rows=24, batch_size=14), **kw(settings, llm))
    ds = result.artifact
    b2 = ds.batches[1]
    assert (b2.rows_returned, b2.rows_kept, b2.duplicate_ids, b2.duplicate_rows) == (11, 8, 2, 1)
    assert ds.duplicates_dropped == 3 + 8  # batch 3 (the clean batch 2 answer) repeats the 8 already kept
    assert ds.row_count == 24 and len(set(ds.ids)) == 24
    assert ds.rows[ds.ids.index("RX-004512")]["patient_id"] == "P-41584"  # the first row with an id wins
    assert len(provider.requests) == 3 and provider.requests[2].call_key.endswith("/dataset/batch3/a1")
    assert "22 rows exist already." in provider.requests[2].messages[0].content
    assert all(c.passed for c in result.checks)
    assert by_name(result.checks, "dataset.row_count").details["duplicates_dropped"] == 11


def test_budget_exhausted_fails_clearly(scripted, settings, inputs):
    llm, provider = scripted([answer(1), answer(1)])
    with pytest.raises(ValidationFailed) as exc:
        dataset_stage.run(inputs(n_rows=20, batch_size=14, max_batches=2), **kw(settings, llm))
    assert str(exc.value).startswith("dataset: only 14 unique rows of the 20 requested after 2 batches (the budget); "
                                     "14 duplicate rows were dropped.")
    assert exc.value.report[0]["name"] == "dataset.row_count"
    assert exc.value.raw_texts == [answer(1), answer(1)]


def test_default_budget_is_three_times_the_batches_needed(inputs):
    assert inputs(n_rows=50, batch_size=25).batch_budget == 6
    assert inputs(n_rows=51, batch_size=25).batch_budget == 9
    assert inputs(max_batches=2).batch_budget == 2


def test_a_batch_that_never_passes_stops_the_stage(scripted, settings, inputs, edit):
    bad = edit(answer(2), '"medication_class": "schedule_ii"', '"medication_class": "opioid"')
    llm, provider = scripted([answer(1), bad, bad, bad])
    with pytest.raises(ValidationFailed) as exc:
        dataset_stage.run(inputs(n_rows=20, batch_size=14), **kw(settings, llm))
    message = str(exc.value)
    assert message.startswith(f"dataset: batch 2: check {G}expect_column_values_to_be_in_set.medication_class "
                              "failed after 3 attempts: medication_class must be one of: maintenance | acute | "
                              "schedule_ii | schedule_iii_v; broken by 1 of 10 values: 'opioid' (prescription_id='RX-004903')")
    assert [r["name"] for r in exc.value.report] == [f"{G}expect_column_values_to_be_in_set.medication_class"]
    assert exc.value.raw_texts == [answer(1), bad, bad, bad]


def test_reviewer_feedback_and_guidelines_reach_every_batch(scripted, settings, inputs):
    llm, provider = scripted([answer(1), answer(2)])
    dataset_stage.run(inputs(n_rows=20, batch_size=14, guidelines="Use request dates in April 2025."),
                      **kw(settings, llm, feedback="More Schedule III-V cases."))
    for request in provider.requests:
        prompt = request.messages[0].content
        assert "<additional_requirements>\nUse request dates in April 2025.\n</additional_requirements>" in prompt
        assert prompt.endswith("Reviewer feedback on the previous version, address it: More Schedule III-V cases.")


def test_existing_rows_hint_lists_ids_and_value_counts(good_schema):
    assert existing_rows_hint([], good_schema, "prescription_id") == "None yet: this is the first batch."
    rows = [{"prescription_id": "RX-1", "medication_class": "acute", "prescriber_license_active": False,
             "insurance_status": "active"}]
    hint = existing_rows_hint(rows, good_schema, "prescription_id").splitlines()
    assert hint[:2] == ["1 rows exist already.", "Identifiers already used (never reuse one): RX-1"]
    assert "- prescriber_license_active: True 0, False 1" in hint


def test_result_serialises(scripted, settings, inputs):
    llm, _ = scripted([answer(1)])
    result = dataset_stage.run(inputs(n_rows=14, batch_size=14), **kw(settings, llm))
    dumped = json.loads(result.model_dump_json())
    assert dumped["artifact"]["rows"][0]["prescriber_license_active"] is True
    assert Dataset.model_validate(dumped["artifact"]) == result.artifact
    assert by_name(result.checks, "dataset.choice_coverage").passed
