"""Parsing the three tools answers (API docs, toolspecs, tool code) and the bundle cell helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.tools import APIDocs, ToolCode, ToolSpecs, csv_cell, manager_class_name, parse_cell

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"


def answer(stage: str) -> str:
    return (ANSWERS / f"{stage}.txt").read_text(encoding="utf-8")


def test_api_docs_fixture_parses_every_section():
    docs = APIDocs.parse(answer("api_docs"))
    assert docs.names[0] == "getPrescriptionRecord" and len(docs.apis) == 9
    record = docs.apis[0]
    assert list(record.request_body) == ["prescription_id", "patient_id"]
    assert record.response["refills_remaining"] == "integer, 0 to 11"
    assert record.dependencies == [] and len(record.error_scenarios) == 2
    assert docs.apis[6].dependencies[-1] == "checkInsuranceEligibility"
    assert docs.apis[-1].response == {"record_id": "string, refill_decisions/<prescription_id>"}
    assert APIDocs.parse(docs.to_prompt_text()) == docs  # the prompt rendering reads back identically


def test_api_docs_tolerate_bold_headings_endpoints_and_bulleted_dependencies():
    text = ("<TOOLS><API>\n**Name:** getLoanRecord\nDescription: Reads a loan.\nEndpoint: /loans/{id}\nMethod: GET\n"
            "Request Body:\n```json\n{\"loan_id\": \"string\"}\n```\nResponse:\n{\"due_date\": \"date\"}\n"
            "Dependencies:\n- checkMember (supplies member_id)\n- none\nError Scenarios:\n- Unknown loan_id: raise,\n"
            "  naming it\n</API></TOOLS>")
    [api] = APIDocs.parse(text).apis
    assert (api.name, api.description, api.dependencies) == ("getLoanRecord", "Reads a loan.", ["checkMember"])
    assert api.error_scenarios == ["Unknown loan_id: raise, naming it"]


@pytest.mark.parametrize(("text", "phrase"), [
    ("no tags at all", "missing <TOOLS>…</TOOLS> block"),
    ("<TOOLS>just prose</TOOLS>", "<TOOLS> holds no <API>…</API> block"),
    ("<TOOLS><API>\nName: getX\nDescription: d\nRequest Body:\n{}\nResponse:\n{}\nDependencies: []\n</API></TOOLS>",
     "<API> block 1 (getX): missing section(s) Error Scenarios"),
    ("<TOOLS><API>\nName: getX\nDescription: d\nRequest Body:\n{\"id\": \"string\" // the id}\nResponse:\n{}\n"
     "Dependencies: []\nError Scenarios:\n- e: h\n</API></TOOLS>", "<API> block 1 (getX): Request Body is not valid JSON"),
    ("<TOOLS><API>\nName: getX\nDescription: d\nRequest Body:\n[\"id\"]\nResponse:\n{}\nDependencies: []\n"
     "Error Scenarios:\n- e: h\n</API></TOOLS>", "Request Body must be a JSON object"),
    ("<TOOLS><API>\nName: get X now\nDescription: d\nRequest Body:\n{}\nResponse:\n{}\nDependencies: []\n"
     "Error Scenarios:\n- e: h\n</API></TOOLS>", "Name must be the API name alone"),
    ("<TOOLS><API>\nName: getX\nDescription: d\nRequest Body:\n{}\nResponse:\n{}\nDependencies: [1st step]\n"
     "Error Scenarios:\n- e: h\n</API></TOOLS>", "Dependencies must list API names"),
    ("<TOOLS><API>\nName: getX\nDescription: d\nRequest Body:\n{}\nResponse:\n{}\nDependencies: []\n"
     "Error Scenarios:\n\n</API></TOOLS>", "Error Scenarios lists nothing"),
])
def test_api_docs_errors_name_the_block_and_the_fix(text, phrase):
    with pytest.raises(ParseError) as exc:
        APIDocs.parse(text)
    assert phrase in str(exc.value)


def test_toolspecs_fixture_parses_and_writes_the_bundle_file():
    specs = ToolSpecs.parse(answer("toolspecs"))
    assert len(specs.names) == 9 and specs.properties("calculatePrescriptionAge") == [
        "prescription_id", "prescription_written_date", "request_date"]
    written = json.loads(specs.to_json())
    assert written[0]["toolSpec"]["name"] == "getPrescriptionRecord" and set(written[0]) == {"toolSpec"}
    assert ToolSpecs.parse(f"<SCHEMA>{specs.to_prompt_text()}</SCHEMA>") == specs


def test_toolspecs_accept_the_flat_form_and_a_code_fence():
    flat = '<SCHEMA>\n```json\n[{"name": "getX", "description": "d", "inputSchema": {"json": {"type": "object"}}}]\n```\n</SCHEMA>'
    assert ToolSpecs.parse(flat).names == ["getX"]


@pytest.mark.parametrize(("body", "phrase"), [
    ('{"toolSpec": {"name": "a"}, "toolSpec": {"name": "b"}}', "key 'toolSpec' appears twice in one JSON object"),
    ('{"toolSpec": {"name": "a"}}', "must hold a JSON array"),
    ('[{"toolSpec": {"name": "a"},}]', "<SCHEMA>: invalid JSON: "),
    ("[]", "non-empty JSON array"),
    ('[{"toolSpec": "getX"}]', "<SCHEMA> element 0 is not an object"),
])
def test_toolspecs_errors(body, phrase):
    with pytest.raises(ParseError) as exc:
        ToolSpecs.parse(f"<SCHEMA>{body}</SCHEMA>")
    assert phrase in str(exc.value)


def test_tool_code_takes_the_last_block_without_its_fence():
    code = ToolCode.parse("Plan: write <code>...</code> later.\n<code>\n```python\nclass AManager:\n    pass\n```\n</code>",
                          "AManager")
    assert code.source == "class AManager:\n    pass\n" and code.class_name == "AManager"
    with pytest.raises(ParseError, match="<code> is empty"):
        ToolCode.parse("<code>\n\n</code>", "AManager")


@pytest.mark.parametrize(("slug", "name"), [
    ("pharmacy-prescription-refills", "PharmacyPrescriptionRefillsManager"),
    ("small_business loan pre-screening", "SmallBusinessLoanPreScreeningManager"),
    ("3d-printing", "Domain3dPrintingManager"),
    ("", "DomainManager"),
])
def test_manager_class_name(slug, name):
    assert manager_class_name(slug) == name


@pytest.mark.parametrize(("value", "kind", "cell"), [
    (True, "boolean", "True"), (False, "boolean", "False"), (7, "integer", "7"), (0.85, "float", "0.85"),
    (5.0, "float", "5.0"), ("2025-04-18", "date", "2025-04-18"), (["a", "b"], "list[string]", '["a", "b"]'),
    ("RX-004512", "string", "RX-004512"),
])
def test_cells_round_trip_by_schema_type(value, kind, cell):
    assert csv_cell(value) == cell
    assert parse_cell(cell, kind) == value and type(parse_cell(cell, kind)) is type(value)


def test_a_cell_that_does_not_convert_stays_text():
    assert parse_cell("4 days", "integer") == "4 days"
    assert parse_cell("yes", "boolean") == "yes"
    assert parse_cell('{"a": 1}', "list[integer]") == '{"a": 1}'
