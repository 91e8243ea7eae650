"""``--derive-reference`` (issue 26): labels checked against the SOP without a shipped reference.

The answers below are hand-written procedures for tests of deliberate failures only (flipped
labels, derivations that disagree, an answer that fails the policy); they go through the real
Gateway and the scripted provider, and every procedure runs in the sandbox.
"""

from __future__ import annotations

from pathlib import Path

from published_defects import copy_clean, edit
from sopforge.audit import audit_folder
from sopforge.audit.run import Derivation
from sopforge.sandbox import SandboxLimits

LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=20)

FOLLOWS_THE_SOP = '''<procedure_plan>steps 5.1-5.5</procedure_plan>
<code>
MAX_VARIANCE_PCT = 5.0  # 5.5 "greater than 5.0"


def run_procedure(manager, case):
    po = case["po_number"]
    shipment = manager.process_tool_call("getShipmentDetails", {"po_number": po})  # 5.1
    condition = manager.process_tool_call("assessPackageCondition", {
        "po_number": po, "package_image_path": shipment["package_image_path"]})["package_condition"]  # 5.2
    if condition == "damaged":  # 5.3
        return {"inspection_decision": "reject",
                "sop_clause": {"inspection_decision": "5.3 If the package_condition is damaged, ... reject"}}
    variance = manager.process_tool_call("calculateQuantityVariance", {
        "ordered_quantity": shipment["ordered_quantity"],
        "received_quantity": shipment["received_quantity"]})["variance_pct"]  # 5.4
    decision = "hold" if variance > MAX_VARIANCE_PCT else "accept"  # 5.5
    return {"inspection_decision": decision,
            "sop_clause": {"inspection_decision": "5.5 If the variance_pct is greater than 5.0, ... hold"}}
</code>'''

ALWAYS_ACCEPT = '''<code>
def run_procedure(manager, case):
    manager.process_tool_call("getShipmentDetails", {"po_number": case["po_number"]})
    return {"inspection_decision": "accept", "sop_clause": {"inspection_decision": "5.5"}}
</code>'''


def _derive(scripted, settings, answers: list[str], count: int = 2) -> tuple[Derivation, object]:
    gateway, provider = scripted(answers)
    return Derivation(llm=gateway, settings=settings, model="scripted", count=count), provider


def _flip(folder: Path) -> None:
    """Rows 1 (PO-1002, accept) and 3 (PO-1004, damaged: reject) get labels the SOP contradicts."""
    edit(folder, "test_set_with_outputs.csv", "PO-1002,V-BOLT,47,48,2024-03-02,intact,accept",
         "PO-1002,V-BOLT,47,48,2024-03-02,intact,hold")
    edit(folder, "test_set_with_outputs.csv", "PO-1004,V-ACME,61,64,2024-03-04,damaged,reject",
         "PO-1004,V-ACME,61,64,2024-03-04,damaged,accept")


def test_labels_that_contradict_the_sop_are_errors_with_clause_and_tool_calls(tmp_path, scripted, settings):
    folder = copy_clean(tmp_path)
    _flip(folder)
    derive, provider = _derive(scripted, settings, [FOLLOWS_THE_SOP, FOLLOWS_THE_SOP])
    report = audit_folder(folder, limits=LIMITS, derive=derive)
    result = report.get("labels.derived_reference")
    assert not result.passed and result.severity == "error", result.message
    assert result.details["tasks"] == [1, 3]
    first = result.details["contradicts"][0]
    assert first["columns"] == {"inspection_decision": {"csv": "hold", "derived": "accept"}}
    assert first["clause"]["inspection_decision"].startswith("5.5")
    assert [c["tool"] for c in first["tool_calls"]] == [
        "getShipmentDetails", "assessPackageCondition", "calculateQuantityVariance"]
    assert len(result.details["agrees"]) == 22
    keys = [r.call_key for r in provider.requests]
    assert keys == ["audit/package_inspection/derive_reference/d1/a1", "audit/package_inspection/derive_reference/d2/a1"]
    assert "accept" in provider.requests[0].messages[0].content and ",hold" not in provider.requests[0].messages[0].content


def test_the_clean_folder_agrees_with_the_derived_sop(tmp_path, scripted, settings):
    derive, _ = _derive(scripted, settings, [FOLLOWS_THE_SOP, FOLLOWS_THE_SOP])
    report = audit_folder(copy_clean(tmp_path), limits=LIMITS, derive=derive)
    assert report.ok and report.get("labels.derived_reference").passed, report.to_text(show_passed=False)


def test_derivations_that_disagree_leave_the_rows_undecidable_not_errors(tmp_path, scripted, settings):
    folder = copy_clean(tmp_path)
    _flip(folder)
    derive, _ = _derive(scripted, settings, [FOLLOWS_THE_SOP, ALWAYS_ACCEPT])
    report = audit_folder(folder, limits=LIMITS, derive=derive)
    result = report.get("labels.derived_reference")
    assert result.details["tasks"] == [1]  # both derivations accept PO-1002; on PO-1004 they disagree
    undecidable = report.get("labels.derived_undecidable")
    assert 3 in undecidable.details["tasks"] and 1 not in undecidable.details["tasks"]


def test_one_derivation_makes_a_contradiction_a_warning(tmp_path, scripted, settings):
    folder = copy_clean(tmp_path)
    _flip(folder)
    derive, _ = _derive(scripted, settings, [FOLLOWS_THE_SOP], count=1)
    report = audit_folder(folder, limits=LIMITS, derive=derive)
    result = report.get("labels.derived_reference")
    assert not result.passed and result.severity == "warning" and result.details["tasks"] == [1, 3]


def test_an_answer_that_fails_the_policy_is_re_asked(tmp_path, scripted, settings):
    bad = "<code>\nimport subprocess\ndef run_procedure(manager, case):\n    return {}\n</code>"
    derive, provider = _derive(scripted, settings, [bad, FOLLOWS_THE_SOP], count=1)
    report = audit_folder(copy_clean(tmp_path), limits=LIMITS, derive=derive)
    assert report.get("labels.derived_reference").passed
    assert "derived.policy.processes" in provider.requests[1].messages[-1].content
