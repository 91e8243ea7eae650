"""SOP variants step: generate → structural checks → judge, cycles, drops and the funnel, with a scripted model.

The scripted model answers by call key, so each test states exactly which calls it expects; a call
the test did not foresee fails with the key in the message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.prompts import default_registry
from sopforge.context.model import BusinessContext
from sopforge.funnel import Funnel
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, ReferenceProcedure
from sopforge.families.sop_tools.models.sop_variants import parse_edits
from sopforge.families.sop_tools.stages import sop_variants as stage
from sopforge.families.sop_tools.stages.sop_variants import CYCLE_FEEDBACK_LEAD, VariantInputs, make_variants
from sopforge.families.sop_tools.options import VARIANT_TYPES

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
TOOLS = ["calculateEarlyRefillRatio", "calculatePrescriptionAge", "checkInsuranceEligibility",
         "determineBlockingReason", "getInteractionAlerts", "getPrescriptionRecord", "verifyPrescriberLicense"]
P = "pharmacy-prescription-refills/manipulations/"
KEEPS = (ANSWERS / "sop_variant_judge_keeps.txt").read_text(encoding="utf-8")
CHANGES = ("<assessment>blocking_reason: the variant drops the precedence order.</assessment>\n"
           "<verdict>changes_ground_truth</verdict>\n<reason>The precedence order of 5.6.1 is gone, so a request "
           "failing two checks can get either reason.</reason>\n<undeterminable>blocking_reason</undeterminable>")


def variant_answer(variant_type: str) -> str:
    return (ANSWERS / f"sop_variant_{variant_type}.txt").read_text(encoding="utf-8")


def routed(answers: dict[str, str]):
    """A responder answering each call key from ``answers``; an unexpected key fails the test."""
    def respond(request) -> str:
        assert request.call_key in answers, f"unexpected call {request.call_key}"
        return answers[request.call_key]
    return respond


@pytest.fixture
def ground_truth(good_schema) -> GroundTruth:
    obtained = [f.name for f in good_schema.to_be_obtained]
    return GroundTruth(procedure=ReferenceProcedure(source="def run_procedure(manager, case):\n    return {}\n"),
                       id_field="prescription_id", rows_total=0, tasks=[], excluded=[], coverage={},
                       columns=good_schema.names, input_columns=[f.name for f in good_schema.existing],
                       hidden_columns=[], intermediate_columns=[n for n in obtained if n != "refill_decision"],
                       output_columns=["refill_decision"])


@pytest.fixture
def inputs(slug, good_context, good_schema, good_sop, ground_truth):
    def make(*types: str, **extra) -> VariantInputs:
        return VariantInputs(theme_slug=slug, context=extra.pop("context", good_context), schema=good_schema,
                             sop=good_sop, tool_names=TOOLS, ground_truth=ground_truth, variant_types=list(types),
                             **extra)
    return make


@pytest.fixture
def run(scripted, settings):
    """``run(inputs, answers) -> (result, funnel, provider)``."""
    def go(variant_inputs: VariantInputs, answers: dict[str, str]):
        llm, provider = scripted(routed(answers))
        funnel = Funnel()
        result = make_variants(variant_inputs, llm=llm, settings=settings, model="fake-1", temperature=0.4,
                               registry=default_registry(settings), funnel=funnel)
        return result, funnel, provider
    return go


def funnel_counts(funnel: Funnel) -> dict[str, tuple[int, int, int, int, int]]:
    return {r.item_type: (r.generated, r.verified, r.retried, r.dropped, r.kept) for r in funnel.rows()}


# --- kept variants -------------------------------------------------------------------------------

def test_implicit_and_redundant_variants_are_kept_with_diff_edits_and_verdict(run, inputs, good_sop):
    answers = {P + "variant_implicit_decision_points_c1/a1": variant_answer("implicit_decision_points"),
               P + "judge_implicit_decision_points_c1/a1": KEEPS,
               P + "variant_redundant_detail_c1/a1": variant_answer("redundant_detail"),
               P + "judge_redundant_detail_c1/a1": KEEPS}
    result, funnel, provider = run(inputs("implicit_decision_points", "redundant_detail"), answers)

    implicit, redundant = result.variants
    assert (implicit.variant_type, implicit.paper, implicit.cycles) == ("implicit_decision_points", "teller", 1)
    assert (redundant.variant_type, redundant.paper, redundant.filename) == ("redundant_detail", "sop_bench",
                                                                            "sop_redundant_detail.txt")
    for number in ("more than 180", "more than 365", "< 0.80", "< 0.85"):
        assert number in good_sop.text and number not in implicit.text
    assert "365 days" not in implicit.text and "0.85" not in implicit.text
    assert implicit.diff.startswith("--- sop.txt\n+++ sop_implicit_decision_points.txt\n")
    assert "-The request is too early when" not in implicit.diff  # steps share a line with their number
    assert "+5.4.2 The request is too early when `early_refill_ratio` falls short" in implicit.diff
    assert len(implicit.edits) == 4 and implicit.summary.startswith("The validity limits")
    assert implicit.verdict.keeps_ground_truth and all(c.passed for c in implicit.checks)
    assert "variant.threshold_left_to_context" in {c.name for c in implicit.checks}
    assert len(redundant.text) > len(good_sop.text)

    assert [r.call_key for r in provider.requests] == [k + "" for k in answers]
    assert result.attempts == 4 and result.raw_texts == list(answers.values())
    assert funnel_counts(funnel) == {"implicit_decision_points": (1, 1, 0, 0, 1), "redundant_detail": (1, 1, 0, 0, 1)}
    assert [(c.name, c.passed, c.severity) for c in result.checks] == [("variants.kept", True, "warning")]

    teller_prompt, judge_prompt, sop_bench_prompt = (provider.requests[i].messages[0].content for i in (0, 1, 2))
    assert "<edits>" in teller_prompt and "<verdict>" not in teller_prompt
    assert "The abstraction technique to apply: implicit_decision_points" in teller_prompt
    assert "step 5.2.2: more than 180 (the business context states this number)" in teller_prompt
    assert "getPrescriptionRecord" in teller_prompt
    assert '`refill_decision`: one of "approve", "refer_to_prescriber", "deny"' in teller_prompt
    assert "<verdict>" in judge_prompt and "<edits>" not in judge_prompt
    assert "+++ sop_implicit_decision_points.txt" in judge_prompt and implicit.text in judge_prompt
    assert "`blocking_reason` (enum [no_block |" in judge_prompt
    assert "The kind of complexity to inject: redundant_detail" in sop_bench_prompt
    assert "Restate facts the SOP already gives" in sop_bench_prompt and "tool_names" not in sop_bench_prompt
    assert provider.requests[1].temperature == 0.0 and provider.requests[0].temperature == 0.4


@pytest.mark.parametrize("variant_type", VARIANT_TYPES)
def test_every_recorded_variant_is_kept_first_time(run, inputs, variant_type):
    answers = {P + f"variant_{variant_type}_c1/a1": variant_answer(variant_type),
               P + f"judge_{variant_type}_c1/a1": KEEPS}
    result, funnel, _ = run(inputs(variant_type), answers)
    assert [v.variant_type for v in result.variants] == [variant_type]
    assert funnel_counts(funnel) == {variant_type: (1, 1, 0, 0, 1)}


# --- structural failures start a new cycle --------------------------------------------------------

def test_a_no_op_variant_is_caught_and_regenerated_with_the_reason(run, inputs):
    sentence = "5.3.1 The request has a refill available only when `refills_remaining` is at least 1"
    no_op = f"<variant_summary>Nothing.</variant_summary><edits><edit><find>{sentence}</find><replace>{sentence}</replace></edit></edits>"
    answers = {P + "variant_tangential_c1/a1": no_op,
               P + "variant_tangential_c2/a1": variant_answer("tangential"),
               P + "judge_tangential_c2/a1": KEEPS}
    result, funnel, provider = run(inputs("tangential"), answers)
    assert result.variants[0].cycles == 2
    assert funnel_counts(funnel) == {"tangential": (1, 1, 1, 0, 1)}
    second = provider.requests[1].messages[0].content
    assert f"{CYCLE_FEEDBACK_LEAD}\n- variant.changed: the edits leave the SOP unchanged" in second
    assert CYCLE_FEEDBACK_LEAD not in provider.requests[0].messages[0].content


def test_a_variant_removing_a_decision_label_is_caught(run, inputs):
    drop_label = variant_answer("redundant_detail").replace(
        '<replace>The `refill_decision` takes exactly one of the values "approve", "refer_to_prescriber" or "deny"',
        '<replace>The `refill_decision` takes exactly one of the values "approve", "refer" or "deny"')
    assert drop_label != variant_answer("redundant_detail")
    drop_label = drop_label.replace(
        "</edits>", '<edit><find>to "refer_to_prescriber" when</find><replace>to "refer" when</replace></edit></edits>')
    answers = {P + f"variant_redundant_detail_c{c}/a1": drop_label for c in (1, 2, 3)}
    result, funnel, provider = run(inputs("redundant_detail"), answers)
    assert result.variants == [] and len(provider.requests) == 3, "never judged: the structural check failed"
    [drop] = funnel.drops
    assert drop.item == "redundant_detail" and "variant.decision_labels" in drop.reason
    assert "refill_decision = refer_to_prescriber" in drop.reason and drop.reason.startswith("rejected in all 3 cycles")
    assert funnel_counts(funnel) == {"redundant_detail": (1, 0, 1, 1, 0)}
    kept = result.checks[0]
    assert (kept.name, kept.passed, kept.severity) == ("variants.kept", False, "warning")
    assert kept.message.startswith("0 of 1 SOP variant types kept; dropped: redundant_detail (rejected in all 3")


def test_an_implicit_variant_removing_a_threshold_the_context_lacks_is_caught(run, inputs, context_answer, edit):
    context = BusinessContext.parse(edit(context_answer, "Schedule III-V for 180 days",
                                         "Schedule III-V for a shorter period"), theme="pharmacy prescription refills")
    keeps_180 = variant_answer("implicit_decision_points")
    for old, new in [("with a shorter period for controlled Schedule III-V medications than for non-controlled ones",
                      "which for Schedule III-V medications is 180 days"),
                     ('For "schedule_iii_v", "maintenance" and "acute", assess',
                      'When `medication_class` is "schedule_iii_v", the prescription is expired if '
                      '`prescription_age_days` is more than 180. For "maintenance" and "acute", assess')]:
        keeps_180 = edit(keeps_180, old, new)
    answers = {P + "variant_implicit_decision_points_c1/a1": variant_answer("implicit_decision_points"),
               P + "variant_implicit_decision_points_c2/a1": keeps_180,
               P + "judge_implicit_decision_points_c2/a1": KEEPS}
    result, funnel, provider = run(inputs("implicit_decision_points", context=context), answers)
    first, second = (r.messages[0].content for r in provider.requests[:2])
    assert "step 5.2.2: more than 180 (not in the business context: the number must stay in the SOP)" in first
    assert ("- variant.thresholds_determinable: thresholds neither in the variant nor stated in the business "
            "context: 'more than 180' (step 5.2.2); keep these numbers in the SOP") in second
    [variant] = result.variants
    assert variant.cycles == 2 and "more than 180" in variant.text and "more than 365" not in variant.text
    assert funnel_counts(funnel) == {"implicit_decision_points": (1, 1, 1, 0, 1)}


# --- the judge ------------------------------------------------------------------------------------

def test_a_judge_saying_changes_ground_truth_is_retried_then_dropped_and_counted(run, inputs, settings):
    answers = {P + "variant_ambiguity_c1/a1": variant_answer("ambiguity"), P + "judge_ambiguity_c1/a1": CHANGES,
               P + "variant_ambiguity_c2/a1": variant_answer("ambiguity"), P + "judge_ambiguity_c2/a1": CHANGES,
               P + "variant_branching_c1/a1": variant_answer("branching"), P + "judge_branching_c1/a1": KEEPS}
    result, funnel, provider = run(inputs("ambiguity", "branching", max_retries=1), answers)
    assert [v.variant_type for v in result.variants] == ["branching"]
    assert [r.call_key for r in provider.requests] == list(answers)
    feedback = provider.requests[2].messages[0].content
    assert ("- variant.judge: the verifier found the variant changes the ground truth (undeterminable: "
            "blocking_reason): The precedence order of 5.6.1 is gone") in feedback
    assert funnel_counts(funnel) == {"ambiguity": (1, 0, 1, 1, 0), "branching": (1, 1, 0, 0, 1)}
    [drop] = funnel.drops
    assert drop.item == "ambiguity" and drop.reason.startswith("rejected in all 2 cycles; last: variant.judge")
    assert not result.checks[0].passed and result.checks[0].details["dropped"].keys() == {"ambiguity"}
    assert result.attempts == 6


def test_an_unparsable_judge_reply_is_re_asked(run, inputs):
    answers = {P + "variant_exception_paths_c1/a1": variant_answer("exception_paths"),
               P + "judge_exception_paths_c1/a1": "Looks good to me, the variant keeps everything.",
               P + "judge_exception_paths_c1/a2": KEEPS}
    result, funnel, provider = run(inputs("exception_paths"), answers)
    assert result.variants[0].cycles == 1 and result.variants[0].verdict.keeps_ground_truth
    reask = provider.requests[2].messages
    assert [m.role for m in reask] == ["user", "assistant", "user"]
    assert "manipulations.parse: missing <verdict>…</verdict> block" in reask[2].content
    assert funnel_counts(funnel) == {"exception_paths": (1, 1, 0, 0, 1)}


def test_a_judge_never_parsable_drops_the_variant_and_the_stage_continues(run, inputs, settings):
    answers = {P + "variant_exception_paths_c1/a1": variant_answer("exception_paths"),
               **{P + f"judge_exception_paths_c1/a{n}": "<verdict>fine</verdict>" for n in range(1, settings.max_attempts + 1)},
               P + "variant_tangential_c1/a1": variant_answer("tangential"),
               P + "judge_tangential_c1/a1": KEEPS}
    result, funnel, provider = run(inputs("exception_paths", "tangential"), answers)
    assert [v.variant_type for v in result.variants] == ["tangential"]
    judge_keys = [r.call_key for r in provider.requests if "/judge_exception_paths_" in r.call_key]
    assert judge_keys == [P + f"judge_exception_paths_c1/a{n}" for n in range(1, settings.max_attempts + 1)]
    assert len(provider.requests) == 1 + settings.max_attempts + 2, "no second cycle for an unreadable judge"
    [drop] = funnel.drops
    assert (drop.item, drop.reason) == ("exception_paths", "judge reply unparsable")
    assert funnel_counts(funnel) == {"exception_paths": (1, 0, 0, 1, 0), "tangential": (1, 1, 0, 0, 1)}
    assert "exception_paths (judge reply unparsable)" in result.checks[0].message
    assert len(result.raw_texts) == result.attempts == len(provider.requests)


# --- generator format errors ------------------------------------------------------------------------

def test_a_find_not_in_the_sop_is_re_asked_in_the_same_cycle(run, inputs):
    bad = variant_answer("ambiguous_expressions").replace("5.1.1 Retrieve the prescription record by",
                                                          "5.1.1 Retrieve the patient record by")
    answers = {P + "variant_ambiguous_expressions_c1/a1": bad,
               P + "variant_ambiguous_expressions_c1/a2": variant_answer("ambiguous_expressions"),
               P + "judge_ambiguous_expressions_c1/a1": KEEPS}
    result, funnel, provider = run(inputs("ambiguous_expressions"), answers)
    assert result.variants[0].cycles == 1
    reask = provider.requests[1].messages[-1].content
    assert reask.startswith("Your answer could not be accepted:\n- manipulations.parse: edit 1: <find> "
                            "'5.1.1 Retrieve the patient record by")
    assert "is not in the SOP" in reask
    assert funnel_counts(funnel) == {"ambiguous_expressions": (1, 1, 0, 0, 1)}


def test_a_generator_never_parsable_drops_the_type(run, inputs, settings):
    answers = {P + f"variant_branching_c1/a{n}": "I would add some branches." for n in range(1, settings.max_attempts + 1)}
    result, funnel, _ = run(inputs("branching"), answers)
    assert result.variants == []
    [drop] = funnel.drops
    assert drop.reason.startswith("generator reply unparsable: manipulations: check manipulations.parse failed")


def test_unknown_variant_types_are_refused(inputs):
    with pytest.raises(ValueError, match="unknown SOP variant type 'shouting'"):
        inputs("branching", "shouting")


def test_template_ids_exist_and_generators_differ_from_the_judge(settings):
    registry = default_registry(settings)
    for template_id in stage.TEMPLATE_IDS:
        assert registry.get(template_id).header.output.format.startswith("docs/hardening/sop_variants.md")
    assert parse_edits(variant_answer("branching"))  # the fixtures are in the documented format
