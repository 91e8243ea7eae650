"""The audit on unusual but possible folders, and the value rules it relies on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sopbench_defects import REFERENCE, copy_good, edit
from sopforge.audit import audit_folder
from sopforge.audit.values import cell_matches, coerce_cell, substring_pairs

JUNK = {
    "metadata.json": "{not json", "toolspecs.json": '{"a": 1}', "tools.py": "def (:", "sop.txt": "  \n",
    "test_set_with_outputs.csv": '"unterminated\n',
}
WEIRD = {
    "metadata.json": json.dumps({"name": 5, "input_columns": "a", "output_columns": [1, "b"]}),
    "toolspecs.json": json.dumps([{"toolSpec": {"name": 3, "inputSchema": {"json": {"properties": [1]}}}}, 7]),
    "tools.py": "x = 1\n", "sop.txt": "s", "test_set_with_outputs.csv": "a,,b\n1,2,3\n007,,x\n",
}


@pytest.mark.parametrize("files, expected", [
    ({}, {"files.required"}),
    (JUNK, {"metadata.parses", "toolspecs.parses", "tools.policy.syntax", "files.sop_nonempty", "csv.loads"}),
    (WEIRD, {"metadata.columns_nonempty", "toolspecs.shape", "toolspecs.valid_json_schema", "tools.manager_class"}),
])
def test_broken_folders_are_reported_never_raised(tmp_path: Path, files: dict, expected: set):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    report = audit_folder(tmp_path)
    assert not report.ok
    assert expected <= {c.name for c in report.errors}


def test_flat_toolspecs_without_the_wrapper_are_accepted(good_folder: Path):
    path = good_folder / "toolspecs.json"
    path.write_text(json.dumps([element["toolSpec"] for element in json.loads(path.read_text())]))
    report = audit_folder(good_folder)
    assert report.ok and not report.warnings, report.to_text()


def test_a_reference_procedure_that_fails_the_policy_is_not_run_but_the_tools_are(tmp_path: Path):
    folder = copy_good(tmp_path, with_reference=True)
    edit(folder, "reference_procedure.py", '"""Reference', 'import socket\n"""Reference')
    report = audit_folder(folder)
    assert "reference.policy.network" in {c.name for c in report.errors}
    assert report.get("runtime.tool_matches_csv").passed
    assert any(s.name == "labels.reference_procedure" and "policy" in s.reason for s in report.skipped)


def test_a_folder_with_its_own_reference_can_be_checked_with_another(tmp_path: Path):
    folder = copy_good(tmp_path, with_reference=True)
    other = tmp_path / "always_approve.py"
    other.write_text("def run_procedure(manager, case):\n    return {'final_decision': 'approve'}\n")
    report = audit_folder(folder, reference=other)
    assert report.get("labels.reference_procedure").details["tasks"] == [1, 2, 3]
    assert audit_folder(folder, reference=REFERENCE).ok


@pytest.mark.parametrize("value, cell, same", [
    (742, "742", True), (0.3, "0.30", True), (True, "TRUE", True), (False, "True", False),
    ("A-0001", " A-0001 ", True), ("0.30", "0.3", True), (None, "", True), (None, "None", True),
    ([1, 2], "[1, 2]", True), ({"a": 1}, "{'a': 1}", True), (655, "665", False), ("Approve", "approve", False),
])
def test_cell_matches(value, cell, same):
    assert cell_matches(value, cell) is same


def test_labels_compare_case_insensitively_when_asked():
    assert cell_matches("Approve", "approve", casefold=True)


@pytest.mark.parametrize("cell, schema, value", [
    ("742", {"type": "integer"}, 742), ("5.0", {"type": "integer"}, 5), ("0.21", {"type": "number"}, 0.21),
    ("True", {"type": "boolean"}, True), ("A-0001", {"type": "string"}, "A-0001"), ("x", {"type": "integer"}, "x"),
    ("None", {"type": ["string", "null"]}, None), ('["a"]', {"type": "array"}, ["a"]), ("7", {}, "7"),
])
def test_coerce_cell(cell, schema, value):
    assert coerce_cell(cell, schema) == value


def test_substring_pairs_follow_the_harness_normalisation():
    assert substring_pairs(["valid", "not_valid", "approved"]) == [("valid", "not_valid")]
    assert substring_pairs(["low", "Very-Low", "high"]) == [("low", "Very-Low")]
    assert substring_pairs(["approve", "Approve", "reject"]) == []


def test_an_empty_cell_is_passed_as_null_and_not_type_checked(tmp_path: Path):
    """A conditional fact (PDMP figures exist only for controlled drugs) leaves its cell empty; the export's own
    audit refused such a folder ('' is not of type 'integer') and the demo recording stopped at package (issue 19).
    A tool whose required parameter is empty is not called on that row; an empty optional one is passed as null
    (the hidden columns of the CSV included) and is not type-checked."""
    from sopforge.audit.checks_specs import build_oracle_calls, check_rows_against_specs, oracle_tools
    from sopforge.audit.loader import load_folder

    folder = copy_good(tmp_path)
    specs = json.loads((folder / "toolspecs.json").read_text())
    schema = specs[1]["toolSpec"]["inputSchema"]["json"]
    schema["properties"]["dti_ratio"] = {"type": "number"}
    schema["required"].append("dti_ratio")
    (folder / "toolspecs.json").write_text(json.dumps(specs))
    edit(folder, "test_set_with_outputs.csv", "A-0002,Ben Ortiz,30000,655,0.41,", "A-0002,Ben Ortiz,30000,655,,")
    c = load_folder(folder)
    tools = oracle_tools(c)
    groups = build_oracle_calls(c, tools)
    assert [call["tool"] for call in groups[1]] == ["getCreditScore"]  # its required dti_ratio has no value
    assert groups[0][1]["input"]["dti_ratio"] == 0.21
    [rows] = check_rows_against_specs(c, tools, groups)
    assert rows.passed, rows.message


def test_an_optional_parameter_held_by_the_csv_is_passed_even_when_hidden_and_null_when_empty(tmp_path: Path):
    from sopforge.audit.checks_specs import build_oracle_calls, check_rows_against_specs, oracle_tools
    from sopforge.audit.loader import load_folder

    folder = copy_good(tmp_path)
    specs = json.loads((folder / "toolspecs.json").read_text())
    specs[1]["toolSpec"]["inputSchema"]["json"]["properties"]["credit_score"] = {"type": "integer"}
    (folder / "toolspecs.json").write_text(json.dumps(specs))
    edit(folder, "test_set_with_outputs.csv", "A-0002,Ben Ortiz,30000,655,", "A-0002,Ben Ortiz,30000,,")
    c = load_folder(folder)
    tools = oracle_tools(c)
    groups = build_oracle_calls(c, tools)
    assert groups[0][1]["input"] == {"application_id": "A-0001", "credit_score": 742}
    assert groups[1][1]["input"] == {"application_id": "A-0002", "credit_score": None}
    [rows] = check_rows_against_specs(c, tools, groups)
    assert rows.passed, rows.message
