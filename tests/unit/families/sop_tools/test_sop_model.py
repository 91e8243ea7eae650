"""SOPDocument: parsing the <SOP> block and the schema-grounded SOP gate."""

from __future__ import annotations

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOP_SECTION_TITLES, SOPDocument, find_thresholds
from sopforge.families.sop_tools.verify.sop_checks import check_sop

MAIN_THRESHOLDS = ["more than 180", "more than 365", "at least 1", "< 0.80", "< 0.85", "> 7"]


def failing(checks) -> list[str]:
    return [c.name for c in checks if not c.passed]


def by_name(checks, name):
    return next(c for c in checks if c.name == name)


def parse(text: str) -> SOPDocument:
    return SOPDocument.parse(text, title="Refill SOP")


def test_good_answer_parses(good_sop: SOPDocument, sop_answer: str):
    assert good_sop.title.startswith("SOP describing the steps for authorizing a refill")
    assert [(s.number, s.title) for s in good_sop.sections] == list(enumerate(SOP_SECTION_TITLES, 1))
    assert good_sop.text.startswith("1. Purpose\nThis procedure") and good_sop.text.endswith("5.6.2.")
    assert "<sop_analysis>" not in good_sop.text and "Ledger" not in good_sop.text
    assert [s.number for s in good_sop.steps][:5] == ["5.1", "5.1.1", "5.2", "5.2.1", "5.2.2"]
    assert good_sop.steps[0].text == "Record matching"
    assert good_sop.referenced_fields[:3] == ["prescription_id", "patient_id", "medication_class"]
    assert len(good_sop.referenced_fields) == len(set(good_sop.referenced_fields)) == 16
    assert [(t.step, t.text) for t in good_sop.thresholds] == [
        ("5.2.2", "more than 180"), ("5.2.2", "more than 365"), ("5.3.1", "at least 1"),
        ("5.4.2", "< 0.80"), ("5.4.2", "< 0.85"), ("5.4.2", "> 7"), ("5.5.1", "at least 1")]
    assert good_sop.to_prompt_text() == good_sop.text


def test_good_answer_passes_every_check(good_sop: SOPDocument, good_schema: DataSchema):
    checks = check_sop(good_sop, good_schema)
    assert failing(checks) == []
    assert len(checks) == 8


def test_missing_sop_block_is_a_parse_error():
    with pytest.raises(ParseError, match="missing <SOP>"):
        parse("<sop_analysis>plan</sop_analysis> and no SOP")


def test_unclosed_sop_block_is_a_parse_error(sop_answer: str):
    with pytest.raises(ParseError, match="unclosed <SOP> block"):
        parse(sop_answer.replace("</SOP>", ""))


def test_analysis_backticks_are_not_references(sop_answer: str, edit):
    sop = parse(edit(sop_answer, "Ledger:", "Also `bogus_field`. Ledger:"))
    assert "bogus_field" not in sop.referenced_fields


def test_step_text_runs_to_the_next_numbered_line(sop_answer: str, edit):
    sop = parse(edit(sop_answer, "5.3 Refill availability\n", "5.3 Refill availability\ncontinued here\n"))
    step = next(s for s in sop.steps if s.number == "5.3")
    assert step.text == "Refill availability\ncontinued here"


def test_numbered_list_inside_a_section_is_not_a_heading(sop_answer: str, good_schema: DataSchema, edit):
    text = edit(sop_answer, "3. Definitions\n", "3. Definitions\n1. Prescription age: days since writing.\n"
                "2. Validity: the limit set by class.\n")
    sop = parse(text)
    assert [s.title for s in sop.sections] == list(SOP_SECTION_TITLES)
    assert "1. Prescription age" in sop.sections[2].body
    assert failing(check_sop(sop, good_schema)) == []


def test_markdown_headings_are_tolerated(sop_answer: str, good_schema: DataSchema, edit):
    text = edit(sop_answer, "1. Purpose\n", "## 1. Purpose\n")
    text = edit(text, "5. Main Procedure\n", "**5. Main Procedure**\n")
    assert failing(check_sop(parse(text), good_schema)) == []


def test_renamed_section_fails(sop_answer: str, good_schema: DataSchema, edit):
    sop = parse(edit(sop_answer, "3. Definitions\n", "3. Glossary\n"))
    result = by_name(check_sop(sop, good_schema), "sop.sections_in_order")
    assert not result.passed
    assert "3. Glossary" in result.message and "3. Definitions" in result.message


def test_missing_section_fails(sop_answer: str, good_schema: DataSchema, edit):
    start, end = sop_answer.index("2. Scope\n"), sop_answer.index("3. Definitions\n")
    sop = parse(sop_answer[:start] + sop_answer[end:])
    assert failing(check_sop(sop, good_schema)) == ["sop.sections_in_order"]


def test_sections_out_of_order_fail(sop_answer: str, good_schema: DataSchema):
    purpose = sop_answer[sop_answer.index("1. Purpose\n"):sop_answer.index("2. Scope\n")]
    scope = sop_answer[sop_answer.index("2. Scope\n"):sop_answer.index("3. Definitions\n")]
    sop = parse(sop_answer.replace(purpose + scope, scope + purpose))
    assert "sop.sections_in_order" in failing(check_sop(sop, good_schema))


def test_no_numbered_steps_fail(sop_answer: str, good_schema: DataSchema):
    main = sop_answer[sop_answer.index("5.1 Record"):sop_answer.index("6. Output")]
    unnumbered = "\n".join(line.split(" ", 1)[1] for line in main.strip().splitlines()) + "\n"
    sop = parse(sop_answer.replace(main, unnumbered))
    assert sop.steps == []
    result = by_name(check_sop(sop, good_schema), "sop.steps_present")
    assert not result.passed and "5.1, 5.1.1" in result.message
    assert by_name(check_sop(sop, good_schema), "sop.step_numbering").passed


@pytest.mark.parametrize("old, new, problem", [
    ("5.3 Refill availability", "5.4 Refill availability", "5.4 comes after 5.2.2; expected 5.2.3 or 5.3"),
    ("5.3.1 The request", "5.3.2 The request", "5.3.2 comes after 5.3; expected 5.3.1 or 5.4"),
    ("5.1 Record matching", "5.2 Record matching", "the first step is 5.2; expected 5.1"),
    ("5.2.1 Compute", "5.2.0 Compute", "malformed step numbers 5.2.0"),
    ("5.2.1 Compute", "5.2.1.1 Compute", "malformed step numbers 5.2.1.1"),
    ("5.3 Refill availability", "4.3 Refill availability", "malformed step numbers 4.3"),
])
def test_bad_step_numbering_fails(sop_answer: str, good_schema: DataSchema, edit, old: str, new: str, problem: str):
    sop = parse(edit(sop_answer, old, new))
    result = by_name(check_sop(sop, good_schema), "sop.step_numbering")
    assert not result.passed
    assert problem in result.message


def test_trailing_dot_after_step_number_is_accepted(sop_answer: str, good_schema: DataSchema, edit):
    sop = parse(edit(sop_answer, "5.3 Refill availability", "5.3. Refill availability"))
    assert "5.3" in [s.number for s in sop.steps]
    assert failing(check_sop(sop, good_schema)) == []


def test_to_be_obtained_field_not_derived_in_main_procedure_fails(sop_answer: str, good_schema: DataSchema):
    main_start, output_start = sop_answer.index("5. Main Procedure"), sop_answer.index("6. Output")
    main = sop_answer[main_start:output_start]
    sop = parse(sop_answer.replace(main, main.replace("`early_refill_ratio`", "the early refill ratio")))
    assert "early_refill_ratio" in sop.referenced_fields  # still named in 6. Output
    result = by_name(check_sop(sop, good_schema), "sop.to_be_obtained_derived")
    assert not result.passed
    assert result.message == ("to-be-obtained fields never derived in 5. Main Procedure: early_refill_ratio; "
                              "mention each in backticks where it is computed")
    assert failing(check_sop(sop, good_schema)) == ["sop.to_be_obtained_derived"]


def test_unknown_backticked_field_fails_and_is_named(sop_answer: str, good_schema: DataSchema, edit):
    sop = parse(edit(sop_answer, "5.3.1 The request has a refill available only when `refills_remaining`",
                     "5.3.1 The request has a refill available only when `refill_count` and `refills_remaining`"))
    result = by_name(check_sop(sop, good_schema), "sop.fields_known")
    assert not result.passed
    assert result.message.startswith("backticked names that are not schema fields: refill_count;")
    assert result.details["unknown"] == ["refill_count"]


def test_backticked_label_is_an_unknown_field(sop_answer: str, good_schema: DataSchema, edit):
    sop = parse(edit(sop_answer, 'Set `refill_decision` to "approve"', "Set `refill_decision` to `approve`"))
    assert failing(check_sop(sop, good_schema)) == ["sop.fields_known"]


def test_missing_decision_outcome_fails(sop_answer: str, good_schema: DataSchema):
    sop = parse(sop_answer.replace('"deny"', '"decline"'))
    result = by_name(check_sop(sop, good_schema), "sop.decision_outcomes_defined")
    assert not result.passed and "refill_decision = deny" in result.message
    assert failing(check_sop(sop, good_schema)) == ["sop.decision_outcomes_defined"]


def test_label_inside_a_longer_word_does_not_count(sop_answer: str, good_schema: DataSchema):
    sop = parse(sop_answer.replace('"approve"', '"approved"'))
    assert failing(check_sop(sop, good_schema)) == ["sop.decision_outcomes_defined"]


def test_boolean_decision_needs_both_true_and_false(sop_answer: str, schema_answer: str, edit):
    schema = DataSchema.parse(edit(
        schema_answer, 'refill_decision - enum, outcome of the refill review (e.g., "approve") '
        '[choices: approve | refer_to_prescriber | deny] [decision]',
        "refill_decision - boolean, whether the refill may be dispensed (e.g., True) [decision]"))
    assert failing(check_sop(parse(sop_answer), schema)) == []  # 5.5.2 says both true and false
    sop = parse(edit(sop_answer, "is false;", "is not set;"))
    result = by_name(check_sop(sop, schema), "sop.decision_outcomes_defined")
    assert not result.passed and "refill_decision = false" in result.message


def test_no_threshold_in_main_procedure_fails(sop_answer: str, good_schema: DataSchema):
    text = sop_answer
    for phrase, words in [("more than 180", "beyond its limit"), ("more than 365", "beyond its limit"),
                          ("at least 1", "positive"), ("< 0.80", "too low"), ("< 0.85", "too low"),
                          ("> 7", "ample")]:
        text = text.replace(phrase, words)
    sop = parse(text)
    result = by_name(check_sop(sop, good_schema), "sop.thresholds_present")
    assert not result.passed and "comparator and a number" in result.message
    assert failing(check_sop(sop, good_schema)) == ["sop.thresholds_present"]


def test_threshold_outside_main_procedure_does_not_count(sop_answer: str, good_schema: DataSchema):
    text = sop_answer
    for phrase in MAIN_THRESHOLDS:
        text = text.replace(phrase, "over the limit")
    text = text.replace("3. Definitions\n", "3. Definitions\nA ratio below 0.8 is early.\n")
    sop = parse(text)
    assert [(t.step, t.section) for t in sop.thresholds] == [("3", "Definitions")]
    assert failing(check_sop(sop, good_schema)) == ["sop.thresholds_present"]


@pytest.mark.parametrize("text, found", [
    ("when `x` >= 30 days", ">= 30"),
    ("if the score is ≥ 5", "≥ 5"),
    ("at most 3 refills", "at most 3"),
    ("fewer than 2 alerts", "fewer than 2"),
    ("greater than or equal to 0.5", "greater than or equal to 0.5"),
    ("when the amount exceeds $500", "exceeds $500"),
    ("a ratio below 10%", "below 10%"),
    ("requested within 30 days", "within 30"),
    ("is less than -2.5", "less than -2.5"),
])
def test_find_thresholds_recognises_comparators(text: str, found: str):
    assert [t.text for t in find_thresholds(text, step="5.1", section="Main Procedure")] == [found]


@pytest.mark.parametrize("text", ["at least one refill", "above the limit", "see 5.2 and 6", "value x=3"])
def test_find_thresholds_ignores_non_numeric_conditions(text: str):
    assert find_thresholds(text, step="5.1", section="Main Procedure") == []


def test_existing_field_missing_from_input_is_a_warning(sop_answer: str, good_schema: DataSchema, edit):
    sop = parse(edit(sop_answer, ", and `insurance_status` reports coverage.", "."))
    result = by_name(check_sop(sop, good_schema), "sop.inputs_listed")
    assert not result.passed and result.severity == "warning" and "insurance_status" in result.message
