"""``tools.data.one_value_per_input``: data that gives one input of a read tool two values of an output.

Issue 19: an independent answerer's baggage claims gave one settlement date two SDR rates, and the rate tool
(which takes only the date) failed ``tools.runtime.matches_data`` on three correct ``tools.py`` answers. The
pharmacy fixture's ``checkInsuranceEligibility(patient_id) -> insurance_status`` is the same shape.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.verify.data_dependencies import CHECK, one_value_per_input

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"


@pytest.fixture
def graph() -> APIGraph:
    return APIGraph.parse((ANSWERS / "api_graph.txt").read_text(encoding="utf-8"))


@pytest.fixture
def rows(good_schema) -> list[dict]:
    return [r for n in (1, 2) for r in DatasetBatch.parse((ANSWERS / f"dataset_batch{n}.txt").read_text(
        encoding="utf-8"), good_schema).rows]


def _other_status(status: str, good_schema) -> str:
    choices = next(f for f in good_schema.fields if f.name == "insurance_status").choices
    return next(c for c in choices if c != status)


def test_the_recorded_pharmacy_data_gives_every_input_one_value(rows, good_schema, graph):
    result = one_value_per_input(rows, good_schema, graph, "prescription_id")
    assert result.passed and result.name == CHECK and f"({len(rows)} rows)" in result.message
    assert "rerun_from" not in result.details


def test_one_patient_with_two_insurance_statuses_is_named_with_both_rows(rows, good_schema, graph):
    first, second = rows[0], rows[1]
    second["patient_id"] = first["patient_id"]
    second["insurance_status"] = _other_status(first["insurance_status"], good_schema)
    result = one_value_per_input(rows, good_schema, graph, "prescription_id")
    assert not result.passed and result.severity == "error"
    [conflict] = result.details["conflicts"]
    assert conflict["api"] == "checkInsuranceEligibility" and conflict["field"] == "insurance_status"
    assert conflict["inputs"] == {"patient_id": first["patient_id"]}
    assert set(conflict["rows"]) == {first["prescription_id"], second["prescription_id"]}
    assert f"checkInsuranceEligibility(patient_id={first['patient_id']!r})" in result.message
    assert result.details["rerun_from"] == "dataset"
    assert result.details["feedback"] == "rows with the same patient_id must hold the same insurance_status"


def test_an_input_that_identifies_the_record_or_an_empty_value_is_never_a_conflict(rows, good_schema, graph):
    # getPrescriptionRecord takes the identifier: every group is one row, whatever the other values are.
    rows[1]["patient_id"], rows[1]["medication_class"] = rows[0]["patient_id"], "changed"
    rows[1]["insurance_status"] = rows[0]["insurance_status"]
    assert one_value_per_input(rows, good_schema, graph, "prescription_id").passed
    # A row without the input's value cannot be asked about: it joins no group.
    rows[2]["patient_id"] = None
    rows[2]["insurance_status"] = _other_status(rows[0]["insurance_status"], good_schema)
    assert one_value_per_input(rows, good_schema, graph, "prescription_id").passed
