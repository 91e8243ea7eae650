"""Bad SOP-Bench folders (helpers for tests/unit/audit), each the §7 loan_triage example with exactly one known defect.

``DEFECTS`` maps a defect name to (edit, the check that must fail, its severity). Every
edit asserts that its target text is present exactly once, so a change to the good fixture
cannot silently turn a defect test into a test of the good folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sopbench"
GOOD = FIXTURES / "loan_triage"
REFERENCE = FIXTURES / "loan_triage_reference.py"


def edit(folder: Path, file: str, old: str, new: str) -> None:
    path = folder / file
    text = path.read_text()
    assert text.count(old) == 1, f"fixture edit target not found exactly once in {file}: {old!r}"
    path.write_text(text.replace(old, new))


def edit_json(folder: Path, file: str, change: Callable[[object], None]) -> None:
    path = folder / file
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def copy_good(dest: Path, *, with_reference: bool = False) -> Path:
    folder = dest / "loan_triage"
    shutil.copytree(GOOD, folder)
    if with_reference:
        shutil.copy(REFERENCE, folder / "reference_procedure.py")
    return folder


CREDIT = 'return {"credit_score": int(self._row(application_id)["credit_score"])}'


def _first_spec(data):
    return data[0]["toolSpec"]["inputSchema"]["json"]


def _add_reference_and_flip(folder: Path) -> None:
    shutil.copy(REFERENCE, folder / "reference_procedure.py")
    edit(folder, "test_set_with_outputs.csv", "0.41,refer", "0.41,approve")


def _subprocess_tool(folder: Path) -> None:
    marker = folder.parent / "EXECUTED"
    edit(folder, "tools.py", "import csv\n", f"import csv\nimport subprocess\nsubprocess.run(['touch', '{marker}'])\n")


DEFECTS: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "metadata_output_not_in_csv": (
        lambda f: edit_json(f, "metadata.json", lambda d: d["output_columns"].append("risk_band")),
        "metadata.columns_in_csv", "error"),
    "metadata_outputs_missing": (
        lambda f: edit_json(f, "metadata.json", lambda d: d.pop("output_columns")),
        "metadata.columns_nonempty", "error"),
    "input_output_overlap": (
        lambda f: edit_json(f, "metadata.json", lambda d: d["input_columns"].append("final_decision")),
        "metadata.columns_disjoint", "error"),
    "invalid_json_schema": (
        lambda f: edit_json(f, "toolspecs.json", lambda d: _first_spec(d)["properties"]["application_id"]
                            .update(type="strng")),
        "toolspecs.valid_json_schema", "error"),
    "required_not_in_properties": (
        lambda f: edit_json(f, "toolspecs.json", lambda d: _first_spec(d)["required"].append("applicant_id")),
        "toolspecs.required_in_properties", "error"),
    "stub_tool": (lambda f: edit(f, "tools.py", CREDIT, "return {}"), "runtime.tool_stub", "error"),
    "tool_ignores_data": (
        lambda f: edit(f, "tools.py", CREDIT, 'self._row(application_id)\n        return {"credit_score": 700}'),
        "runtime.tool_ignores_input", "error"),
    "tool_contradicts_csv": (
        lambda f: edit(f, "tools.py", CREDIT,
                       'return {"credit_score": int(self._row(application_id)["credit_score"]) + 10}'),
        "runtime.tool_matches_csv", "error"),
    "nondeterministic_id": (
        lambda f: edit(f, "tools.py", CREDIT, 'row = self._row(application_id)\n'
                       '        return {"credit_score": int(row["credit_score"]), "request_ref": id(row) % 100003}'),
        "runtime.deterministic", "error"),
    "nondeterministic_hash": (
        lambda f: edit(f, "tools.py", CREDIT, 'row = self._row(application_id)\n'
                       '        return {"credit_score": int(row["credit_score"]), "request_ref": hash(application_id) % 97}'),
        "tools.no_hash_builtin", "error"),
    "order_dependent_state": (
        lambda f: edit(f, "tools.py", CREDIT, 'self._calls = getattr(self, "_calls", 0) + 1\n'
                       '        return {"credit_score": int(self._row(application_id)["credit_score"]), '
                       '"call_number": self._calls}'),
        "runtime.deterministic", "error"),
    "imports_subprocess": (_subprocess_tool, "tools.policy.processes", "error"),
    "imports_socket": (
        lambda f: edit(f, "tools.py", "import csv\n", "import csv\nimport socket\n"),
        "tools.policy.network", "error"),
    "label_contradicts_reference": (_add_reference_and_flip, "labels.reference_procedure", "error"),
    "none_label": (
        lambda f: edit(f, "test_set_with_outputs.csv", "0.30,decline", "0.30,None"), "outputs.no_na", "error"),
    "substring_labels": (
        lambda f: [edit(f, "test_set_with_outputs.csv", a, b) for a, b in
                   (("0.21,approve", "0.21,valid"), ("0.30,decline", "0.30,invalid"))],
        "outputs.labels_distinct", "warning"),
    # Further single defects of the checklist, cheaper to keep here than to forget.
    "missing_sop": (lambda f: (f / "sop.txt").unlink(), "files.required", "error"),
    "duplicate_header": (
        lambda f: edit(f, "test_set_with_outputs.csv", "credit_score,dti_ratio", "credit_score,credit_score"),
        "csv.headers_unique", "error"),
    "undispatchable_tool": (
        lambda f: edit_json(f, "toolspecs.json", lambda d: d.append(
            {"toolSpec": {"name": "getEmploymentStatus", "description": "Employment status. Params: application_id.",
                          "inputSchema": {"json": {"type": "object", "properties": {
                              "application_id": {"type": "string", "description": "id"}},
                              "required": ["application_id"]}}}})),
        "tools.dispatch", "error"),
    "constructor_needs_args": (
        lambda f: edit(f, "tools.py", "def __init__(self):", "def __init__(self, data_dir):"),
        "tools.constructor_zero_args", "error"),
    "method_lacks_schema_param": (
        lambda f: edit_json(f, "toolspecs.json", lambda d: (
            _first_spec(d)["properties"].update(applicant_name={"type": "string", "description": "name"}),
            _first_spec(d)["required"].append("applicant_name"))),
        "tools.method_params", "error"),
    "helper_manager_sorts_first": (
        lambda f: edit(f, "tools.py", "class LoanTriageManager:", "class CacheManager:\n    pass\n\n\n"
                       "class LoanTriageManager:"),
        "tools.manager_class", "error"),
    "unencodable_result": (
        lambda f: edit(f, "tools.py", CREDIT,
                       'return {"credit_score": int(self._row(application_id)["credit_score"]), "tags": {"a"}}'),
        "runtime.json_encodable", "error"),
    "tool_raises": (
        lambda f: edit(f, "tools.py", CREDIT, 'raise KeyError("credit bureau offline")'),
        "runtime.calls_succeed", "error"),
    "rows_violate_pattern": (
        lambda f: edit_json(f, "toolspecs.json", lambda d: _first_spec(d)["properties"]["application_id"]
                            .update(pattern="^APP-[0-9]{4}$")),
        "toolspecs.rows_validate", "error"),
    "tool_returns_answer": (
        lambda f: edit(f, "tools.py", CREDIT, 'row = self._row(application_id)\n'
                       '        return {"credit_score": int(row["credit_score"]), "final_decision": row["final_decision"]}'),
        "leakage.tool_returns_output", "warning"),
}
