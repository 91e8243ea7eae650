"""DataSchema: the strict line grammar and the schema gate."""

from __future__ import annotations

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.dataset import find_id_field
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.verify.schema_checks import check_schema

DECISION_LINE = ('refill_decision - enum, outcome of the refill review (e.g., "approve") '
                 '[choices: approve | refer_to_prescriber | deny] [decision]')


def failing(checks) -> list[str]:
    return [c.name for c in checks if not c.passed]


def by_name(checks, name):
    return next(c for c in checks if c.name == name)


def one(line: str, block: str = "Field_to_be_obtained") -> DataSchema:
    other = "Existing_fields" if block == "Field_to_be_obtained" else "Field_to_be_obtained"
    return DataSchema.parse(f"<schema><{block}>\n{line}\n</{block}><{other}></{other}></schema>")


def test_good_answer_parses(good_schema: DataSchema):
    assert len(good_schema.existing) == 12
    assert [f.name for f in good_schema.to_be_obtained] == [
        "prescription_age_days", "early_refill_ratio", "blocking_reason", "refill_decision"]
    assert [f.name for f in good_schema.decisions] == ["refill_decision"]
    pid = good_schema.field("prescription_id")
    assert (pid.type, pid.example, pid.role) == ("string", '"RX-004512"', "existing")
    assert pid.description == "unique identifier of the prescription"
    days = good_schema.field("days_supply_remaining")
    assert (days.minimum, days.maximum, days.choices) == (0, 90, None)
    ratio = good_schema.field("early_refill_ratio")
    assert (ratio.type, ratio.minimum, ratio.maximum) == ("float", 0.0, 12.0)
    decision = good_schema.field("refill_decision")
    assert decision.choices == ["approve", "refer_to_prescriber", "deny"]
    assert decision.decision and decision.role == "to_be_obtained"
    with pytest.raises(KeyError, match="no field named 'nope'"):
        good_schema.field("nope")


def test_good_answer_passes_every_check(good_schema: DataSchema):
    assert failing(check_schema(good_schema)) == []


def test_to_prompt_text_round_trips(good_schema: DataSchema):
    text = good_schema.to_prompt_text()
    assert text.startswith("<Existing_fields>\nprescription_id - string, unique identifier")
    assert DECISION_LINE in text
    assert DataSchema.parse(f"<schema>\n{text}\n</schema>") == good_schema


def test_annotations_in_any_order_and_bullets_tolerated():
    f = one("- refill_decision - enum, outcome (e.g., \"deny\") [decision] [choices: \"approve\" | deny]").fields[0]
    assert f.decision and f.choices == ["approve", "deny"]


def test_list_type_and_example_with_brackets():
    f = one('alert_codes - list[string], interaction codes (e.g., ["DDI-1", "DDI-2"])', "Existing_fields").fields[0]
    assert (f.type, f.example) == ("list[string]", '["DDI-1", "DDI-2"]')


def test_description_may_contain_parentheses():
    f = one("dose_mg - float, daily dose (in milligrams) of the drug (e.g., 12.5) [range: 0.5 to 1,000]",
            "Existing_fields").fields[0]
    assert f.description == "daily dose (in milligrams) of the drug"
    assert (f.minimum, f.maximum) == (0.5, 1000)


@pytest.mark.parametrize("line, message", [
    ("patient id - string, the patient (e.g., \"P-1\")", "does not match 'name - type, description"),
    ("patient_id: string, the patient (e.g., \"P-1\")", "does not match"),
    ("patient_id - string the patient (e.g., \"P-1\")", "does not match"),
    ("patient_id - string, the patient", r"needs a description and '\(e\.g\., example\)'"),
    ("patient_id - string, (e.g., \"P-1\")", "needs a description"),
    ("age - integer, age (e.g., 4) [range: 0 - 90]", r"malformed \[range: 0 - 90\]"),
    ("age - integer, age (e.g., 4) [range: 0 to 90] [range: 1 to 2]", r"repeats the \[range\] annotation"),
    ("age - integer, age (e.g., 4) [unit: years]", r"unknown annotation \[unit: years\]"),
    ("kind - enum, kind (e.g., \"a\") [choices: a | | b]", "empty choice"),
])
def test_bad_lines_are_parse_errors_quoting_the_line(line: str, message: str):
    with pytest.raises(ParseError, match=message) as exc:
        one(line, "Existing_fields")
    assert line.lstrip("- ")[:10] in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("tag", ["schema", "Existing_fields", "Field_to_be_obtained"])
def test_missing_blocks_are_parse_errors(schema_answer: str, tag: str):
    with pytest.raises(ParseError, match=f"missing <{tag}>"):
        DataSchema.parse(schema_answer.replace(f"<{tag}>", "").replace(f"</{tag}>", ""))


def test_blank_lines_are_ignored(schema_answer: str, edit):
    spaced = edit(schema_answer, "<Existing_fields>\n", "<Existing_fields>\n\n   \n")
    assert DataSchema.parse(spaced) == DataSchema.parse(schema_answer)


def test_non_snake_case_name_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "patient_id - string", "PatientID - string"))
    result = by_name(check_schema(s), "schema.names_snake_case")
    assert not result.passed and "PatientID" in result.message


def test_duplicate_name_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "early_refill_ratio - float", "prescription_age_days - float"))
    result = by_name(check_schema(s), "schema.names_unique")
    assert not result.passed and "prescription_age_days" in result.message


def test_unknown_type_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "request_date - date,", "request_date - timestamp,"))
    assert failing(check_schema(s)) == ["schema.types_allowed"]
    assert "request_date (timestamp)" in by_name(check_schema(s), "schema.types_allowed").message


def test_enum_without_choices_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, ' [choices: active | lapsed | self_pay]', ""))
    result = by_name(check_schema(s), "schema.enum_choices")
    assert not result.passed and "insurance_status (enum needs at least 2 choices)" in result.message


def test_enum_with_one_choice_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "[choices: active | lapsed | self_pay]", "[choices: active]"))
    assert failing(check_schema(s)) == ["schema.enum_choices"]


def test_choices_on_integer_fail(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "(e.g., 0) [range: 0 to 10]", "(e.g., 0) [choices: 0 | 1]"))
    result = by_name(check_schema(s), "schema.enum_choices")
    assert not result.passed and "interaction_alert_count (choices on a integer field)" in result.message


def test_inverted_range_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "[range: 0 to 11]", "[range: 11 to 0]"))
    result = by_name(check_schema(s), "schema.ranges_valid")
    assert not result.passed and "refills_remaining (11 > 0)" in result.message


def test_range_on_string_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, '(e.g., "P-10023")', '(e.g., "P-10023") [range: 1 to 5]'))
    assert failing(check_schema(s)) == ["schema.ranges_valid"]


def test_empty_partition_fails(schema_answer: str):
    start = schema_answer.index("<Field_to_be_obtained>") + len("<Field_to_be_obtained>")
    end = schema_answer.index("</Field_to_be_obtained>")
    s = DataSchema.parse(schema_answer[:start] + "\n" + schema_answer[end:])
    result = by_name(check_schema(s), "schema.partitions_non_empty")
    assert not result.passed and "<Field_to_be_obtained>" in result.message
    assert "schema.decision_present" in failing(check_schema(s))


def test_more_than_fifty_fields_fail(schema_answer: str, edit):
    extra = "\n".join(f"extra_{i} - integer, filler {i} (e.g., 1)" for i in range(40))
    s = DataSchema.parse(edit(schema_answer, "</Existing_fields>", extra + "\n</Existing_fields>"))
    assert len(s.fields) == 56
    assert failing(check_schema(s)) == ["schema.field_count"]


def test_no_decision_field_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, " [decision]", ""))
    assert failing(check_schema(s)) == ["schema.decision_present"]


def test_decision_on_existing_field_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "[choices: active | lapsed | self_pay]",
                              "[choices: active | lapsed | self_pay] [decision]"))
    result = by_name(check_schema(s), "schema.decision_fields_valid")
    assert not result.passed and "insurance_status (an existing field)" in result.message


def test_decision_on_float_fails(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "[range: 0.0 to 12.0]", "[range: 0.0 to 12.0] [decision]"))
    result = by_name(check_schema(s), "schema.decision_fields_valid")
    assert not result.passed and "early_refill_ratio (float)" in result.message


def test_boolean_decision_is_valid(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, DECISION_LINE,
                              "refill_approved - boolean, whether the refill is approved (e.g., True) [decision]"))
    assert failing(check_schema(s)) == []
    assert s.field("refill_approved").labels() == ["true", "false"]


@pytest.mark.parametrize("label", ["None", "NA", "N/A", "null", "NaN", "nan", "unknown", "#N/A"])
def test_na_like_decision_label_fails(schema_answer: str, edit, label: str):
    s = DataSchema.parse(edit(schema_answer, "refer_to_prescriber | deny]", f"refer_to_prescriber | {label}]"))
    result = by_name(check_schema(s), "schema.labels_not_na")
    assert not result.passed and f"refill_decision: '{label}'" in result.message


def test_na_like_input_choice_fails_too(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "active | lapsed | self_pay", "active | lapsed | None"))
    assert failing(check_schema(s)) == ["schema.labels_not_na"]


@pytest.mark.parametrize("choices, inner, outer", [
    ("valid | invalid", "valid", "invalid"),
    ("valid | not_valid", "valid", "not_valid"),
    ("closure | permanent-closure", "closure", "permanent-closure"),
    ("low | Very_Low", "low", "Very_Low"),
    ("approve | Approve", "approve", "Approve"),
])
def test_substring_decision_labels_fail(schema_answer: str, edit, choices: str, inner: str, outer: str):
    s = DataSchema.parse(edit(schema_answer, "approve | refer_to_prescriber | deny", choices))
    result = by_name(check_schema(s), "schema.decision_labels_distinct")
    assert not result.passed
    assert f"refill_decision: {inner!r} is inside {outer!r}" in result.message
    assert "lenient matcher" in result.message


def test_substring_labels_on_non_decision_enum_are_allowed(schema_answer: str, edit):
    s = DataSchema.parse(edit(schema_answer, "active | lapsed | self_pay", "active | inactive"))
    assert failing(check_schema(s)) == []


def test_a_schema_without_an_identifier_is_asked_again(schema_answer: str, edit):
    text = edit(schema_answer, "prescription_id - string, unique identifier of the prescription",
                "prescription - string, the prescription as written")
    s = DataSchema.parse(edit(text, "patient_id - string, pseudonymous identifier", "patient - string, pseudonym"))
    result = by_name(check_schema(s), "schema.unique_id_present")
    assert not result.passed and result.blocking  # the tools stage could not look a record up
    assert failing(check_schema(s)) == ["schema.unique_id_present"]


def test_a_record_number_described_as_its_unique_identifier_is_the_row_id(schema_answer: str, edit):
    # The insurance trial's schema: `claim_number - string, unique claim identifier ...`, no *_id field.
    text = edit(schema_answer, "prescription_id - string, unique identifier of the prescription",
                "prescription_number - string, unique identifier of the prescription")
    s = DataSchema.parse(edit(text, "patient_id - string, pseudonymous identifier", "patient_ref - string, pseudonymous identifier"))
    assert find_id_field(s) == "prescription_number"
    assert by_name(check_schema(s), "schema.unique_id_present").passed
