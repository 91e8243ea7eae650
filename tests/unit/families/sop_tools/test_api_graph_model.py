"""APIGraph: strict YAML parsing, the graph helpers and the schema/SOP-grounded graph gate."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.api_graph import APIDependency, APIGraph, APISpec, OutputParameter
from sopforge.families.sop_tools.verify.api_graph_checks import check_graph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOPDocument

GRAPH_ANSWER = Path(__file__).resolve().parents[3] / "fixtures" / "answers" / "api_graph.txt"
CHECK_NAMES = [
    "api_graph.names_unique", "api_graph.names_valid", "api_graph.dependencies_exist", "api_graph.acyclic",
    "api_graph.parameters_in_schema", "api_graph.user_inputs_existing", "api_graph.inputs_provenance",
    "api_graph.to_be_obtained_produced", "api_graph.no_decision_outputs", "api_graph.orphan_outputs",
    "api_graph.parameter_types", "api_graph.effects", "api_graph.outputs_by_effect", "api_graph.writes_present",
    "api_graph.write_keys", "api_graph.write_conditions", "api_graph.decision_inputs",
    "api_graph.branch_dependent_writes", "api_graph.sop_steps_valid", "api_graph.sop_order",
]
READS = ["getPrescriptionRecord", "calculatePrescriptionAge", "calculateEarlyRefillRatio", "getInteractionAlerts",
         "verifyPrescriberLicense", "checkInsuranceEligibility", "determineBlockingReason"]
WRITES = ["sendPrescriberReferral", "recordRefillDecision"]
ORDER = READS + WRITES
BLOCKER_OUTPUT = '      - name: "blocking_reason"\n        data_type: "enum"\n        destination: "storage"\n'


def failing(checks) -> list[str]:
    return [c.name for c in checks if not c.passed]


def blocking(checks) -> list[str]:
    return [c.name for c in checks if c.blocking]


def by_name(checks, name):
    return next(c for c in checks if c.name == name)


def small_graph(edges: list[tuple[str, str]], nodes: list[str] | None = None) -> APIGraph:
    """A graph with the given (prerequisite, consumer) edges; parameters are irrelevant here."""
    names = nodes or list(dict.fromkeys(n for e in edges for n in e))
    return APIGraph(apis=[
        APISpec(api_name=n, description="d", purpose="p", sop_steps=["5.1"],
                output_parameters=[OutputParameter(name="x", data_type="string", destination="storage")],
                direct_dependencies=[APIDependency(dependent_api=u, dependency_type="data_dependency",
                                                   dependency_reason="r") for u, v in edges if v == n],
                complexity_level="low", business_criticality="low")
        for n in names])


@pytest.fixture
def graph_answer() -> str:
    return GRAPH_ANSWER.read_text(encoding="utf-8")


@pytest.fixture
def run_checks(good_schema: DataSchema, good_sop: SOPDocument):
    """``run_checks(answer_text)`` parses an answer and checks it against the fixture schema and SOP."""
    return lambda text: check_graph(APIGraph.parse(text), good_schema, good_sop)


# --- the recorded good answer -----------------------------------------------------------------

def test_good_answer_parses(graph_answer: str):
    graph = APIGraph.parse(graph_answer)
    assert graph.names == ORDER
    record = graph.api("getPrescriptionRecord")
    assert record.sop_steps == ["5.1.1"] and record.direct_dependencies == []
    assert record.input_names == ["prescription_id", "patient_id"]
    assert [p.source for p in record.input_parameters] == ["user_input", "user_input"]
    assert record.output_names[:2] == ["medication_class", "prescription_written_date"]
    blocker = graph.api("determineBlockingReason")
    assert blocker.sop_steps == ["5.2.2", "5.3.1", "5.4.2", "5.6.1"]
    assert blocker.output_names == ["blocking_reason"]
    assert [d.dependent_api for d in blocker.direct_dependencies] == READS[:-1]
    referral, decision = graph.api("sendPrescriberReferral"), graph.api("recordRefillDecision")
    assert [a.effect for a in graph.apis] == ["read"] * 7 + ["write"] * 2 and graph.tables() == [
        "prescriber_referrals", "refill_decisions"]
    assert referral.when == {"refill_decision": ["refer_to_prescriber"]} and decision.when == {}
    assert referral.allowed_on({"refill_decision": "refer_to_prescriber"}) and not referral.allowed_on({})
    assert decision.output_parameters == [] and decision.input_parameters[1].source == "decision"
    assert {d.dependency_type for d in blocker.direct_dependencies} == {"data_dependency"}
    assert "Ledger" not in str(graph.model_dump())  # the analysis is not parsed
    with pytest.raises(KeyError, match="noSuchApi"):
        graph.api("noSuchApi")


def test_good_answer_passes_every_check_warnings_included(graph_answer: str, run_checks):
    checks = run_checks(graph_answer)
    assert [c.name for c in checks] == CHECK_NAMES
    assert failing(checks) == []
    assert {c.name for c in checks if c.severity == "warning"} == {
        "api_graph.orphan_outputs", "api_graph.parameter_types", "api_graph.sop_order",
        "api_graph.branch_dependent_writes"}


def test_good_answer_edges_order_and_metrics(graph_answer: str):
    graph = APIGraph.parse(graph_answer)
    edges = graph.edges()
    assert len(edges) == 14
    assert ("getPrescriptionRecord", "calculatePrescriptionAge") in edges  # prerequisite -> consumer
    assert ("calculatePrescriptionAge", "getPrescriptionRecord") not in edges
    g = graph.to_networkx()
    assert g.edges["getPrescriptionRecord", "getInteractionAlerts"]["dependency_type"] == "state_dependency"
    assert g.nodes["determineBlockingReason"]["spec"] is graph.api("determineBlockingReason")
    assert graph.topological_order() == ORDER
    m = graph.metrics()
    assert (m.nodes, m.edges) == (9, 14)
    assert m.density == pytest.approx(14 / 72) == pytest.approx(nx.density(g))


def test_prompt_text_round_trips(graph_answer: str):
    graph = APIGraph.parse(graph_answer)
    text = graph.to_prompt_text()
    assert text.startswith("apis:\n- api_name: getPrescriptionRecord\n")
    assert APIGraph.parse(f"<api_dependency_graph>\n{text}</api_dependency_graph>") == graph


# --- metrics on known graphs --------------------------------------------------------------------

def test_metrics_on_a_known_small_graph():
    graph = small_graph([("a", "b"), ("a", "c"), ("b", "c"), ("a", "c")])  # a repeated edge counts once
    m = graph.metrics()
    assert (m.nodes, m.edges, m.density) == (3, 3, 0.5)
    assert graph.topological_order() == ["a", "b", "c"]


def test_metrics_match_teller_table_4_account_row():
    # TELLER Table 4, Account: 10 nodes, 16 edges, density 0.1778.
    nodes = [f"api{i}" for i in range(10)]
    edges = [(nodes[i], nodes[j]) for i in range(10) for j in range(i + 1, 10)][:16]
    m = small_graph(edges, nodes).metrics()
    assert (m.nodes, m.edges, round(m.density, 4)) == (10, 16, 0.1778)


def test_metrics_of_a_single_api_and_topological_ties_keep_written_order():
    assert small_graph([], ["only"]).metrics().density == 0.0
    graph = small_graph([("root", "z"), ("root", "a")], ["root", "z", "a"])
    assert graph.topological_order() == ["root", "z", "a"]


# --- each broken graph is caught and named -----------------------------------------------------

def test_cycle_is_caught_and_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, "    direct_dependencies: []\n",
                '    direct_dependencies:\n      - dependent_api: "calculatePrescriptionAge"\n'
                '        dependency_type: "temporal_dependency"\n'
                '        dependency_reason: "Runs after the age calculation."\n')
    checks = run_checks(text)
    acyclic = by_name(checks, "api_graph.acyclic")
    assert acyclic.blocking
    cycle = acyclic.details["cycle"]
    assert cycle[0] == cycle[-1] and set(cycle) == {"getPrescriptionRecord", "calculatePrescriptionAge"}
    assert f"dependency cycle: {' -> '.join(cycle)};" in acyclic.message
    with pytest.raises(ValueError, match="cycle: .*getPrescriptionRecord"):
        APIGraph.parse(text).topological_order()


def test_self_dependency_is_a_cycle(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, '      - dependent_api: "checkInsuranceEligibility"',
                '      - dependent_api: "determineBlockingReason"')
    acyclic = by_name(run_checks(text), "api_graph.acyclic")
    assert acyclic.details["cycle"] == ["determineBlockingReason", "determineBlockingReason"]


def test_dangling_dependency_is_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, '      - dependent_api: "checkInsuranceEligibility"',
                '      - dependent_api: "checkPayerCoverage"')
    checks = run_checks(text)
    dangling = by_name(checks, "api_graph.dependencies_exist")
    assert dangling.blocking
    assert dangling.details["dependencies"] == ["determineBlockingReason -> checkPayerCoverage"]
    # The lost edge also leaves insurance_status without an upstream producer, and says where it comes from.
    provenance = by_name(checks, "api_graph.inputs_provenance")
    assert ("determineBlockingReason.insurance_status (other_api) is output by checkInsuranceEligibility, "
            "which determineBlockingReason does not depend on: add a dependency") in provenance.message
    graph = APIGraph.parse(text)
    assert ("checkPayerCoverage", "determineBlockingReason") in graph.edges()
    assert "checkPayerCoverage" not in graph.to_networkx()


def test_orphan_to_be_obtained_field_is_named(graph_answer: str, run_checks):
    start = graph_answer.index('  - api_name: "determineBlockingReason"')
    end = graph_answer.index('  - api_name: "sendPrescriberReferral"')
    text = graph_answer[:start] + graph_answer[end:]
    # The writes record blocking_reason too: with its producer gone they record it no more.
    text = text.replace('      - dependent_api: "determineBlockingReason"\n        dependency_type: "data_dependency"\n'
                        '        dependency_reason: "Records blocking_reason, which determineBlockingReason returns."\n', "")
    text = text.replace("    direct_dependencies:\n    complexity", "    direct_dependencies: []\n    complexity")
    text = text.replace('      - name: "blocking_reason"\n        data_type: "enum"\n        source: "other_api"\n'
                        '        required: true\n', "")
    checks = run_checks(text)
    assert blocking(checks) == ["api_graph.to_be_obtained_produced"]
    orphan = by_name(checks, "api_graph.to_be_obtained_produced")
    assert orphan.details["fields"] == ["blocking_reason"]  # refill_decision is a decision: no API makes it
    assert orphan.message.startswith("to-be-obtained fields no API outputs: blocking_reason;")
    # Record fields only the removed API read become unused outputs: a warning, not an error.
    unused = by_name(checks, "api_graph.orphan_outputs")
    assert not unused.passed and unused.severity == "warning"
    assert unused.details["outputs"] == [
        "getPrescriptionRecord.medication_class", "getPrescriptionRecord.refills_remaining",
        "getPrescriptionRecord.days_supply_remaining", "getInteractionAlerts.interaction_alert_count",
        "verifyPrescriberLicense.prescriber_license_active", "checkInsuranceEligibility.insurance_status"]


def test_other_api_input_nobody_outputs_is_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, '      - name: "request_date"\n        data_type: "date"\n        source: "user_input"',
                '      - name: "request_date"\n        data_type: "date"\n        source: "other_api"')
    checks = run_checks(text)
    assert blocking(checks) == ["api_graph.inputs_provenance"]
    result = by_name(checks, "api_graph.inputs_provenance")
    assert ("calculatePrescriptionAge.request_date (other_api) is on the case record, but the agent calling the "
            "tool is neither given it with the case nor returned it by any API") in result.message
    assert "take it as user_input, or add it to the outputs of an upstream read API" in result.message
    assert result.details["inputs"] == [{"api": "calculatePrescriptionAge", "parameter": "request_date",
                                         "source": "other_api", "producers": []}]


def test_a_system_state_field_the_caller_cannot_know_is_named(graph_answer: str, run_checks, edit):
    """Every input is passed by the caller; an existing field 'read from the case record' that is neither
    supplied with the case nor returned upstream left an independent answerer's reference procedure unable
    to call the tools on any row (issue 19). The old check let every existing system_state input pass."""
    supplied = edit(graph_answer, '      - name: "request_date"\n        data_type: "date"\n        source: "user_input"',
                    '      - name: "request_date"\n        data_type: "date"\n        source: "system_state"')
    assert graph_answer.count('name: "request_date"') == 1  # no other API takes it as user_input
    checks = run_checks(supplied)
    assert blocking(checks) == ["api_graph.inputs_provenance"]
    result = by_name(checks, "api_graph.inputs_provenance")
    assert "calculatePrescriptionAge.request_date (system_state) is on the case record, but" in result.message


def test_other_api_input_from_an_api_that_is_not_upstream_is_named(graph_answer: str, run_checks, edit):
    # Drop calculateEarlyRefillRatio's only dependency: its inputs still exist, but not upstream of it.
    start = graph_answer.index('    direct_dependencies:\n      - dependent_api: "getPrescriptionRecord"\n'
                               '        dependency_type: "data_dependency"\n        dependency_reason: "Takes days_since')
    end = graph_answer.index("    complexity_level", start)
    checks = run_checks(graph_answer[:start] + "    direct_dependencies: []\n" + graph_answer[end:])
    assert blocking(checks) == ["api_graph.inputs_provenance"]
    result = by_name(checks, "api_graph.inputs_provenance")
    assert [(i["api"], i["parameter"], i["producers"]) for i in result.details["inputs"]] == [
        ("calculateEarlyRefillRatio", "days_since_last_fill", ["getPrescriptionRecord"]),
        ("calculateEarlyRefillRatio", "last_fill_days_supply", ["getPrescriptionRecord"])]
    assert "is output by getPrescriptionRecord, which calculateEarlyRefillRatio does not depend on" in result.message


def test_provenance_is_transitive_through_state_edges(graph_answer: str, run_checks, edit):
    # getInteractionAlerts reads days_supply_remaining although its only edge to the record is a state edge:
    # the producer is an ancestor, so the input is accounted for.
    text = edit(graph_answer, '    sop_steps: ["5.5.1"]\n    input_parameters:\n',
                '    sop_steps: ["5.5.1"]\n    input_parameters:\n      - name: "days_supply_remaining"\n'
                '        data_type: "integer"\n        source: "other_api"\n        required: false\n')
    assert failing(run_checks(text)) == []


def test_to_be_obtained_field_as_user_input_is_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, '      - name: "prescription_age_days"\n        data_type: "integer"\n        source: "other_api"',
                '      - name: "prescription_age_days"\n        data_type: "integer"\n        source: "user_input"')
    checks = run_checks(text)
    assert blocking(checks) == ["api_graph.user_inputs_existing"]
    assert by_name(checks, "api_graph.user_inputs_existing").details["parameters"] == [
        "determineBlockingReason.prescription_age_days"]


def test_system_state_input_needs_an_upstream_writer_unless_it_is_existing(graph_answer: str, run_checks, edit):
    existing = edit(graph_answer, '      - name: "patient_id"\n        data_type: "string"\n        source: "user_input"\n'
                    '        required: true\n    output_parameters:\n      - name: "insurance_status"',
                    '      - name: "patient_id"\n        data_type: "string"\n        source: "system_state"\n'
                    '        required: true\n    output_parameters:\n      - name: "insurance_status"')
    assert failing(run_checks(existing)) == []
    obtained = edit(graph_answer, '    sop_steps: ["5.5.2"]\n    input_parameters:\n',
                    '    sop_steps: ["5.5.2"]\n    input_parameters:\n      - name: "blocking_reason"\n'
                    '        data_type: "enum"\n        source: "system_state"\n        required: false\n')
    result = by_name(run_checks(obtained), "api_graph.inputs_provenance")
    assert result.blocking
    assert ("verifyPrescriberLicense.blocking_reason (system_state) is output by determineBlockingReason, "
            "which verifyPrescriberLicense does not depend on") in result.message


def test_parameter_outside_the_schema_is_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, '    sop_steps: ["5.5.2"]\n    input_parameters:\n      - name: "prescription_id"',
                '    sop_steps: ["5.5.2"]\n    input_parameters:\n      - name: "prescriber_npi"')
    checks = run_checks(text)
    assert blocking(checks) == ["api_graph.parameters_in_schema"]
    result = by_name(checks, "api_graph.parameters_in_schema")
    assert result.details["parameters"] == ["verifyPrescriberLicense.prescriber_npi"]
    assert "prescriber_npi" in result.message and "prescription_id" in result.message  # lists the real fields


def test_api_returning_a_decision_field_is_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, BLOCKER_OUTPUT, BLOCKER_OUTPUT + '      - name: "refill_decision"\n'
                '        data_type: "enum"\n        destination: "ui_display"\n')
    checks = run_checks(text)
    assert blocking(checks) == ["api_graph.no_decision_outputs"]
    result = by_name(checks, "api_graph.no_decision_outputs")
    assert result.details["outputs"] == ["determineBlockingReason outputs refill_decision"]
    assert "the agent decides by applying the SOP" in result.message


def test_decision_field_as_input_is_refused(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, '    sop_steps: ["5.5.2"]\n    input_parameters:\n',
                '    sop_steps: ["5.5.2"]\n    input_parameters:\n      - name: "refill_decision"\n'
                '        data_type: "enum"\n        source: "other_api"\n        required: true\n')
    result = by_name(run_checks(text), "api_graph.inputs_provenance")
    assert result.blocking and "verifyPrescriberLicense.refill_decision (other_api) is a [decision] field" \
        in result.message


def test_step_that_does_not_exist_is_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, 'sop_steps: ["5.5.1"]', 'sop_steps: ["5.5.4"]')
    checks = run_checks(text)
    assert blocking(checks) == ["api_graph.sop_steps_valid"]
    result = by_name(checks, "api_graph.sop_steps_valid")
    assert result.details["missing"] == ["getInteractionAlerts: 5.5.4"]
    assert "5.5.3" in result.message  # the real steps are listed for the re-ask


def test_api_without_steps_is_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, '    sop_steps: ["5.5.3"]\n', "")
    result = by_name(run_checks(text), "api_graph.sop_steps_valid")
    assert result.blocking and result.details["apis_without_steps"] == ["checkInsuranceEligibility"]


def test_sop_order_inversion_is_a_warning(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, 'sop_steps: ["5.2.1"]', 'sop_steps: ["5.6.2"]')
    checks = run_checks(text)
    assert failing(checks) == ["api_graph.sop_order"] and blocking(checks) == []
    result = by_name(checks, "api_graph.sop_order")
    assert result.severity == "warning"
    assert result.details["inversions"] == ["calculatePrescriptionAge (5.6.2) -> determineBlockingReason (5.6.1)"]


def test_steps_compare_numerically_not_as_text(good_schema: DataSchema, good_sop: SOPDocument):
    sop = good_sop.model_copy(update={"steps": [*good_sop.steps, good_sop.steps[0].model_copy(
        update={"number": "5.10"})]})
    graph = small_graph([("early", "late")])
    graph.apis[0].sop_steps, graph.apis[1].sop_steps = ["5.2"], ["5.10"]
    assert by_name(check_graph(graph, good_schema, sop), "api_graph.sop_order").passed
    graph.apis[0].sop_steps, graph.apis[1].sop_steps = ["5.10"], ["5.2"]
    assert not by_name(check_graph(graph, good_schema, sop), "api_graph.sop_order").passed


def test_duplicate_and_invalid_names_are_named(graph_answer: str, run_checks, edit):
    text = edit(graph_answer, 'api_name: "verifyPrescriberLicense"', 'api_name: "checkInsuranceEligibility"')
    assert by_name(run_checks(text), "api_graph.names_unique").details["names"] == ["checkInsuranceEligibility"]
    text = edit(graph_answer, 'api_name: "verifyPrescriberLicense"', 'api_name: "verify-prescriber license"')
    text = text.replace('dependent_api: "verifyPrescriberLicense"', 'dependent_api: "verify-prescriber license"')
    checks = run_checks(text)
    assert blocking(checks) == ["api_graph.names_valid"]
    assert by_name(checks, "api_graph.names_valid").details["names"] == ["verify-prescriber license"]


def test_type_mismatch_is_a_warning_and_aliases_are_accepted(graph_answer: str, run_checks, edit):
    aliased = edit(graph_answer, '      - name: "interaction_alert_count"\n        data_type: "integer"\n'
                   '        destination', '      - name: "interaction_alert_count"\n        data_type: "int"\n'
                   '        destination')
    assert failing(run_checks(aliased)) == []
    wrong = edit(graph_answer, '      - name: "early_refill_ratio"\n        data_type: "float"\n        destination',
                 '      - name: "early_refill_ratio"\n        data_type: "string"\n        destination')
    checks = run_checks(wrong)
    assert failing(checks) == ["api_graph.parameter_types"] and blocking(checks) == []
    assert by_name(checks, "api_graph.parameter_types").details["parameters"] == [
        "calculateEarlyRefillRatio.early_refill_ratio (string, schema says float)"]


# --- parsing ------------------------------------------------------------------------------------

def test_missing_block_is_a_parse_error():
    with pytest.raises(ParseError, match="missing <api_dependency_graph>"):
        APIGraph.parse("<dependency_analysis>thinking</dependency_analysis> and no graph")


@pytest.mark.parametrize("old, new, bad_line, problem", [
    ('    purpose: "Coverage (5.5.3): a lapsed coverage blocks the refill."',
     "    purpose: Coverage (5.5.3): a lapsed coverage blocks the refill.",
     "    purpose: Coverage (5.5.3): a lapsed coverage blocks the refill.", "mapping values are not allowed here"),
    ('    business_criticality: "medium"\n  - api_name: "determineBlockingReason"',
     '     business_criticality: "medium"\n  - api_name: "determineBlockingReason"',
     '     business_criticality: "medium"', "expected <block end>"),
    ('    sop_steps: ["5.5.3"]\n', '    sop_steps: ["5.5.3"]\n    sop_steps: ["5.5.4"]\n',
     '    sop_steps: ["5.5.4"]', "key 'sop_steps' appears twice in one mapping"),
], ids=["unquoted-colon", "bad-indentation", "repeated-key"])
def test_malformed_yaml_names_the_line(graph_answer: str, edit, old, new, bad_line, problem):
    text = edit(graph_answer, old, new)
    block = text[text.index("<api_dependency_graph>") + len("<api_dependency_graph>"):
                 text.index("</api_dependency_graph>")].strip().splitlines()
    line_no = block.index(bad_line) + 1
    with pytest.raises(ParseError) as err:
        APIGraph.parse(text)
    message = str(err.value)
    assert message.startswith(f"<api_dependency_graph>: invalid YAML at line {line_no} of the block ({problem}")
    assert repr(bad_line.strip()) in message and "\n" not in message


def test_structure_errors_name_the_api_and_the_key(graph_answer: str, edit):
    text = edit(graph_answer, '        dependency_type: "data_dependency"\n        dependency_reason: "Takes prescription_written',
                '        dependancy_type: "data_dependency"\n        dependency_reason: "Takes prescription_written')
    with pytest.raises(ParseError) as err:
        APIGraph.parse(text)
    assert "apis[1] (calculatePrescriptionAge).direct_dependencies[0].dependancy_type: Extra inputs are not " \
           "permitted" in str(err.value)
    text = edit(graph_answer, 'source: "user_input"\n        required: true\n    output_parameters:\n'
                '      - name: "insurance_status"', 'source: "database"\n        required: true\n'
                '    output_parameters:\n      - name: "insurance_status"')
    with pytest.raises(ParseError, match=r"apis\[5\] \(checkInsuranceEligibility\)\.input_parameters\[0\]\.source: "
                                         "Input should be 'user_input', 'other_api', 'system_state' or 'decision'"):
        APIGraph.parse(text)


@pytest.mark.parametrize("body, problem", [
    ("- api_name: x", "must be a YAML mapping with one key 'apis'"),
    ("graph: []", "must be a YAML mapping with one key 'apis'"),
    ("apis: []", "apis: List should have at least 1 item"),
])
def test_wrong_top_level_shape_is_a_parse_error(body: str, problem: str):
    with pytest.raises(ParseError, match=problem.replace("[", r"\[")):
        APIGraph.parse(f"<api_dependency_graph>\n{body}\n</api_dependency_graph>")


def test_code_fence_case_and_unquoted_steps_are_read_one_way(graph_answer: str, edit):
    text = edit(graph_answer, "<api_dependency_graph>\n", "<api_dependency_graph>\n```yaml\n")
    text = edit(text, "</api_dependency_graph>", "```\n</api_dependency_graph>")
    text = edit(text, 'sop_steps: ["5.2.1"]', "sop_steps: [5.10, 5.2, 5.2.1]")
    text = edit(text, 'dependency_type: "state_dependency"\n        dependency_reason: "The prescriber',
                'dependency_type: "State_Dependency"\n        dependency_reason: "The prescriber')
    graph = APIGraph.parse(text)
    assert graph.api("calculatePrescriptionAge").sop_steps == ["5.10", "5.2", "5.2.1"]  # 5.10 is not 5.1
    assert graph.api("verifyPrescriberLicense").direct_dependencies[0].dependency_type == "state_dependency"


def test_last_block_wins_over_one_quoted_in_the_analysis(graph_answer: str):
    text = "<dependency_analysis>draft: <api_dependency_graph>apis: [</api_dependency_graph></dependency_analysis>\n"
    assert APIGraph.parse(text + graph_answer).names == ORDER
