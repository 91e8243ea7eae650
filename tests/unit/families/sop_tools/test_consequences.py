"""Procedures with consequences (issue 16) on the recorded example domain, and the bad inputs it must refuse.

The example (examples/recordings/pharmacy_refills) ends its adjudication at the first failed gate and
writes a renewal request, a pharmacist review or a counseling note only on their branches, then the
decision record. Each bad input below is that domain with one defect, caught by name:

* a reference procedure that writes on a branch where the SOP forbids it;
* a domain where every task follows the same path;
* a write tool that writes the CSV, keeps its records outside the instance, or is not deterministic;
* a toolSpec that hides a write as a read, and a read that writes;
and each is fed back to the stage that can fix it (the reference or the tools stage re-asks).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sopforge.context.model import BusinessContext
from sopforge.errors import ValidationFailed
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset, DatasetBatch, find_id_field
from sopforge.families.sop_tools.models.ground_truth import ReferenceProcedure
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.tools import ToolCode, ToolSpecs
from sopforge.families.sop_tools.stages import reference as reference_stage
from sopforge.families.sop_tools.stages import tools as tools_stage
from sopforge.families.sop_tools.verify.consequences import DEFAULT_GATES
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import write_bundle
from sopforge.families.sop_tools.verify.replay import replay_plans
from sopforge.families.sop_tools.verify.tool_checks import check_code_static, check_toolspecs
from sopforge.families.sop_tools.verify.tool_runtime import check_runtime
from sopforge.llm.providers._files import read_response
from sopforge.sandbox import SandboxLimits

ROOT = Path(__file__).resolve().parents[4]
RECORDINGS = ROOT / "tests" / "fixtures" / "pharmacy_writes"  # frozen: see its README
SOPBENCH = ROOT / "tests" / "fixtures" / "sopbench" / "loan_triage"
CLASS = "PharmacyRefillsManager"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)
SLUG = "pharmacy_refills"
# The licence branch sends a renewal request too, although 5.7.1 allows one only when the prescription
# is expired or exhausted.
RENEWAL_ON_LICENCE = ('    if license_status != "active":\n        return _decide(',
                      '    if license_status != "active":\n'
                      '        _renewal(manager, request_id, record, "prescriber_license_inactive")\n'
                      '        return _decide(')


def recorded(stem: str) -> str:
    return read_response(RECORDINGS / f"pharmacy_refills__{stem}__a1.response.md")[1]


def once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"edit target not found exactly once: {old!r}"
    return text.replace(old, new)


class Domain:
    """The recorded example domain, parsed once."""

    def __init__(self) -> None:
        self.context = BusinessContext.parse(recorded("context__main"), theme="pharmacy refills")
        self.schema = DataSchema.parse(recorded("schema__main"))
        self.sop = SOPDocument.parse(recorded("sop__main"), title=self.context.task.sop_title)
        self.graph = APIGraph.parse(recorded("api_graph__main"))
        self.rows = [r for n in (1, 2) for r in DatasetBatch.parse(recorded(f"dataset__batch{n}"), self.schema).rows]
        self.dataset = Dataset(fields=[f.name for f in self.schema.existing], id_field=find_id_field(self.schema),
                               rows=self.rows, rows_requested=len(self.rows))
        self.specs = ToolSpecs.parse(recorded("tools__toolspecs"))
        self.code_answer = recorded("tools__code")
        self.code = ToolCode.parse(self.code_answer, CLASS)
        self.procedure_answer = recorded("reference__main")
        self.procedure = ReferenceProcedure.parse(self.procedure_answer).source

    def bundle(self, folder: Path, *, code: str | None = None, procedure: str | None = None) -> Path:
        return write_bundle(folder, tool_code=code or self.code.source, toolspecs=self.specs.specs,
                            procedure_source=procedure or self.procedure, rows=self.rows, schema=self.schema)

    def code_with(self, *edits: tuple[str, str]) -> ToolCode:
        text = self.code_answer
        for old, new in edits:
            text = once(text, old, new)
        return ToolCode.parse(text, CLASS)


@pytest.fixture(scope="module")
def domain() -> Domain:
    return Domain()


@pytest.fixture(scope="module")
def demo(domain, tmp_path_factory):
    folder = domain.bundle(tmp_path_factory.mktemp("demo") / "bundle")
    return compute_ground_truth(folder, domain.schema, domain.graph, domain.rows, limits=LIMITS,
                                gates=dict(DEFAULT_GATES))


def failed(checks) -> dict[str, str]:
    return {c.name: c.message for c in checks if c.blocking}


# --- the example: branches with consequences ---------------------------------------------------

def test_the_example_has_seven_paths_branch_only_writes_and_baselines_that_fail(demo):
    gt, checks = demo
    assert failed(checks) == {} and len(gt.tasks) == 50
    assert len(gt.paths) == 7 and sum(p.tasks for p in gt.paths) == 50
    assert gt.write_tools == ["sendRenewalRequest", "openPharmacistReview", "recordCounselingNote",
                              "recordRefillDecision"]
    assert {b.agent: (b.final_state, b.order) for b in gt.baselines} == {
        "call_every_tool": (0.0, 1.0), "read_only": (0.0, 1.0), "majority_label": (0.0, 1.0)}
    assert {b.agent: b.outputs for b in gt.baselines} == {a: 0.24 for a in ("call_every_tool", "read_only",
                                                                             "majority_label")}
    assert gt.gates == DEFAULT_GATES


def test_a_schedule_ii_request_ends_at_once_with_only_its_decision_record(demo):
    gt, _ = demo
    task = next(t for t in gt.tasks if t.task_id == "RR-418203")
    assert task.expected_path == ["getPrescriptionRecord", "recordRefillDecision"]
    assert task.expected_state == {"refill_decisions": {"RR-418203": {
        "request_id": "RR-418203", "refill_decision": "deny", "blocking_reason": "schedule_ii_not_refillable"}}}
    assert task.order_constraints == [["getPrescriptionRecord", "recordRefillDecision"]]
    # The intermediates its branch never computed still hold what the tools return (the audit calls them).
    assert task.hidden["prescription_age_days"] == 40 and task.hidden["interacting_drug"] is None


def test_a_severe_interaction_opens_a_review_before_the_decision_record(demo):
    gt, _ = demo
    task = next(t for t in gt.tasks if t.task_id == "RR-446591")
    assert task.expected_path[-2:] == ["openPharmacistReview", "recordRefillDecision"]
    assert "checkInsuranceEligibility" not in task.expected_path  # the payer is never queried
    assert task.expected_state["pharmacist_reviews"] == {"RR-446591": {
        "request_id": "RR-446591", "drug_name": "tramadol 50 mg tablet", "interacting_drug": "escitalopram 10 mg tablet"}}
    assert ["openPharmacistReview", "recordRefillDecision"] in task.order_constraints
    assert ["getInteractionAlerts", "openPharmacistReview"] in task.order_constraints


def test_the_path_table_names_every_write_on_its_branch(demo):
    gt, _ = demo
    writes = {tuple(p.writes) for p in gt.paths}
    assert writes == {("refill_decisions",), ("renewal_requests", "refill_decisions"),
                      ("pharmacist_reviews", "refill_decisions"), ("counseling_notes", "refill_decisions")}
    renewal = next(p for p in gt.paths if "renewal_requests" in p.writes)
    assert sorted(renewal.outcomes) == ["blocking_reason=no_refills_remaining, refill_decision=refer_to_prescriber",
                                        "blocking_reason=prescription_expired, refill_decision=refer_to_prescriber"]


def test_the_exported_tools_keep_state_per_case_without_sopforge(domain, tmp_path):
    folder = domain.bundle(tmp_path / "bundle")
    script = ("import tools\nm = tools.PharmacyRefillsManager()\n"
              "print(m.process_tool_call('recordRefillDecision', {'request_id': 'RR-418203', "
              "'refill_decision': 'deny', 'blocking_reason': 'schedule_ii_not_refillable'})['record_id'])\n"
              "print(sorted(m.database_state()['refill_decisions']))\n"
              "print(tools.PharmacyRefillsManager().database_state()['refill_decisions'])\n")
    # -S: no site-packages, so no sopforge (nor anything else) besides the standard library.
    done = subprocess.run([sys.executable, "-S", "-c", script], cwd=folder, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refill_decisions/RR-418203", "['RR-418203']", "{}"]


def test_a_folder_without_state_replays_but_says_it_keeps_none(tmp_path):
    plan = [{"tool": "getCreditScore", "args": {"application_id": "A-0001"}}]
    result, [run] = replay_plans(SOPBENCH, [plan], limits=LIMITS)
    assert result.ok and run.ok and not run.stateful and run.state_diff is None
    assert run.calls == [{"tool": "getCreditScore", "input": {"application_id": "A-0001"},
                          "output": {"credit_score": 742}}]


# --- bad input: a write where the SOP forbids it ------------------------------------------------

def test_a_write_on_a_forbidden_branch_is_named_with_its_tasks(domain, tmp_path):
    bad = once(domain.procedure, *RENEWAL_ON_LICENCE)
    gt, checks = compute_ground_truth(domain.bundle(tmp_path / "b", procedure=bad), domain.schema, domain.graph,
                                      domain.rows, limits=LIMITS, check_determinism=False)
    message = failed(checks)["ground_truth.writes_follow_sop"]
    assert message.startswith("writes that do not follow the SOP's branches: sendRenewalRequest is called on "
                              "RR-471540, RR-405517, RR-407731 and 2 more (the SOP writes it when blocking_reason is "
                              "\"prescription_expired\" or \"no_refills_remaining\")")


def test_the_reference_stage_re_asks_a_procedure_that_writes_on_a_forbidden_branch(scripted, settings, domain):
    bad = once(domain.procedure_answer, *RENEWAL_ON_LICENCE)
    llm, provider = scripted([bad, domain.procedure_answer])
    inputs = reference_stage.ReferenceInputs(
        theme_slug=SLUG, schema=domain.schema, sop=domain.sop, api_graph=domain.graph, rows=domain.rows,
        tools={"toolspecs": domain.specs.specs, "tool_code": domain.code.source})
    result = reference_stage.run(inputs, llm=llm, settings=settings, model="m", temperature=0.1, limits=LIMITS)
    assert result.attempts == 2 and len(result.artifact.paths) == 7
    reask = provider.requests[1].messages[-1].content
    assert "- ground_truth.writes_follow_sop: writes that do not follow the SOP's branches: sendRenewalRequest" in reask
    first = provider.requests[0].messages[0].content
    assert ('- sendRenewalRequest: writes renewal_requests with request_id, prescription_number, prescriber_npi, '
            'blocking_reason; only when blocking_reason is "prescription_expired" or "no_refills_remaining"') in first
    assert "the cases must follow at least 4 distinct tool paths" in first and "more than 50% of the cases" in first


# --- bad input: every task on the same path ----------------------------------------------------

SAME_PATH = '''\
"""Calls every look-up for every request, then decides: the branches change nothing but the answer."""


def run_procedure(manager, case):
    rid = case["request_id"]
    record = manager.process_tool_call("getPrescriptionRecord", {"request_id": rid})
    age = manager.process_tool_call("computePrescriptionAge", {"request_id": rid, "written_date": record["written_date"],
                                    "request_date": record["request_date"]})["prescription_age_days"]
    licence = manager.process_tool_call("verifyPrescriberLicense", {"request_id": rid,
                                        "prescriber_npi": record["prescriber_npi"]})["prescriber_license_status"]
    fill = manager.process_tool_call("getFillHistory", {"request_id": rid,
                                     "prescription_number": record["prescription_number"]})
    ratio = manager.process_tool_call("computeElapsedSupply", {"request_id": rid, "last_fill_date": fill["last_fill_date"],
                                      "last_days_supply": fill["last_days_supply"],
                                      "request_date": record["request_date"]})["elapsed_supply_ratio"]
    alert = manager.process_tool_call("getInteractionAlerts", {"request_id": rid, "drug_name": record["drug_name"]})
    coverage = manager.process_tool_call("checkInsuranceEligibility", {"request_id": rid,
                                         "patient_id": record["patient_id"]})["insurance_status"]
    schedule = record["controlled_schedule"]
    if schedule == "schedule_ii":
        reason, decision = "schedule_ii_not_refillable", "deny"
    elif age > {"non_controlled": 365, "schedule_iii_v": 180}[schedule]:
        reason, decision = "prescription_expired", "refer_to_prescriber"
    elif record["refills_remaining"] < 1:
        reason, decision = "no_refills_remaining", "refer_to_prescriber"
    elif licence != "active":
        reason, decision = "prescriber_license_inactive", "deny"
    elif ratio < {"non_controlled": 0.80, "schedule_iii_v": 0.85}[schedule]:
        reason, decision = "refill_too_early", "deny"
    elif alert["interaction_alert_level"] == "severe":
        reason, decision = "severe_interaction", "refer_to_prescriber"
    elif coverage == "lapsed_coverage":
        reason, decision = "coverage_lapsed", "deny"
    else:
        reason, decision = "no_blocking_issue", "approve"
    manager.process_tool_call("recordRefillDecision", {"request_id": rid, "refill_decision": decision,
                                                       "blocking_reason": reason})
    return {"refill_decision": decision, "blocking_reason": reason}
'''


def test_a_domain_where_every_task_follows_one_path_is_refused(domain, tmp_path):
    gt, checks = compute_ground_truth(domain.bundle(tmp_path / "b", procedure=SAME_PATH), domain.schema, domain.graph,
                                      domain.rows, limits=LIMITS, check_determinism=False, gates=dict(DEFAULT_GATES))
    bad = failed(checks)
    assert len(gt.paths) == 1 and gt.paths[0].tasks == 50
    assert bad["ground_truth.distinct_paths"].startswith(
        "only 1 distinct tool path(s) over 50 tasks, at least 4 needed: every task calls the same tools")
    # The same answers as the example, but the branch-only records are never written.
    assert "sendRenewalRequest is not called on" in bad["ground_truth.writes_follow_sop"]
    assert bad["ground_truth.paths_cover_apis"].startswith(
        "APIs on no task's path: sendRenewalRequest, openPharmacistReview, recordCounselingNote")


# --- bad input: write tools that misbehave, and specs that hide a write -------------------------

CSV_WRITE = ('        self._tables[table][key] = record\n',
             '        self._tables[table][key] = record\n'
             '        with open(_DATA_FILE, "a", encoding="utf-8") as handle:\n'
             '            handle.write(key + "\\n")\n')
CLASS_LEVEL = (('class PharmacyRefillsManager:\n    def __init__(self):',
                'class PharmacyRefillsManager:\n    _tables = {table: {} for table in _TABLES}\n\n    def __init__(self):'),
               ('        self._tables = {table: {} for table in _TABLES}\n', ''))
COUNTER = (('        self._tables = {table: {} for table in _TABLES}\n',
            '        self._tables = {table: {} for table in _TABLES}\n        self._sequence = 0\n'),
           ('        key = record["request_id"]\n',
            '        key = record["request_id"]\n        self._sequence += 1\n        record["sequence"] = self._sequence\n'))
READ_THAT_WRITES = ('        self._matches(row, "patient_id", patient_id)\n',
                    '        self._matches(row, "patient_id", patient_id)\n'
                    '        self._tables["refill_decisions"][row["request_id"]] = {"request_id": row["request_id"]}\n')


def runtime(domain, code: ToolCode) -> dict[str, str]:
    return failed(check_runtime(code, domain.specs, domain.graph, domain.schema, domain.dataset, limits=LIMITS))


def test_the_example_tools_pass_every_state_check(domain):
    checks = check_code_static(domain.code, domain.specs) + check_runtime(
        domain.code, domain.specs, domain.graph, domain.schema, domain.dataset, limits=LIMITS)
    assert [c.name for c in checks if not c.passed] == []
    state = {c.name: c.message for c in checks if c.name.startswith("tools.state.")}
    assert state["tools.state.tables"] == ("a new Manager holds the empty tables counseling_notes, pharmacist_reviews, "
                                           "refill_decisions, renewal_requests")


def test_a_write_tool_that_writes_the_csv_is_stopped_by_the_policy(domain):
    code = domain.code_with(CSV_WRITE)
    bad = failed(check_code_static(code, domain.specs))
    assert bad["tools.policy.filesystem"].startswith("line ") and "open(" in bad["tools.policy.filesystem"]


def test_records_kept_in_the_class_are_caught_statically_and_at_run_time(domain):
    code = domain.code_with(*CLASS_LEVEL)
    static = failed(check_code_static(code, domain.specs))
    assert "self._tables (a class-level _tables shared by every Manager)" in static["tools.code.state_in_instance"]
    bad = runtime(domain, code)
    assert bad["tools.state.isolated"].startswith("a Manager created after the rows were run starts with 200 record(s)")


def test_a_write_tool_whose_records_depend_on_call_order_is_not_deterministic(domain):
    bad = runtime(domain, domain.code_with(*COUNTER))
    assert "tools.runtime.deterministic" in bad and "wrote" in bad["tools.runtime.deterministic"]
    assert bad["tools.state.write_record"].startswith("write tools must store exactly their arguments")


def test_a_read_that_writes_and_a_spec_that_hides_a_write_are_named(domain):
    bad = runtime(domain, domain.code_with(READ_THAT_WRITES))
    assert bad["tools.state.read_only"].startswith("tools the API graph declares as reads changed the database: "
                                                   "checkInsuranceEligibility changed refill_decisions")
    hidden = ToolSpecs.parse(recorded("tools__toolspecs").replace(
        '"[WRITE] Write the decision record', '"Write the decision record'))
    spec_checks = failed(check_toolspecs(hidden, domain.graph, domain.schema))
    assert spec_checks["tools.specs.write_declared"].startswith(
        "a toolSpec must not hide a write as a read (nor the reverse): recordRefillDecision writes refill_decisions "
        "but its description does not start with [WRITE]")


def test_the_tools_stage_re_asks_code_that_breaks_the_state_contract(scripted, settings, domain):
    answers = [recorded("tools__api_docs"), recorded("tools__toolspecs"),
               once(domain.code_answer, *CLASS_LEVEL[0]).replace(CLASS_LEVEL[1][0], ""), domain.code_answer]
    llm, provider = scripted(answers)
    inputs = tools_stage.ToolsInputs(theme_slug=SLUG, context=domain.context, schema=domain.schema, sop=domain.sop,
                                     api_graph=domain.graph, dataset=domain.dataset)
    result = tools_stage.run(inputs, llm=llm, settings=settings, model="m", temperature=0.1, limits=LIMITS)
    assert result.attempts == 4 and result.artifact.code == domain.code
    code_prompt, reask = provider.requests[2].messages[0].content, provider.requests[3].messages[-1].content
    assert "<write_tables>\nsendRenewalRequest writes renewal_requests\n" in code_prompt
    assert "write back" not in code_prompt.lower()  # issue 16 item 7: no write-back into the case's row
    assert "- tools.code.state_in_instance:" in reask


def test_a_toolspec_hiding_a_write_is_re_asked_at_the_toolspecs_step(scripted, settings, domain):
    hidden = recorded("tools__toolspecs").replace('"[WRITE] Write the decision record', '"Write the decision record')
    llm, provider = scripted([recorded("tools__api_docs"), hidden])
    inputs = tools_stage.ToolsInputs(theme_slug=SLUG, context=domain.context, schema=domain.schema, sop=domain.sop,
                                     api_graph=domain.graph, dataset=domain.dataset)
    with pytest.raises(ValidationFailed, match="tools.specs.write_declared"):
        tools_stage.run(inputs, llm=llm, settings=settings.model_copy(update={"max_attempts": 1}), model="m",
                        temperature=0.1, limits=LIMITS)
    assert json.loads(json.dumps([r.call_key for r in provider.requests])) == [
        "pharmacy_refills/tools/api_docs/a1", "pharmacy_refills/tools/toolspecs/a1"]
