"""DatasetBatch parsing (the <data> literal) and the row checks GX cannot express."""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import (
    Dataset, DatasetBatch, choice_coverage, find_id_field, row_key,
)
from sopforge.families.sop_tools.verify.dataset_checks import row_checks

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"


def small_schema(existing: str, obtained: str = 'done - boolean, whether handled (e.g., True) [decision]') -> DataSchema:
    return DataSchema.parse(f"<schema><Existing_fields>\n{existing}\n</Existing_fields>"
                            f"<Field_to_be_obtained>\n{obtained}\n</Field_to_be_obtained></schema>")


@pytest.fixture
def batch_answer() -> str:
    return (ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8")


def test_good_batch_parses_in_schema_order(batch_answer: str, good_schema: DataSchema):
    batch = DatasetBatch.parse(batch_answer, good_schema)
    assert len(batch.rows) == 14
    assert all(list(r) == [f.name for f in good_schema.existing] for r in batch.rows)
    first = batch.rows[0]
    assert first["prescription_id"] == "RX-004512" and first["refills_remaining"] == 2
    assert first["prescriber_license_active"] is True
    assert {r["medication_class"] for r in batch.rows} == {"maintenance", "acute", "schedule_ii", "schedule_iii_v"}


def test_the_case_plan_is_not_parsed_and_a_code_fence_is_tolerated(batch_answer: str, good_schema: DataSchema):
    fenced = batch_answer.replace("<data>\n[", "<data>\n```python\n[").replace("]\n</data>", "]\n```\n</data>")
    assert DatasetBatch.parse(fenced, good_schema) == DatasetBatch.parse(batch_answer, good_schema)


def test_good_batch_passes_the_row_checks(batch_answer: str, good_schema: DataSchema):
    rows = DatasetBatch.parse(batch_answer, good_schema).rows
    assert [c.name for c in row_checks(rows, good_schema, "prescription_id") if not c.passed] == []


def test_truncated_list_is_a_parse_error_saying_so(batch_answer: str, good_schema: DataSchema):
    cut = batch_answer[: batch_answer.index('"patient_id": "P-41598"')] + "\n</data>"
    with pytest.raises(ParseError, match=r"the list in <data> is truncated or unclosed \(it ends with"):
        DatasetBatch.parse(cut, good_schema)


def test_answer_cut_before_the_closing_tag_says_truncated(batch_answer: str, good_schema: DataSchema):
    cut = batch_answer[: batch_answer.index('"patient_id": "P-41598"')]
    with pytest.raises(ParseError, match=r"^unclosed <data> block: .*truncated"):
        DatasetBatch.parse(cut, good_schema)


def test_line_break_inside_a_string_is_named(batch_answer: str, good_schema: DataSchema, edit):
    broken = edit(batch_answer, '"patient_id": "P-41584"', '"patient_id": "P-\n41584"')
    with pytest.raises(ParseError, match=r"a string in <data> is not closed \(line \d+\): keep every string on one line"):
        DatasetBatch.parse(broken, good_schema)


def test_missing_and_extra_keys_are_named_with_their_row(batch_answer: str, good_schema: DataSchema, edit):
    bad = edit(batch_answer, '"patient_id": "P-41584", ', "")
    bad = edit(bad, '"patient_id": "P-41591", ', '"patient_id": "P-41591", "refill_decision": "approve", "note": "x", ')
    with pytest.raises(ParseError) as err:
        DatasetBatch.parse(bad, good_schema)
    message = str(err.value)
    assert message.startswith("every row must have exactly the existing fields (prescription_id, patient_id,")
    assert "row 1: missing patient_id" in message
    assert "row 2: to-be-obtained refill_decision (computed later; leave out); unknown note" in message
    assert "\n" not in message


def test_teller_style_string_rows_are_refused(good_schema: DataSchema):
    with pytest.raises(ParseError, match=r"every row must be a dict .*row 1 is a list"):
        DatasetBatch.parse("<data>[['prescription_id:RX-1', 'patient_id:P-1']]</data>", good_schema)


@pytest.mark.parametrize("body, message", [
    ("{'prescription_id': 'RX-1'}", r"must hold a Python list of dicts .*got a dict"),
    ("[]", r"empty list"),
    ("[{'prescription_id': 'RX-1'}, ...]", r"'\.\.\.' placeholder"),
    ("rows = [1]", r"^not a Python literal"),
])
def test_other_shapes_are_parse_errors(good_schema: DataSchema, body: str, message: str):
    with pytest.raises(ParseError, match=message):
        DatasetBatch.parse(f"<data>{body}</data>", good_schema)


def test_missing_data_block_is_a_parse_error(good_schema: DataSchema):
    with pytest.raises(ParseError, match=r"missing <data>…</data> block"):
        DatasetBatch.parse("Here are the rows you asked for.", good_schema)


def test_rows_without_brackets_read_as_a_list_and_ints_become_floats_in_float_fields():
    schema = small_schema('case_id - string, unique id (e.g., "C-1")\nscore - float, a score (e.g., 0.5)')
    batch = DatasetBatch.parse('<data>{"case_id": "C-1", "score": 1}, {"case_id": "C-2", "score": True}</data>', schema)
    assert batch.rows == [{"case_id": "C-1", "score": 1.0}, {"case_id": "C-2", "score": True}]
    assert type(batch.rows[0]["score"]) is float and batch.rows[1]["score"] is True


def test_booleans_in_numeric_fields_are_named_with_their_row(batch_answer: str, good_schema: DataSchema, edit):
    bad = edit(batch_answer, '"prescription_id": "RX-004519", "patient_id": "P-41591", "medication_class": "maintenance", '
                             '"prescription_written_date": "2024-09-30", "request_date": "2025-04-18", "refills_remaining": 3',
               '"prescription_id": "RX-004519", "patient_id": "P-41591", "medication_class": "maintenance", '
               '"prescription_written_date": "2024-09-30", "request_date": "2025-04-18", "refills_remaining": True')
    rows = DatasetBatch.parse(bad, good_schema).rows
    numbers = next(c for c in row_checks(rows, good_schema, "prescription_id") if c.name == "dataset.rows.numbers")
    assert not numbers.passed and numbers.details["count"] == 1
    assert "refills_remaining=True (prescription_id='RX-004519': a boolean, not a number)" in numbers.message


def test_list_items_of_the_wrong_type_are_reported():
    schema = small_schema('case_id - string, unique id (e.g., "C-1")\n'
                          'tags - list[string], keywords (e.g., ["a"])\ncounts - list[integer], counts (e.g., [1])')
    rows = [{"case_id": "C-1", "tags": ["ok", "N/A"], "counts": [1, 2]},
            {"case_id": "C-2", "tags": ["fine"], "counts": [1, 2.5]},
            {"case_id": "C-3", "tags": "not a list", "counts": [True]}]
    items = next(c for c in row_checks(rows, schema, "case_id") if c.name == "dataset.rows.list_items")
    assert not items.passed and items.details["count"] == 3
    assert "tags=['ok', 'N/A'] (case_id='C-1': item 'N/A' is blank or a missing-value token)" in items.message
    assert "counts=[1, 2.5] (case_id='C-2': item 2.5 is not an integer)" in items.message
    assert "counts=[True] (case_id='C-3': item True is a bool, not a number)" in items.message


def test_the_id_field_prefers_the_one_described_as_unique(good_schema: DataSchema):
    assert find_id_field(good_schema) == "prescription_id"
    assert find_id_field(small_schema('patient_id - string, patient (e.g., "P-1")\n'
                                      'order_id - string, unique order number (e.g., "O-1")')) == "order_id"
    assert find_id_field(small_schema('name - string, a name (e.g., "Ada")')) is None


def test_a_dataset_stored_with_a_null_id_field_is_keyed_by_the_schemas_identifier_when_its_values_are_distinct():
    schema = small_schema('claim_number - string, unique claim identifier (e.g., "CLM-1")\n'
                          'amount - integer, claimed amount (e.g., 5)')
    rows = [{"claim_number": f"CLM-{i}", "amount": i} for i in range(3)]
    stored = Dataset(fields=["claim_number", "amount"], id_field=None, rows=rows, rows_requested=3)
    keyed = stored.keyed_by(schema)
    assert keyed.id_field == "claim_number" and keyed.ids == ["CLM-0", "CLM-1", "CLM-2"]
    assert stored.id_field is None  # a copy: the stored artifact stays as stored
    assert keyed.keyed_by(schema) is keyed
    repeated = stored.model_copy(update={"rows": [*rows, {"claim_number": "CLM-0", "amount": 9}]})
    assert repeated.keyed_by(schema).id_field is None  # never de-duplicated by it: not an identifier
    assert stored.keyed_by(small_schema('name - string, a name (e.g., "Ada")')).id_field is None


def test_choice_coverage_lists_zero_counts(batch_answer: str, good_schema: DataSchema):
    rows = DatasetBatch.parse(batch_answer, good_schema).rows
    coverage = choice_coverage(rows[:3], good_schema)
    assert coverage["medication_class"] == {"maintenance": 3, "acute": 0, "schedule_ii": 0, "schedule_iii_v": 0}
    assert coverage["prescriber_license_active"] == {"True": 3, "False": 0}
    assert coverage["insurance_status"] == {"active": 2, "lapsed": 0, "self_pay": 1}


def test_row_key_ignores_key_order():
    assert row_key({"a": 1, "b": [1, 2]}) == row_key({"b": [1, 2], "a": 1})
    assert row_key({"a": 1}) != row_key({"a": "1"})


def test_dataset_counts_and_prompt_text(batch_answer: str, good_schema: DataSchema):
    rows = DatasetBatch.parse(batch_answer, good_schema).rows
    ds = Dataset(fields=[f.name for f in good_schema.existing], id_field="prescription_id", rows=rows,
                 rows_requested=10, duplicates_dropped=2)
    assert ds.row_count == 14 and ds.ids[0] == "RX-004512"
    assert ds.counts == {"rows": 14, "rows_requested": 10, "duplicates_dropped": 2, "batches": 0, "attempts": 0}
    text = ds.to_prompt_text(max_rows=2)
    assert text.startswith("[\n{'prescription_id': 'RX-004512'") and text.count("\n") == 3
    assert Dataset.model_validate_json(ds.model_dump_json()) == ds
