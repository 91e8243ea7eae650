"""Data that looks like data (issue 16, items 6 and 7): conditional fields and the schema annotations.

The realism heuristics (spread, identifiers, correlations) are tried in test_dataset_realism.py.

Each check is tried on the recorded example's rows (which pass) and on those rows spoiled the way a
careless model spoils them; a failing batch goes back to the model like any other check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.verify.dataset_checks import conditional_checks, placeholder_problem
from sopforge.families.sop_tools.verify.dataset_realism import realism_checks
from sopforge.families.sop_tools.verify.gx_suite import validate_rows
from sopforge.families.sop_tools.verify.schema_checks import check_schema
from sopforge.llm.providers._files import read_response
from sopforge.parsing import ParseError

RECORDINGS = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "pharmacy_writes"  # frozen: see its README


def recorded(stem: str) -> str:
    return read_response(RECORDINGS / f"pharmacy_refills__{stem}__a1.response.md")[1]


@pytest.fixture(scope="module")
def schema() -> DataSchema:
    return DataSchema.parse(recorded("schema__main"))


@pytest.fixture(scope="module")
def rows(schema) -> list[dict]:
    return DatasetBatch.parse(recorded("dataset__batch1"), schema).rows


def failed(checks) -> dict[str, str]:
    return {c.name: c.message for c in checks if not c.passed}


# --- the schema declares conditional fields and correlations -----------------------------------

def test_the_schema_declares_a_conditional_field_and_a_correlation(schema):
    drug = schema.field("interacting_drug")
    assert drug.present_if.field == "interaction_alert_level" and drug.present_if.values == ["moderate", "severe"]
    assert drug.to_line().endswith("[present_if: interaction_alert_level = moderate | severe]")
    fill = schema.field("last_fill_date")
    assert (fill.correlates.field, fill.correlates.sign) == ("request_date", "+")
    assert DataSchema.parse(f"<schema>{schema.to_prompt_text()}</schema>") == schema
    assert failed(check_schema(schema)) == {}


@pytest.mark.parametrize(("line", "message"), [
    ("x_ref - string, a reference (e.g., \"R-1\") [present_if: no_such_field = yes]", "must name another existing field"),
    ("x_ref - string, a reference (e.g., \"R-1\") [present_if: insurance_status = sometimes]",
     "sometimes is not a value of insurance_status"),
    ("x_ref - string, a reference (e.g., \"R-1\") [present_if: drug_name = aspirin]",
     "drug_name must be an enum or boolean field"),
    ("x_count - integer, a count (e.g., 1) [correlates: drug_name +]", "must be another existing integer, float or date"),
])
def test_a_condition_or_correlation_on_the_wrong_field_is_named(schema, line, message):
    text = schema.to_prompt_text().replace("</Existing_fields>", line + "\n</Existing_fields>")
    bad = failed(check_schema(DataSchema.parse(f"<schema>{text}</schema>")))
    assert message in (bad.get("schema.conditional_fields", "") + bad.get("schema.correlations", ""))


def test_a_malformed_annotation_is_a_parse_error_showing_the_grammar():
    with pytest.raises(ParseError, match=r"write \[present_if: other_field = value\]"):
        DataSchema.parse("<schema><Existing_fields>\na - string, a (e.g., \"x\") [present_if: b]\n</Existing_fields>"
                         "<Field_to_be_obtained>\nd - boolean, d (e.g., True) [decision]\n</Field_to_be_obtained></schema>")
    with pytest.raises(ParseError, match=r"\[correlates: other_field \+\]"):
        DataSchema.parse("<schema><Existing_fields>\na - integer, a (e.g., 1) [correlates: b up]\n</Existing_fields>"
                         "<Field_to_be_obtained>\nd - boolean, d (e.g., True) [decision]\n</Field_to_be_obtained></schema>")


# --- conditional fields hold a value exactly where their condition holds ------------------------

def test_the_recorded_rows_pass_every_data_check(schema, rows):
    checks = validate_rows(rows, schema).checks + conditional_checks(rows, schema, "request_id") + realism_checks(
        rows, schema, "request_id")
    assert failed(checks) == {}
    assert sum(r["interacting_drug"] is None for r in rows) == 14  # no alert, no interacting drug


def test_a_placeholder_where_the_fact_does_not_exist_is_named(schema, rows):
    spoiled = [dict(r) for r in rows]
    spoiled[0]["interacting_drug"] = "none"  # RR-418203 has no alert
    spoiled[5]["interacting_drug"] = None  # RR-409362 has a severe alert
    spoiled[8]["interacting_drug"] = "DRUG-000000"  # RR-461204: a moderate alert, an invented code
    message = failed(conditional_checks(spoiled, schema, "request_id"))["dataset.rows.conditional"]
    assert ("interacting_drug='none' (request_id='RR-418203': interaction_alert_level = moderate | severe does not "
            "hold, so write None (no value))") in message
    assert "interacting_drug=None (request_id='RR-409362': interaction_alert_level = moderate | severe holds" in message
    assert "interacting_drug='DRUG-000000' (request_id='RR-461204': an all-zero code, a placeholder)" in message


@pytest.mark.parametrize(("value", "problem"), [
    ("n/a", "a placeholder word"), ("TBD", "a placeholder word"), ("TAG-000000", "an all-zero code"),
    ("XXXX", "one repeated character"), ("clarithromycin 500 mg tablet", None), ("RX-100200", None)])
def test_placeholder_values(value, problem):
    found = placeholder_problem(value)
    assert (found is None) if problem is None else found.startswith(problem)
