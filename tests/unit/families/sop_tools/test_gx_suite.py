"""The Great Expectations suite generated from a DataSchema and the row validator built on it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.verify import gx_suite
from sopforge.families.sop_tools.verify.gx_import import import_gx
from sopforge.families.sop_tools.verify.gx_suite import GXReport, build_suite, suite_json, validate_rows

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
G = "dataset.gx."


@pytest.fixture(scope="module")
def schema() -> DataSchema:
    return DataSchema.parse((ANSWERS / "schema.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rows(schema: DataSchema) -> list[dict]:
    return DatasetBatch.parse((ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8"), schema).rows


def small_schema(existing: str) -> DataSchema:
    return DataSchema.parse(f"<schema><Existing_fields>\n{existing}\n</Existing_fields><Field_to_be_obtained>\n"
                            "done - boolean, whether handled (e.g., True) [decision]\n</Field_to_be_obtained></schema>")


def with_value(rows: list[dict], index: int, **changes) -> list[dict]:
    out = [dict(r) for r in rows]
    out[index].update(changes)
    return out


def failed(report: GXReport) -> dict[str, str]:
    return {c.name: c.message for c in report.failures}


def by_column(schema: DataSchema) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for e in suite_json(schema)["expectations"]:
        found.setdefault(e["kwargs"].get("column", "table"), []).append(e["type"])
    return found


# --- the suite --------------------------------------------------------------------------------

BASE = ["expect_column_to_exist", "expect_column_values_to_not_be_null", "expect_column_values_to_be_in_type_list"]


def test_suite_for_the_fixture_schema_has_the_expected_expectations_per_column(schema: DataSchema):
    cols = by_column(schema)
    assert list(cols) == ["table"] + [f.name for f in schema.existing]  # to-be-obtained fields are not data
    assert cols["table"] == ["expect_table_columns_to_match_set"]
    assert cols["prescription_id"] == BASE + ["expect_column_values_to_not_match_regex",
                                              "expect_column_values_to_match_regex",
                                              "expect_column_values_to_be_unique"]
    assert cols["patient_id"] == BASE + ["expect_column_values_to_not_match_regex",
                                         "expect_column_values_to_match_regex"]  # an id, but not the row id
    assert cols["medication_class"] == BASE + ["expect_column_values_to_be_in_set"]
    assert cols["insurance_status"] == BASE + ["expect_column_values_to_be_in_set"]
    assert cols["request_date"] == BASE + ["expect_column_values_to_match_regex",
                                           "expect_column_values_to_match_strftime_format"]
    assert cols["refills_remaining"] == BASE + ["expect_column_values_to_be_between"]
    assert cols["prescriber_license_active"] == BASE


def test_suite_kwargs_come_from_the_schema(schema: DataSchema):
    exps = {(e["type"], e["kwargs"].get("column")): e for e in suite_json(schema)["expectations"]}
    assert exps[("expect_column_values_to_be_between", "days_since_last_fill")]["kwargs"] == {
        "column": "days_since_last_fill", "min_value": 0, "max_value": 365}
    assert exps[("expect_column_values_to_be_in_set", "medication_class")]["kwargs"]["value_set"] == [
        "maintenance", "acute", "schedule_ii", "schedule_iii_v"]
    assert exps[("expect_column_values_to_be_in_type_list", "prescriber_license_active")]["kwargs"]["type_list"] == ["bool"]
    assert exps[("expect_column_values_to_be_in_type_list", "refills_remaining")]["kwargs"]["type_list"] == ["int"]
    assert exps[("expect_column_values_to_match_strftime_format", "request_date")]["kwargs"]["strftime_format"] == "%Y-%m-%d"
    table = exps[("expect_table_columns_to_match_set", None)]
    assert table["kwargs"]["column_set"] == [f.name for f in schema.existing]
    assert table["kwargs"].get("exact_match", True) is True  # GX omits its default from the JSON
    unique = exps[("expect_column_values_to_be_unique", "prescription_id")]
    assert unique["meta"] == {"phase": "typed", "check": G + "expect_column_values_to_be_unique.prescription_id"}
    assert unique["description"] == "prescription_id must be unique: it identifies one row"


def test_suite_json_round_trips_and_records_the_schema(schema: DataSchema):
    import great_expectations as gx

    data = suite_json(schema)
    assert data["name"] == "sopforge_dataset" and len(data["expectations"]) == 53
    assert len(data["meta"]["sopforge"]["schema_sha256"]) == 64
    assert gx.ExpectationSuite(**data).to_json_dict() == data
    assert [e.expectation_type for e in build_suite(schema, phase="raw").expectations][:2] == [
        "expect_table_columns_to_match_set", "expect_column_to_exist"]


def test_types_of_other_fields(schema: DataSchema):
    other = small_schema('event_id - string, unique event id (e.g., "E-1")\n'
                         'seen_at - datetime, when seen (e.g., "2025-04-18T15:32:10Z")\n'
                         'score - float, a score (e.g., 0.5) [range: 0.0 to 1.0]\n'
                         'tags - list[string], keywords (e.g., ["a"])\n'
                         'channel - string, channel (e.g., "web") [choices: web | phone]')
    cols = by_column(other)
    assert cols["seen_at"] == BASE + ["expect_column_values_to_match_regex", "expect_column_values_to_be_dateutil_parseable"]
    assert cols["score"] == BASE + ["expect_column_values_to_be_between"]
    assert cols["tags"] == BASE
    assert cols["channel"] == BASE + ["expect_column_values_to_not_match_regex", "expect_column_values_to_be_in_set"]
    types = {e["kwargs"]["column"]: e["kwargs"]["type_list"] for e in suite_json(other)["expectations"]
             if e["type"] == "expect_column_values_to_be_in_type_list"}
    assert types == {"event_id": ["str"], "seen_at": ["str"], "score": ["float", "int"], "tags": ["list"],
                     "channel": ["str"]}


# --- validating rows ----------------------------------------------------------------------------

def test_good_rows_pass_every_expectation(schema: DataSchema, rows: list[dict]):
    report = validate_rows(rows, schema)
    assert report.success and report.row_count == 14 and report.seconds > 0
    assert len(report.checks) == 53
    assert report.checks[0].name == G + "expect_table_columns_to_match_set.table"
    assert G + "expect_column_values_to_be_between.refills_remaining" in [c.name for c in report.checks]
    assert report.feedback_text() == "All 53 data checks passed on 14 rows."


def test_wrong_type_is_named_and_does_not_break_the_value_checks(schema: DataSchema, rows: list[dict]):
    bad = with_value(rows, 2, days_since_last_fill="22", request_date=20250418)
    report = validate_rows(bad, schema)
    msgs = failed(report)
    assert set(msgs) == {G + "expect_column_values_to_be_in_type_list.days_since_last_fill",
                         G + "expect_column_values_to_be_in_type_list.request_date"}
    assert msgs[G + "expect_column_values_to_be_in_type_list.days_since_last_fill"] == (
        "days_since_last_fill must be a whole number such as 4; broken by 1 of 14 values: "
        "'22' (prescription_id='RX-004550')")
    assert "20250418 (prescription_id='RX-004550')" in msgs[G + "expect_column_values_to_be_in_type_list.request_date"]
    assert not any("could not be checked" in c.message for c in report.checks)


def test_out_of_range_value_is_quoted_with_its_row(schema: DataSchema, rows: list[dict]):
    bad = with_value(with_value(rows, 0, refills_remaining=12), 5, refills_remaining=-1)
    check = next(c for c in validate_rows(bad, schema).failures)
    assert check.name == G + "expect_column_values_to_be_between.refills_remaining"
    assert check.message == ("refills_remaining must be between 0 and 11 inclusive; broken by 2 of 14 values: "
                             "12 (prescription_id='RX-004512'); -1 (prescription_id='RX-004625')")
    assert check.details["unexpected_count"] == 2 and check.details["column"] == "refills_remaining"
    assert check.details["offending"][0] == {"row": "prescription_id='RX-004512'", "value": "12"}


def test_value_outside_choices(schema: DataSchema, rows: list[dict]):
    msgs = failed(validate_rows(with_value(rows, 1, medication_class="chronic"), schema))
    assert list(msgs) == [G + "expect_column_values_to_be_in_set.medication_class"]
    assert "must be one of: maintenance | acute | schedule_ii | schedule_iii_v" in msgs[G + "expect_column_values_to_be_in_set.medication_class"]
    assert "'chronic' (prescription_id='RX-004519')" in msgs[G + "expect_column_values_to_be_in_set.medication_class"]


@pytest.mark.parametrize("value, checks", [
    ("2025-02-30", ["expect_column_values_to_match_strftime_format"]),
    ("18/04/2025", ["expect_column_values_to_match_regex", "expect_column_values_to_match_strftime_format"]),
    ("2025-4-18", ["expect_column_values_to_match_regex"]),
])
def test_dates_must_be_real_and_iso(schema: DataSchema, rows: list[dict], value: str, checks: list[str]):
    assert list(failed(validate_rows(with_value(rows, 0, request_date=value), schema))) == [
        f"{G}{c}.request_date" for c in checks]


def test_missing_values_blank_and_na_tokens(schema: DataSchema, rows: list[dict]):
    bad = with_value(with_value(with_value(rows, 0, patient_id="N/A"), 1, patient_id="  "), 2, insurance_status=None)
    msgs = failed(validate_rows(bad, schema))
    assert set(msgs) == {G + "expect_column_values_to_not_match_regex.patient_id",
                         G + "expect_column_values_to_not_be_null.insurance_status"}
    assert "'N/A' (prescription_id='RX-004512'); '  ' (prescription_id='RX-004519')" in msgs[
        G + "expect_column_values_to_not_match_regex.patient_id"]
    assert "None (prescription_id='RX-004550')" in msgs[G + "expect_column_values_to_not_be_null.insurance_status"]


def test_numeric_looking_identifiers_are_refused(schema: DataSchema, rows: list[dict]):
    bad = with_value(with_value(rows, 0, prescription_id="004512"), 1, patient_id="1e3")
    assert set(failed(validate_rows(bad, schema))) == {G + "expect_column_values_to_match_regex.prescription_id",
                                                       G + "expect_column_values_to_match_regex.patient_id"}


def test_duplicate_ids_fail_uniqueness(schema: DataSchema, rows: list[dict]):
    msgs = failed(validate_rows(with_value(rows, 3, prescription_id="RX-004512"), schema))
    assert list(msgs) == [G + "expect_column_values_to_be_unique.prescription_id"]
    assert "broken by 2 of 14 values: 'RX-004512'" in msgs[G + "expect_column_values_to_be_unique.prescription_id"]


def test_missing_column_is_reported_not_raised(schema: DataSchema, rows: list[dict]):
    bad = [{k: v for k, v in r.items() if k != "insurance_status"} for r in rows]
    report = validate_rows(bad, schema)
    msgs = failed(report)
    assert msgs[G + "expect_table_columns_to_match_set.table"] == (
        "rows must have exactly the existing fields as keys: missing insurance_status")
    assert msgs[G + "expect_column_to_exist.insurance_status"] == "insurance_status must be present: the column is missing from the rows"
    assert all(n.endswith(".insurance_status") or n.endswith(".table") for n in msgs)
    extra = validate_rows([dict(r, note="x") for r in rows], schema)
    assert failed(extra) == {G + "expect_table_columns_to_match_set.table":
                             "rows must have exactly the existing fields as keys: unexpected note"}


def test_datetime_float_and_list_fields():
    other = small_schema('event_id - string, unique event id (e.g., "E-1")\n'
                         'seen_at - datetime, when seen (e.g., "2025-04-18T15:32:10Z")\n'
                         'score - float, a score (e.g., 0.5) [range: 0.0 to 1.0]\n'
                         'tags - list[string], keywords (e.g., ["a"])')
    good = [{"event_id": "E-1", "seen_at": "2025-04-18T15:32:10Z", "score": 1, "tags": ["a"]},
            {"event_id": "E-2", "seen_at": "2025-04-18T15:32:10", "score": 0.25, "tags": []}]
    assert validate_rows(good, other).success
    bad = [{"event_id": "E-1", "seen_at": "2025-04-18 15:32", "score": 1.5, "tags": "a"},
           {"event_id": "E-2", "seen_at": "2025-13-18T15:32:10", "score": "high", "tags": ["b"]}]
    assert set(failed(validate_rows(bad, other))) == {
        G + "expect_column_values_to_match_regex.seen_at",
        G + "expect_column_values_to_be_dateutil_parseable.seen_at",
        G + "expect_column_values_to_be_between.score",
        G + "expect_column_values_to_be_in_type_list.score",
        G + "expect_column_values_to_be_in_type_list.tags",
    }


def test_no_rows_validate_without_error(schema: DataSchema):
    report = validate_rows([], schema)
    assert report.row_count == 0 and not any("could not be checked" in c.message for c in report.checks)


def test_feedback_text_lists_each_failure(schema: DataSchema, rows: list[dict]):
    text = validate_rows(with_value(rows, 0, refills_remaining=12, insurance_status="expired"), schema).feedback_text()
    lines = text.splitlines()
    assert lines[0] == "2 data check(s) failed on 14 rows; fix these values and keep every other rule:"
    assert lines[1].startswith("- dataset.gx.expect_column_values_to_be_between.refills_remaining: ")
    assert lines[2].startswith("- dataset.gx.expect_column_values_to_be_in_set.insurance_status: ")
    assert len(lines) == 3


def test_one_context_per_process(schema: DataSchema, rows: list[dict]):
    context = gx_suite.gx_context()
    validate_rows(rows[:2], schema)
    validate_rows(rows[2:4], schema)
    assert gx_suite.gx_context() is context
    assert context.progress_bars["globally"] is False


def test_configurations_built_once_per_validation_change_no_result_and_the_class_is_restored(
        schema: DataSchema, rows: list[dict], monkeypatch):
    from great_expectations.expectations.expectation import Expectation

    original = Expectation.__dict__["configuration"]
    bad = with_value(with_value(with_value(rows, 0, refills_remaining=12), 1, medication_class="chronic"), 2,
                     days_since_last_fill="22", prescription_id="RX-004512", request_date="2025-02-30")
    reports = [validate_rows(batch, schema).checks for batch in (rows, bad)]
    assert Expectation.__dict__["configuration"] is original
    monkeypatch.setattr(gx_suite, "_configurations_built_once", contextlib.nullcontext)  # GX as it comes
    assert [validate_rows(batch, schema).checks for batch in (rows, bad)] == reports
    assert len([c for c in reports[1] if not c.passed]) == 5  # range, choice, type, unique id, calendar date



def test_offending_values_are_asked_for_only_where_pass_fail_found_a_failure(
        schema: DataSchema, rows: list[dict], monkeypatch):
    bad = with_value(with_value(rows, 0, refills_remaining=12), 1, days_since_last_fill="22")
    passes: list[tuple[bool, list[str]]] = []
    validate = gx_suite._RUNNER.validate

    def recorded(frame, suite, *, detailed):
        passes.append((detailed, [e.meta["check"] for e in suite.expectations]))
        return validate(frame, suite, detailed=detailed)

    monkeypatch.setattr(gx_suite._RUNNER, "validate", recorded)
    assert validate_rows(rows, schema).success
    assert [detailed for detailed, _ in passes] == [False, False]  # raw and typed: pass/fail only
    passes.clear()
    two_pass = validate_rows(bad, schema).checks
    assert [(detailed, checks) for detailed, checks in passes if detailed] == [
        (True, [G + "expect_column_values_to_be_in_type_list.days_since_last_fill"]),
        (True, [G + "expect_column_values_to_be_between.refills_remaining"])]
    passes.clear()
    assert validate_rows(bad, schema, pass_fail_first=False).checks == two_pass  # same values quoted
    assert [detailed for detailed, _ in passes] == [True, True]

def test_analytics_are_off_unless_the_user_turned_them_on(monkeypatch):
    monkeypatch.delenv("GX_ANALYTICS_ENABLED", raising=False)
    import_gx()
    assert os.environ["GX_ANALYTICS_ENABLED"] == "false"
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "true")
    import_gx()
    assert os.environ["GX_ANALYTICS_ENABLED"] == "true"


def test_gx_imports_without_scipy_stats_altair_or_sqlalchemy_and_each_loads_when_used(tmp_path):
    """In a fresh process (this one may have loaded them already): GX validates the example rows with
    scipy.stats, altair and sqlalchemy still unloaded, and the first use of each loads the real module."""
    script = f"""
import sys
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.verify.gx_suite import validate_rows
schema = DataSchema.parse(open({str(ANSWERS / "schema.txt")!r}).read())
rows = DatasetBatch.parse(open({str(ANSWERS / "dataset_batch1.txt")!r}).read(), schema).rows
assert validate_rows(rows, schema).success
print(type(sys.modules["scipy.stats"]).__name__, "scipy.spatial" in sys.modules, "altair.vegalite" in sys.modules,
      "sqlalchemy" in sys.modules)
from scipy import stats
print(round(float(stats.entropy([0.5, 0.5])), 4), type(sys.modules["scipy.stats"]).__name__)
import altair, sqlalchemy
print(altair.Chart.__name__, type(sys.modules["altair"]).__name__, sqlalchemy.Column.__name__)
from great_expectations.expectations.core import expect_column_kl_divergence_to_be_less_than as kl
print(kl.alt.Chart is altair.Chart)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GX_ANALYTICS_ENABLED": "false"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["_LazyModule", "False", "False", "False", "0.6931", "module",
                                   "Chart", "module", "Column", "True"]


def test_only_gx_is_refused_sqlalchemy_and_only_while_it_is_imported():
    """Another thread importing sqlalchemy while GX is imported must get it (the flow warms GX up in the
    background); a GX module asking meanwhile is told it is not installed."""
    script = """
import sys
from sopforge.families.sop_tools.verify.gx_import import _without_sqlalchemy
with _without_sqlalchemy():
    try:
        exec("import sqlalchemy", {"__name__": "great_expectations.compatibility.sqlalchemy"})
    except ModuleNotFoundError as e:
        print("refused", e.name)
    import sqlalchemy
    print("imported", sqlalchemy.Column.__name__)
print(len([f for f in sys.meta_path if type(f).__name__ == "_RefuseToGX"]))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["refused", "sqlalchemy", "imported", "Column", "0"]
