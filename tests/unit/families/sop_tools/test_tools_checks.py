"""Tools checks on the pharmacy fixture: the good bundle passes everything, each defect is caught and named."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.dataset import Dataset, DatasetBatch, find_id_field
from sopforge.families.sop_tools.models.tools import APIDocs, ToolCode, ToolSpecs, parse_cell
from sopforge.sandbox import SandboxLimits
from sopforge.families.sop_tools.verify.tool_checks import (
    check_api_docs, check_code_static, check_rows_against_specs, check_toolspecs,
)
from sopforge.families.sop_tools.verify.tool_common import CSV_FILE, typed_row
from sopforge.families.sop_tools.verify.tool_runtime import argument_sources, check_runtime, write_bundle

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
CLASS = "PharmacyPrescriptionRefillsManager"
SMALL = SandboxLimits(wall_seconds=20, cpu_seconds=1, memory_bytes=512 * 1024 ** 2)


@pytest.fixture(scope="module")
def world():
    from sopforge.families.sop_tools.models.data_schema import DataSchema

    schema = DataSchema.parse(read_answer("schema"))
    graph = APIGraph.parse(read_answer("api_graph"))
    rows = [r for n in (1, 2) for r in DatasetBatch.parse(read_answer(f"dataset_batch{n}"), schema).rows]
    dataset = Dataset(fields=[f.name for f in schema.existing], id_field=find_id_field(schema), rows=rows,
                      rows_requested=len(rows))
    return schema, graph, dataset


@pytest.fixture(scope="module")
def specs() -> ToolSpecs:
    return ToolSpecs.parse(read_answer("toolspecs"))


def read_answer(stage: str) -> str:
    return (ANSWERS / f"{stage}.txt").read_text(encoding="utf-8")


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"fixture edit target not found exactly once: {old!r}"
    return text.replace(old, new)


def code_with(*edits: tuple[str, str]) -> ToolCode:
    text = read_answer("tool_code")
    for old, new in edits:
        text = replace_once(text, old, new)
    return ToolCode.parse(text, CLASS)


def failed(checks) -> dict[str, str]:
    return {c.name: c.message for c in checks if not c.passed}


def runtime(world, specs, code, limits=None):
    schema, graph, dataset = world
    return check_runtime(code, specs, graph, schema, dataset, **({"limits": limits} if limits else {}))


def specs_from(edit_old: str, edit_new: str) -> ToolSpecs:
    return ToolSpecs.parse(replace_once(read_answer("toolspecs"), edit_old, edit_new))


# --- the good fixture --------------------------------------------------------------------------

def test_the_fixture_passes_every_check_warnings_included(world, specs):
    schema, graph, dataset = world
    docs = APIDocs.parse(read_answer("api_docs"))
    code = code_with()
    checks = (check_api_docs(docs, graph, schema) + check_toolspecs(specs, graph, schema)
              + check_rows_against_specs(dataset, specs, schema) + check_code_static(code, specs)
              + runtime(world, specs, code))
    assert failed(checks) == {}
    names = {c.name for c in checks}
    assert {"tools.docs.names", "tools.specs.json_schema", "tools.specs.match_graph", "tools.specs.rows_valid",
            "tools.policy", "tools.code.manager", "tools.code.methods", "tools.runtime.sandbox",
            "tools.runtime.calls_succeed", "tools.runtime.no_decision_fields", "tools.runtime.not_constant",
            "tools.runtime.unknown_id_raises", "tools.runtime.deterministic", "tools.runtime.matches_data"} <= names
    sandbox = next(c for c in checks if c.name == "tools.runtime.sandbox")
    assert sandbox.details["rows"] == 24 and sandbox.details["calls_per_row"] == 10 and sandbox.details["probes"] == 9
    probes = next(c for c in checks if c.name == "tools.runtime.unknown_id_raises")
    assert probes.message == "9 tools raise for an unknown identifier" and probes.details["inconclusive"] == []
    assert {"tools.state.method", "tools.state.tables", "tools.state.read_only", "tools.state.write_record",
            "tools.state.write_result", "tools.state.isolated", "tools.code.state_in_instance"} <= names


def test_arguments_come_from_the_row_or_the_nearest_upstream_result(world):
    _, graph, dataset = world
    sources = argument_sources(graph, dataset.fields)
    assert sources["getPrescriptionRecord"] == {"prescription_id": "row", "patient_id": "row"}
    assert sources["calculatePrescriptionAge"] == {"prescription_id": "row",
                                                   "prescription_written_date": "getPrescriptionRecord",
                                                   "request_date": "row"}
    blocking = sources["determineBlockingReason"]
    assert blocking["prescription_age_days"] == "calculatePrescriptionAge"
    assert blocking["interaction_alert_count"] == "getInteractionAlerts"  # existing field, but an upstream output
    assert blocking["medication_class"] == "getPrescriptionRecord"


def test_bundle_csv_reads_back_to_the_typed_rows(world, tmp_path: Path):
    schema, _, dataset = world
    folder = write_bundle(tmp_path / "bundle", dataset, code_with())
    with (folder / CSV_FILE).open(newline="", encoding="utf-8") as handle:
        read = list(csv.DictReader(handle))
    assert list(read[0]) == dataset.fields and len(read) == 24
    types = {f.name: f.type for f in schema.fields}
    assert read[0]["prescriber_license_active"] == "True"
    assert {k: parse_cell(v, types[k]) for k, v in read[0].items()} == typed_row(dataset.rows[0], schema) \
        == dataset.rows[0]


# --- docs -------------------------------------------------------------------------------------

def test_docs_missing_an_api_and_returning_the_decision_are_named(world):
    schema, graph, _ = world
    text = read_answer("api_docs")
    start = text.index("<API>\nName: verifyPrescriberLicense")
    text = text[:start] + text[text.index("</API>", start) + len("</API>\n"):]
    text = replace_once(text, '{"blocking_reason": "string, one of', '{"refill_decision": "approve", "blocking_reason": "string, one of')
    bad = failed(check_api_docs(APIDocs.parse(text), graph, schema))
    assert set(bad) == {"tools.docs.names", "tools.docs.response"}
    assert "missing verifyPrescriberLicense" in bad["tools.docs.names"]
    assert "determineBlockingReason: not in the graph refill_decision (refill_decision is a [decision] field" \
        in bad["tools.docs.response"]


# --- toolspecs --------------------------------------------------------------------------------

def test_an_invalid_json_schema_is_named_with_its_tool(world):
    schema, graph, _ = world
    bad_specs = specs_from('"required": [\n            "prescription_id"\n          ]',
                           '"required": "prescription_id"')
    bad = failed(check_toolspecs(bad_specs, graph, schema))
    assert list(bad) == ["tools.specs.json_schema"]
    assert bad["tools.specs.json_schema"].startswith("inputSchema.json must be a valid JSON Schema")
    assert "toolSpec 4 (verifyPrescriberLicense): invalid JSON Schema at required: 'prescription_id' is not of type " \
           "'array'" in bad["tools.specs.json_schema"]


def test_a_required_name_without_property_and_a_missing_input_schema_are_named(world):
    schema, graph, _ = world
    text = replace_once(read_answer("toolspecs"), '"required": [\n            "patient_id"\n          ]',
                        '"required": ["patient_id", "member_id"]')
    text = replace_once(text, '"inputSchema": {\n        "json": {\n          "type": "object",\n          "properties": '
                              '{\n            "prescription_id": {\n              "type": "string",\n              '
                              '"description": "Prescription identifier as on the request, e.g. RX-004512."\n            '
                              '}\n          },',
                        '"inputSchema": {\n        "schema": {\n          "type": "object",\n          "properties": '
                        '{\n            "prescription_id": {\n              "type": "string",\n              '
                        '"description": "Prescription identifier as on the request, e.g. RX-004512."\n            '
                        '}\n          },')
    bad = failed(check_toolspecs(ToolSpecs.parse(text), graph, schema))
    assert "toolSpec 4 (verifyPrescriberLicense): missing inputSchema.json" in bad["tools.specs.shape"]
    assert "\"required\" names member_id, which \"properties\" does not define" in bad["tools.specs.json_schema"]


def test_a_spec_name_not_in_the_graph_is_named_both_ways(world):
    schema, graph, _ = world
    bad_specs = specs_from('"name": "verifyPrescriberLicense"', '"name": "checkPrescriberLicense"')
    bad = failed(check_toolspecs(bad_specs, graph, schema))
    assert list(bad) == ["tools.specs.match_graph"]
    assert bad["tools.specs.match_graph"].endswith("missing verifyPrescriberLicense; not in the graph checkPrescriberLicense")


def test_parameters_and_types_must_match_the_graph_and_schema(world):
    schema, graph, _ = world
    text = replace_once(read_answer("toolspecs"), '"early_refill_ratio": {\n              "type": "number"',
                        '"early_refill_ratio": {\n              "type": "integer"')
    text = replace_once(text, '"patient_id": {\n              "type": "string",\n              "description": "Patient '
                              'identifier as on the request, e.g. P-41584."\n            }\n          },\n          '
                              '"required": [\n            "patient_id"\n          ]',
                        '"member_id": {\n              "type": "string",\n              "description": "Member."\n     '
                        '       }\n          },\n          "required": [\n            "member_id"\n          ]')
    bad = failed(check_toolspecs(ToolSpecs.parse(text), graph, schema))
    assert bad["tools.specs.types"].endswith("determineBlockingReason.early_refill_ratio: integer, schema type float "
                                             "needs \"number\"")
    assert "checkInsuranceEligibility: missing patient_id; not in the graph member_id" in bad["tools.specs.parameters"]


def test_a_row_whose_inputs_violate_a_spec_is_named(world):
    schema, graph, dataset = world
    bad_specs = specs_from('"minimum": 0,\n              "maximum": 365,', '"minimum": 0,\n              "maximum": 90,')
    assert failed(check_toolspecs(bad_specs, graph, schema)) == {}
    [result] = check_rows_against_specs(dataset, bad_specs, schema)
    assert not result.passed and result.name == "tools.specs.rows_valid"
    assert result.message == ("arguments built from 1 dataset rows break their toolSpec (relax the spec or fix its "
                              "type, enum or range): calculateEarlyRefillRatio.days_since_last_fill: 365 is greater "
                              "than the maximum of 90 (prescription_id='RX-004898')")
    assert "determineBlockingReason" not in result.details["tools_checked"]  # takes computed inputs


def test_rows_are_validated_as_read_back_from_the_csv(world):
    schema, _, dataset = world
    as_text = specs_from('"refills_remaining": {\n              "type": "integer"',
                         '"refills_remaining": {\n              "type": "string"')
    # determineBlockingReason takes computed inputs, so the row check skips it: the type check must catch it.
    assert check_rows_against_specs(dataset, as_text, schema)[0].passed
    dated = specs_from('"request_date": {\n              "type": "string",\n              "format": "date"',
                       '"request_date": {\n              "type": "string",\n              "pattern": "^\\\\d{2}/"')
    [result] = check_rows_against_specs(dataset, dated, schema)
    assert "from 24 dataset rows break" in result.message and "'2025-04-18' does not match" in result.message
    assert "(prescription_id='RX-004512' and 23 more rows)" in result.message


# --- code, static ---------------------------------------------------------------------------

@pytest.mark.parametrize(("edit", "check", "phrase"), [
    (("import csv\n", "import csv\nimport socket\n"), "tools.policy.network", "import of 'socket'"),
    (("import csv\n", "import csv\nimport subprocess\n"), "tools.policy.processes", "import of 'subprocess'"),
    (('        record["early_refill_ratio"] = ratio\n',
      '        record["early_refill_ratio"] = ratio\n        with open("/tmp/ratios.log", "a") as log:\n'
      '            log.write(prescription_id)\n'), "tools.policy.filesystem", "open(..., 'a')"),
    (("        age = (requested - written).days\n",
      "        age = (datetime.date.today() - written).days\n"), "tools.policy.clock", "datetime.date.today"),
])
def test_policy_violations_are_caught_before_anything_runs(specs, edit, check, phrase):
    bad = failed(check_code_static(code_with(edit), specs))
    assert list(bad) == [check] and phrase in bad[check]


def test_the_manager_contract_is_inspected(specs):
    bad = failed(check_code_static(code_with(("def _to_int(value, name):",
                                              "class ReportManager:\n    pass\n\n\ndef _to_int(value, name):")), specs))
    assert bad == {"tools.code.manager": "tools.py must define exactly one public name ending in 'Manager', a class "
                                         "(found: ReportManager, PharmacyPrescriptionRefillsManager); prefix helpers "
                                         "with _"}
    bad = failed(check_code_static(code_with(("class PharmacyPrescriptionRefillsManager:", "class RefillsManager:")),
                                   specs))
    assert bad == {"tools.code.manager": "the Manager class must be named PharmacyPrescriptionRefillsManager, "
                                         "not RefillsManager"}
    code = code_with(("    def verifyPrescriberLicense(self, prescription_id):",
                      "    def verifyPrescriberLicense(self, prescription_id, patient_id):"),
                     ("    def checkInsuranceEligibility(self, patient_id):",
                      "    def checkInsuranceEligibility(self, **tool_input):\n        patient_id = tool_input['patient_id']"),
                     ("    def getInteractionAlerts(self, prescription_id, patient_id):",
                      "    def getInteractionAlerts(self, prescription_id, patient_id, alert_source='dur'):"),
                     ("    def process_tool_call(self, tool_name, tool_input):", "    def process_tool_call(self, call):"))
    bad = failed(check_code_static(code, specs))
    assert set(bad) == {"tools.code.manager", "tools.code.methods"}
    assert "needs process_tool_call(self, tool_name, tool_input)" in bad["tools.code.manager"]
    methods = bad["tools.code.methods"]
    assert "verifyPrescriberLicense(prescription_id, patient_id): not in the toolSpec patient_id" in methods
    assert "checkInsuranceEligibility takes *args/**kwargs; name each parameter" in methods
    assert "getInteractionAlerts(prescription_id, patient_id, alert_source): not in the toolSpec alert_source" in methods


# --- code, runtime ----------------------------------------------------------------------------

LOOP = ("        ratio = round(elapsed / supply, 2)\n",
        "        periods, remaining = 0, elapsed\n        while remaining >= supply:\n            periods += 1\n"
        "        ratio = round(elapsed / supply, 2)\n")


def test_an_endless_loop_is_stopped_by_the_cpu_limit_and_named(world, specs):
    [result] = runtime(world, specs, code_with(LOOP), limits=SMALL)
    assert (result.name, result.passed, result.details["error_kind"]) == ("tools.runtime.sandbox", False, "cpu_limit")
    assert result.message.startswith("the first sandbox run stopped with cpu_limit (CPU limit of 1 s exceeded")
    assert "while running prescription_id='RX-004554'" in result.message  # 10 days of a 10-day supply
    assert result.message.endswith("no unbounded loops or repeated scans of the table")


def test_an_endless_loop_hits_the_wall_clock_when_cpu_is_generous(world, specs):
    [result] = runtime(world, specs, code_with(LOOP), limits=SandboxLimits(wall_seconds=1.5, cpu_seconds=30))
    assert result.details["error_kind"] == "timeout"
    assert "stopped with timeout (wall-clock limit of 1.5 s exceeded" in result.message


def test_a_stub_returning_a_constant_is_caught(world, specs):
    code = code_with(("        record = self._record(prescription_id)\n        elapsed = _to_int(",
                      "        return {\"early_refill_ratio\": 0.9}\n        record = self._record(prescription_id)\n"
                      "        elapsed = _to_int("))
    bad = failed(runtime(world, specs, code))
    assert set(bad) == {"tools.runtime.not_constant", "tools.runtime.unknown_id_raises"}
    assert "calculateEarlyRefillRatio returned {\"early_refill_ratio\": 0.9} for all" in bad["tools.runtime.not_constant"]
    assert bad["tools.runtime.unknown_id_raises"].endswith(
        "calculateEarlyRefillRatio(prescription_id='ZZ-NOT-ON-FILE-000000') returned {\"early_refill_ratio\": 0.9}")


def test_a_tool_that_ignores_its_record_is_caught(world, specs):
    # Looks the record up (so an unknown id still raises) but answers from the first record for everyone.
    code = code_with(("        return {\"insurance_status\": record[\"insurance_status\"]}",
                      "        first = next(iter(self._records.values()))\n"
                      "        return {\"insurance_status\": first[\"insurance_status\"]}"))
    bad = failed(runtime(world, specs, code))
    assert set(bad) == {"tools.runtime.not_constant", "tools.runtime.matches_data"}
    assert "checkInsuranceEligibility returned {\"insurance_status\": \"active\"} for all 24" in bad["tools.runtime.not_constant"]
    assert bad["tools.runtime.matches_data"].endswith(
        "checkInsuranceEligibility: insurance_status=\"active\" but the record holds \"self_pay\" "
        "(prescription_id='RX-004519' and 8 more rows)")


def test_a_tool_that_invents_values_from_the_identifier_is_caught(world, specs):
    code = code_with(("        record = self._record(prescription_id)\n        return {\"prescriber_license_active\": "
                      "record[\"prescriber_license_active\"]}",
                      "        return {\"prescriber_license_active\": not str(prescription_id).endswith(\"3\")}"))
    bad = failed(runtime(world, specs, code))
    assert set(bad) == {"tools.runtime.matches_data", "tools.runtime.unknown_id_raises"}
    assert bad["tools.runtime.matches_data"].endswith(
        "verifyPrescriberLicense: prescriber_license_active=false but the record holds true "
        "(prescription_id='RX-004573' and 3 more rows)")


def test_returning_a_decision_field_is_caught(world, specs):
    code = code_with(("        record[\"blocking_reason\"] = reason\n        return {\"blocking_reason\": reason}",
                      "        record[\"blocking_reason\"] = reason\n"
                      "        decision = \"approve\" if reason == \"no_block\" else \"deny\"\n"
                      "        return {\"blocking_reason\": reason, \"refill_decision\": decision}"))
    bad = failed(runtime(world, specs, code))
    assert list(bad) == ["tools.runtime.no_decision_fields"]
    assert bad["tools.runtime.no_decision_fields"].startswith(
        "tools must never return a [decision] field; the agent decides by applying the SOP: "
        "determineBlockingReason returned refill_decision (prescription_id='RX-004512' and 23 more rows)")


def test_a_cache_keyed_on_too_little_makes_results_order_dependent(world, specs):
    # Slips past the AST policy and every single-run check: only the reversed second run exposes it.
    code = code_with(("        self._records = {}\n", "        self._records = {}\n        self._adjudicated = {}\n"),
                     ("        record = self._record(prescription_id)\n        medication = _choice(",
                      "        record = self._record(prescription_id)\n"
                      "        cache_key = (medication_class, insurance_status)\n"
                      "        if cache_key in self._adjudicated:\n"
                      "            return {\"blocking_reason\": self._adjudicated[cache_key]}\n"
                      "        medication = _choice("),
                     ("        record[\"blocking_reason\"] = reason\n",
                      "        record[\"blocking_reason\"] = reason\n        self._adjudicated[cache_key] = reason\n"))
    bad = failed(runtime(world, specs, code))
    assert list(bad) == ["tools.runtime.deterministic"]
    message = bad["tools.runtime.deterministic"]
    assert message.startswith("results differ between two runs (the second ran the rows in reverse order): "
                              "determineBlockingReason returned {\"blocking_reason\": ")
    assert message.endswith("never on the clock, randomness, counters or earlier calls")


def test_a_call_that_raises_on_a_valid_row_is_reported_with_its_line(world, specs):
    code = code_with(("        return {\"interaction_alert_count\": record[\"interaction_alert_count\"]}",
                      "        return {\"interaction_alert_count\": 1 if record[\"blocking_reason\"] else 0}"))
    bad = failed(runtime(world, specs, code))
    assert "tools.runtime.calls_succeed" in bad
    message = bad["tools.runtime.calls_succeed"]
    assert message.startswith("calls raised on 24 of 24 rows, every one a valid case on record (raise only for invalid "
                              "arguments; where a step does not apply to a case, return None for the outputs that do "
                              "not exist): getInteractionAlerts({\"patient_id\": \"P-41584\", ")
    assert "raised KeyError: 'blocking_reason' (prescription_id='RX-004512' and 23 more rows)" in message


def test_an_intermediate_value_that_does_not_exist_for_a_case_may_be_none(world, specs):
    """The tool-code prompt asks for None where a step does not apply to a valid case, instead of an error
    (issue 19); the old check refused None as 'a NoneType, schema type float'."""
    # The ratio only matters while supply is left; past the supply the step does not apply.
    code = code_with(("        return {\"early_refill_ratio\": ratio}",
                      "        return {\"early_refill_ratio\": None if elapsed >= supply else ratio}"),
                     ("        ratio = _to_float(early_refill_ratio, \"early_refill_ratio\")",
                      "        ratio = 1.0 if early_refill_ratio is None else _to_float(early_refill_ratio, "
                      "\"early_refill_ratio\")"))
    checks = runtime(world, specs, code)
    assert failed(checks) == {}
    nones = [r for r in world[2].rows if r["days_since_last_fill"] >= r["last_fill_days_supply"]]
    assert 0 < len(nones) < len(world[2].rows)  # some cases do get None, so the check really saw it
    template = (Path(__file__).resolve().parents[4] / "prompts" / "sop_bench" / "tool_code.j2").read_text()
    assert "an output that does not exist for that case is None" in template


def test_csv_strings_returned_unconverted_are_named(world, specs):
    code = code_with(("                for field in _INTEGER_FIELDS:\n                    record[field] = "
                      "_to_int(record[field], field)\n", ""))
    checks = runtime(world, specs, code)
    bad = failed(checks)
    assert set(bad) == {"tools.runtime.result_types", "tools.runtime.arguments_valid"}
    assert next(c for c in checks if c.name == "tools.runtime.arguments_valid").severity == "warning"
    assert "getPrescriptionRecord: refills_remaining=\"2\" is a str, schema type integer" in bad["tools.runtime.result_types"]


def test_a_value_json_cannot_encode_is_named(world, specs):
    code = code_with(("            \"prescription_written_date\": record[\"prescription_written_date\"],",
                      "            \"prescription_written_date\": datetime.date.fromisoformat("
                      "record[\"prescription_written_date\"]),"))
    bad = failed(runtime(world, specs, code))
    assert "getPrescriptionRecord: returned a value json.dumps cannot encode (prescription_written_date holds a date)" \
        in bad["tools.runtime.results_shape"]


def test_many_rows_pass_in_two_processes(world, specs):
    schema, graph, dataset = world
    rows = [{**r, "prescription_id": f"RX-9{i:05d}", "patient_id": f"P-9{i:05d}"}
            for i, r in enumerate(dataset.rows * 9)]
    big = dataset.model_copy(update={"rows": rows, "rows_requested": len(rows)})
    checks = check_runtime(code_with(), specs, graph, schema, big)
    assert failed(checks) == {}
    assert checks[0].details["rows"] == 216


def test_a_remote_ref_is_refused_before_any_validator_could_fetch_it(world):
    schema, graph, _ = world
    bad_specs = specs_from('"patient_id": {\n              "type": "string",\n              "description": "Patient '
                           'identifier as on the request, e.g. P-41584."\n            }\n          },\n          '
                           '"required": [\n            "patient_id"\n          ]',
                           '"patient_id": {"$ref": "https://example.com/patient.json"}\n          },\n          '
                           '"required": [\n            "patient_id"\n          ]')
    bad = failed(check_toolspecs(bad_specs, graph, schema))
    assert "toolSpec 5 (checkInsuranceEligibility): only local \"$ref\" (\"#/...\") is allowed, not " \
           "'https://example.com/patient.json'" in bad["tools.specs.json_schema"]


def test_a_constructor_that_needs_arguments_is_refused(specs):
    bad = failed(check_code_static(code_with(("    def __init__(self):", "    def __init__(self, data_file):")), specs))
    assert "__init__ must take no arguments besides self" in bad["tools.code.manager"]


def test_an_oversized_result_is_reported_not_skipped(world, specs):
    code = code_with(("        return {\"prescriber_license_active\": record[\"prescriber_license_active\"]}",
                      "        return {\"prescriber_license_active\": record[\"prescriber_license_active\"], "
                      "\"audit_trail\": \"x\" * 2_000_000}"))
    bad = failed(runtime(world, specs, code))
    assert set(bad) == {"tools.runtime.results_shape"}
    assert re.search(r"one row's results are too large \(200\d{4} bytes\); return only the API's output fields "
                     r"\(prescription_id='RX-004512' and 23 more rows\)$", bad["tools.runtime.results_shape"])


def test_an_order_taken_from_a_set_is_warned_about_statically(specs):
    # Stable inside the sandbox (PYTHONHASHSEED=0), so only the static warning can see it.
    code = code_with(("        if medication == \"schedule_ii\":\n            reason = \"schedule_ii_prohibited\"\n",
                      "        for candidate in {r for r in (\"too_early\", \"coverage_lapsed\") if r == coverage}:\n"
                      "            pass\n"
                      "        if medication == \"schedule_ii\":\n            reason = \"schedule_ii_prohibited\"\n"))
    checks = check_code_static(code, specs)
    [warning] = [c for c in checks if not c.passed]
    assert (warning.name, warning.severity) == ("tools.code.set_order", "warning")
    assert warning.message.startswith("line 151: iterating a set gives an order that changes between runs")
    assert next(c for c in check_code_static(code_with(), specs) if c.name == "tools.code.set_order").passed
