"""Edit scripts, diffs, verdict parsing and the structural variant checks, on the pharmacy SOP."""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.sop_variants import SOPEdit, apply_edits, parse_edits, parse_verdict, unified_diff
from sopforge.families.sop_tools.options import VARIANT_TYPES
from sopforge.families.sop_tools.verify.sop_variant_checks import check_variant, numbers_in

from sopforge.context.model import BusinessContext

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
THEME = "pharmacy prescription refills"


def read_answer(name: str) -> str:
    return (ANSWERS / f"{name}.txt").read_text(encoding="utf-8")

TOOLS = ["calculateEarlyRefillRatio", "calculatePrescriptionAge", "checkInsuranceEligibility",
         "determineBlockingReason", "getInteractionAlerts", "getPrescriptionRecord", "verifyPrescriberLicense"]


def edits_answer(*pairs: tuple[str, str]) -> str:
    body = "".join(f"<edit>\n<find>{f}</find>\n<replace>{r}</replace>\n</edit>\n" for f, r in pairs)
    return f"<variant_summary>s</variant_summary>\n<edits>\n{body}</edits>\n"


def run_checks(variant_type, good_sop, good_schema, good_context, text):
    outputs = [f.name for f in good_schema.to_be_obtained]
    return check_variant(variant_type, good_sop, text, schema=good_schema, output_fields=outputs,
                         tool_names=TOOLS, context_text=good_context.to_prompt_text())


def by_name(checks, name):
    return next(c for c in checks if c.name == name)


def failed(checks):
    return [c.name for c in checks if not c.passed]


# --- edit scripts --------------------------------------------------------------------------------

def test_edits_are_applied_exactly_and_the_diff_shows_only_them():
    base = "1. Purpose\nKeep patients supplied.\n2. Scope\nAll refills.\nNo transfers.\n"
    raw = edits_answer(("Keep patients supplied.", "Keep patients supplied.\nAlways, and on time."),
                       ("No transfers.", ""))
    edits = parse_edits(raw)
    assert edits == [SOPEdit(find="Keep patients supplied.", replace="Keep patients supplied.\nAlways, and on time."),
                     SOPEdit(find="No transfers.", replace="")]
    text = apply_edits(base, edits)
    assert text == "1. Purpose\nKeep patients supplied.\nAlways, and on time.\n2. Scope\nAll refills.\n\n"
    diff = unified_diff(base, text, "tangential")
    assert diff.startswith("--- sop.txt\n+++ sop_tangential.txt\n")
    assert [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")] == [
        "+Always, and on time.", "-No transfers.", "+"]
    assert unified_diff(base, base, "tangential") == ""


def test_edits_are_located_in_the_base_so_order_does_not_matter():
    base = "alpha beta gamma"
    forward = apply_edits(base, [SOPEdit(find="alpha", replace="ALPHA gamma"), SOPEdit(find="gamma", replace="G")])
    backward = apply_edits(base, [SOPEdit(find="gamma", replace="G"), SOPEdit(find="alpha", replace="ALPHA gamma")])
    assert forward == backward == "ALPHA gamma beta G"


@pytest.mark.parametrize("edits, message", [
    ([SOPEdit(find="second", replace="b"), SOPEdit(find="not there", replace="x")], "edit 2: <find> 'not there' is not in the SOP"),
    ([SOPEdit(find="refill", replace="x")], "edit 1: <find> 'refill' occurs 2 times in the SOP"),
    ([SOPEdit(find="one refill", replace="x"), SOPEdit(find="refill and", replace="y")], "edits 1 and 2 change overlapping text"),
])
def test_bad_finds_are_parse_errors_naming_the_edit(edits, message):
    with pytest.raises(ParseError) as err:
        apply_edits("a one refill and a second refill", edits)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("raw, message", [
    ("no tags at all", "missing <edits>"),
    ("<edits>\n</edits>", "holds no <edit>"),
    ("<edits><edit><find>x</find></edit></edits>", "edit 1 must hold exactly one <find> and one <replace>"),
    ("<edits><edit><find> </find><replace>y</replace></edit></edits>", "edit 1 has an empty <find>"),
])
def test_malformed_edit_scripts_are_parse_errors(raw, message):
    with pytest.raises(ParseError, match=message):
        parse_edits(raw)


# --- verdicts ----------------------------------------------------------------------------------

def test_the_recorded_judge_answer_keeps_the_ground_truth():
    verdict = parse_verdict(read_answer("sop_variant_judge_keeps"))
    assert verdict.keeps_ground_truth and verdict.undeterminable == [] and verdict.reason.startswith("Every change")


def test_a_changes_verdict_lists_what_was_lost():
    raw = ("<verdict>changes_ground_truth</verdict><reason>180 is gone.</reason>"
           "<undeterminable>`blocking_reason`, refill_decision</undeterminable>")
    verdict = parse_verdict(raw)
    assert not verdict.keeps_ground_truth and verdict.undeterminable == ["blocking_reason", "refill_decision"]


@pytest.mark.parametrize("raw, message", [
    ("The variant looks fine to me.", "missing <verdict>"),
    ("<verdict>probably keeps</verdict><reason>r</reason><undeterminable>none</undeterminable>", "must be exactly"),
    ("<verdict>keeps_ground_truth</verdict><reason> </reason><undeterminable>none</undeterminable>", "<reason> is empty"),
    ("<verdict>keeps_ground_truth</verdict><reason>r</reason>", "missing <undeterminable>"),
    ("<verdict>keeps_ground_truth</verdict><reason>r</reason><undeterminable></undeterminable>", "comma-separated"),
    ("<verdict>keeps_ground_truth</verdict><reason>r</reason><undeterminable>refill_decision</undeterminable>",
     "contradict|either every decision"),
])
def test_unreadable_or_contradictory_verdicts_are_parse_errors(raw, message):
    with pytest.raises(ParseError, match=message):
        parse_verdict(raw)


# --- structural checks -------------------------------------------------------------------------

def test_numbers_in_treats_percentages_as_fractions_too():
    assert {80.0, 0.8, 7.0, 1000.0} <= numbers_in("less than 80% and more than 7 days, 1,000 rows")
    assert 0.8 not in numbers_in("0.85 and 80 days")


@pytest.mark.parametrize("variant_type", VARIANT_TYPES)
def test_every_recorded_variant_passes_every_check(variant_type, good_sop, good_schema, good_context):
    edits = parse_edits(read_answer(f"sop_variant_{variant_type}"))
    assert 2 <= len(edits) <= 4
    checks = run_checks(variant_type, good_sop, good_schema, good_context, apply_edits(good_sop.text, edits))
    assert failed(checks) == []
    assert {"variant.changed", "variant.thresholds_determinable", "variant.decision_labels"} <= {c.name for c in checks}
    assert len(checks) > 5, "every type has at least one type-specific check"


def test_a_no_op_variant_is_caught(good_sop, good_schema, good_context):
    sentence = "5.3.1 The request has a refill available only when `refills_remaining` is at least 1"
    text = apply_edits(good_sop.text, parse_edits(edits_answer((sentence, sentence))))
    assert "variant.changed" in failed(run_checks("redundant_detail", good_sop, good_schema, good_context, text))


def test_a_removed_decision_label_is_caught(good_sop, good_schema, good_context):
    assert good_sop.text.count('"refer_to_prescriber"') == 2
    text = good_sop.text.replace('"refer_to_prescriber"', '"refer"') + "\nA tangent about the history of the pharmacy and its refill volume."
    checks = run_checks("tangential", good_sop, good_schema, good_context, text)
    assert failed(checks) == ["variant.decision_labels"]
    bad = next(c for c in checks if c.name == "variant.decision_labels")
    assert bad.details["missing"] == ["refill_decision = refer_to_prescriber"] and "\n" not in bad.message


def context_without_180(context_answer, edit):
    """The recorded context with the Schedule III-V validity limit no longer stated as a number."""
    return BusinessContext.parse(edit(context_answer, "Schedule III-V for 180 days", "Schedule III-V for a shorter period"),
                                 theme=THEME)


def test_a_threshold_the_context_does_not_state_cannot_be_removed(good_sop, good_schema, context_answer, edit):
    text = apply_edits(good_sop.text, parse_edits(read_answer("sop_variant_implicit_decision_points")))
    checks = run_checks("implicit_decision_points", good_sop, good_schema, context_without_180(context_answer, edit), text)
    assert failed(checks) == ["variant.thresholds_determinable"]
    lost = next(c for c in checks if c.name == "variant.thresholds_determinable")
    assert lost.details["lost"] == ["more than 180"]
    assert "'more than 180' (step 5.2.2)" in lost.message and "\n" not in lost.message


def test_implicit_variant_must_remove_a_threshold_statement_the_context_states(good_sop, good_schema, good_context,
                                                                               edit):
    # Rewording a comparison keeps the statement (field, comparator, number): not an implicit decision point.
    kept = edit(good_sop.text, "`days_supply_remaining` > 7.", "`days_supply_remaining` is more than 7.")
    assert "variant.threshold_left_to_context" in failed(
        run_checks("implicit_decision_points", good_sop, good_schema, good_context, kept))
    # Issue 16, item 7: the statement is gone although the number 7 stays in the SOP with other meanings
    # (the old check counted bare numbers, so this removal could not pass).
    moved = edit(good_sop.text, "`days_supply_remaining` > 7.", "`days_supply_remaining` exceeds a week.")
    assert " 7 " in moved or "7." in moved
    checks = run_checks("implicit_decision_points", good_sop, good_schema, good_context, moved)
    assert "variant.threshold_left_to_context" not in failed(checks)
    assert by_name(checks, "variant.threshold_left_to_context").details["moved"] == ["> 7 on `days_supply_remaining`"]


def test_tool_names_and_branching_in_exceptions_are_caught(good_sop, good_schema, good_context, edit):
    named = edit(good_sop.text, "5.1.1 Retrieve the prescription record by `prescription_id`",
                 "5.1.1 Call getPrescriptionRecord to obtain the prescription record")
    assert failed(run_checks("ambiguous_expressions", good_sop, good_schema, good_context, named)) == [
        "variant.no_tool_names"]
    branching = edit(good_sop.text, "is outside this adjudication.",
                     "is outside this adjudication. If the record is missing, ask the patient again.")
    assert failed(run_checks("exception_paths", good_sop, good_schema, good_context, branching)) == [
        "variant.no_branching_instructions"]
    assert failed(run_checks("branching", good_sop, good_schema, good_context, branching)) == []
