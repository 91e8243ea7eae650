"""The compliance stage end to end with the real templates and a scripted model answering by call key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sopforge.errors import ValidationFailed
from sopforge.funnel import Funnel
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, ReferenceProcedure, Task
from sopforge.families.sop_tools.models.instruction_manipulations import Manipulation
from sopforge.families.sop_tools.stages import compliance as stage

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"


def read_answer(name: str) -> str:
    return (ANSWERS / f"{name}.txt").read_text(encoding="utf-8")

FILES = {"RX-004550": "1", "RX-004573": "2"}
KEY = re.compile(r"/manipulations/(?P<step>instructions|dialogue|rewrite|entail)_?(?P<rest>.*)/a(?P<attempt>\d+)$")


def task(task_id: str, row: int, decision: str, **hidden) -> Task:
    return Task(task_id=task_id, row_index=row, inputs={"prescription_id": task_id}, hidden=hidden,
                expected_outputs={"refill_decision": decision}, expected_calls=[])


@pytest.fixture
def ground_truth() -> GroundTruth:
    tasks = [task("RX-004550", 2, "deny", medication_class="maintenance", days_since_last_fill=22,
                  last_fill_days_supply=30, days_supply_remaining=8, early_refill_ratio=0.73),
             task("RX-004573", 4, "refer_to_prescriber", medication_class="acute", prescription_age_days=366)]
    return GroundTruth(procedure=ReferenceProcedure(source="def run_procedure(manager, case):\n    return {}\n"),
                       id_field="prescription_id", rows_total=2, tasks=tasks, excluded=[], coverage={},
                       columns=["prescription_id", "refill_decision"], input_columns=["prescription_id"],
                       hidden_columns=[], intermediate_columns=[], output_columns=["refill_decision"])


def responder(overrides: dict[str, str | list[str]] | None = None):
    """Answer from the recorded fixtures by call key; ``overrides`` maps a key part to answers by attempt."""
    overrides = overrides or {}

    def answer(request) -> str:
        m = KEY.search(request.call_key)
        step, rest, attempt = m["step"], m["rest"], int(m["attempt"])
        name = f"{step}_{rest}" if rest else step
        if name in overrides:
            given = overrides[name]
            return given[min(attempt, len(given)) - 1] if isinstance(given, list) else given
        if step == "instructions":
            return read_answer("instruction_document")
        task_id, _, kind_cycle = rest.partition("_")
        if step == "dialogue":
            return read_answer(f"dialogue_{FILES[task_id]}")
        if step == "rewrite":
            name = f"rewrite_{FILES[task_id]}_{kind_cycle}"
            try:
                return read_answer(name)
            except FileNotFoundError:  # a cycle without its own recording: reuse the first
                return read_answer(re.sub(r"_c\d+$", "_c1", name))
        return read_answer("entail_yes" if kind_cycle == "parameter_mismatch_c1" and task_id == "RX-004550"
                           else "entail_no")

    return answer


def run(scripted, settings, good_context, good_schema, good_sop, ground_truth, slug, answers=None, **extra):
    llm, provider = scripted(responder(answers))
    funnel = Funnel()
    inputs = stage.ComplianceInputs(theme_slug=slug, context=good_context, schema=good_schema, sop=good_sop,
                                    ground_truth=ground_truth, **extra)
    result = stage.make_compliance(inputs, llm=llm, settings=settings, model="fake-1", temperature=0.0,
                                   funnel=funnel)
    return result, funnel, provider


@pytest.fixture
def go(scripted, settings, good_context, good_schema, good_sop, ground_truth, slug):
    def call(answers=None, **extra):
        return run(scripted, settings, good_context, good_schema, good_sop, ground_truth, slug, answers, **extra)
    return call


def rows(funnel: Funnel) -> dict[tuple[str, str], dict]:
    return {(r.component, r.item_type): r.model_dump(exclude={"component", "item_type"}) for r in funnel.rows()}


def test_the_recorded_answers_give_a_balanced_verified_set(go, ground_truth):
    result, funnel, provider = go()
    assert result.document.tree.statements()["do.c7.c1.c1.a2"] == "Record the outcome deny"
    assert [d.section_id for d in result.dialogues] == ["do.c3", "do.c7.c1.c1"] or \
        [d.section_id for d in result.dialogues] == ["do.c7.c1.c1", "do.c3"]
    labels = [i.label for i in result.items]
    assert labels.count("compliant") == labels.count("violating") == 6
    by_pair: dict[str, list] = {}
    for item in result.items:
        by_pair.setdefault(item.pair_id, []).append(item)
    for twins in by_pair.values():
        compliant, violating = sorted(twins, key=lambda i: i.label)
        assert (compliant.prefix, compliant.policy) == (violating.prefix, violating.policy)
        assert compliant.response != violating.response
        assert len(violating.changed_ids) == 1 and violating.changed_ids[0].startswith(violating.section_id)
        assert violating.diff.startswith("--- original\n+++ manipulated")
        assert violating.policy != violating.manipulated_policy
    retried = by_pair["RX-004550:parameter_mismatch"][0]
    assert retried.retries == 1 and retried.seed == 1
    # The threshold moved across the case's own ratio, so the violating response really changes the outcome.
    old, new = (float(re.search(r"ratio is below (\d\.\d+)", p).group(1))
                for p in (retried.policy, retried.manipulated_policy))
    task = next(t for t in ground_truth.tasks if t.task_id == "RX-004550")
    ratio = {**task.inputs, **task.hidden, **task.expected_outputs}["early_refill_ratio"]
    assert (ratio < old) != (ratio < new), (ratio, old, new)
    assert {c.name: c.passed for c in result.checks}["compliance.balanced"]
    assert rows(funnel)[("compliance_pair", "parameter_mismatch")] == {
        "generated": 2, "verified": 2, "retried": 1, "dropped": 0, "kept": 2}
    assert rows(funnel)[("dialogue", "dialogue")]["kept"] == 2
    assert rows(funnel)[("instruction_document", "f1")]["kept"] == 1
    keys = [r.call_key for r in provider.requests]
    slug = "pharmacy-prescription-refills"
    assert keys[0] == f"{slug}/manipulations/instructions/a1"
    assert f"{slug}/manipulations/rewrite_RX-004550_parameter_mismatch_c2/a1" in keys
    assert f"{slug}/manipulations/entail_RX-004573_multi_condition_replacement_c1/a1" in keys
    assert len(result.raw_texts) == len(provider.requests) and result.attempts == 1


def test_each_prompt_carries_its_distinctive_tag(go):
    _, _, provider = go()
    prompts = {KEY.search(r.call_key)["step"]: r.messages[0].content for r in provider.requests}
    assert "<What_to_do>" in prompts["instructions"] and "refill_decision: approve | refer_to_prescriber | deny" \
        in prompts["instructions"]
    assert "<followed>" in prompts["dialogue"] and "[do.c7.c1.c1.a2]       - Record the outcome deny" \
        in prompts["dialogue"]
    assert "<manipulated_instruction>" in prompts["rewrite"] and "<entails>" in prompts["entail"]
    retry = next(r for r in provider.requests if "parameter_mismatch_c2" in r.call_key and "rewrite" in r.call_key)
    assert "still entails the compliant response" in retry.messages[0].content


def test_the_rewrite_prompt_shows_the_whole_document_not_only_the_changed_section(go):
    """Issue 16, item 7: the right rewrite can depend on a branch outside the section (what applies
    once the changed condition no longer does), so both whole documents are shown, with ids."""
    _, _, provider = go()
    request = next(r for r in provider.requests if "rewrite_RX-004573_parameter_mismatch_c1" in r.call_key)
    prompt = request.messages[0].content
    original = prompt.split("<original_document>\n")[1].split("\n</original_document>")[0]
    manipulated = prompt.split("<manipulated_document>\n")[1].split("\n</manipulated_document>")[0]
    section = prompt.split("<original_instruction>\n")[1].split("\n</original_instruction>")[0]
    changed = prompt.split("only statement ")[1].split(" differs")[0]
    # Outside the section: the other branches and the approval at the end of the document.
    assert "Record the outcome approve and queue the refill for pickup" in original
    assert "Record the outcome approve and queue the refill for pickup" not in section
    assert [line for line in original.splitlines() if line not in manipulated.splitlines()] == [
        line for line in original.splitlines() if line.startswith(f"[{changed}] ")]


def test_a_verifier_that_always_says_entails_retries_then_drops(go):
    always_yes = {f"entail_RX-004573_{k}_c{c}": read_answer("entail_yes") for k in stage.KINDS for c in (1, 2, 3)}
    result, funnel, _ = go(always_yes)
    assert {i.task_id for i in result.items} == {"RX-004550"}
    row = rows(funnel)[("compliance_pair", "single_condition_replacement")]
    assert row == {"generated": 2, "verified": 1, "retried": 1, "dropped": 1, "kept": 1}
    [drop] = [d for d in funnel.drops if d.item == "RX-004573:single_condition_replacement"]
    assert drop.reason.startswith("after 3 cycle(s): the rewrite still entails")


def test_an_unparsable_verifier_reply_is_re_asked_then_the_pair_is_dropped(go, settings):
    garbled = {"entail_RX-004573_multi_condition_replacement_c1": "I think they are similar."}
    result, funnel, provider = go(garbled)
    asked = [r for r in provider.requests if "entail_RX-004573_multi_condition_replacement_c1" in r.call_key]
    assert len(asked) == settings.max_attempts == 3
    assert "- manipulations.parse: missing <entails>…</entails> block" in asked[1].messages[-1].content
    [drop] = [d for d in funnel.drops if d.item == "RX-004573:multi_condition_replacement"]
    assert drop.reason.startswith("unparsable answer, pair dropped: manipulations: check manipulations.parse")
    assert len(result.items) == 10
    # Parsable on the second attempt: kept, with the re-ask costing no manipulation cycle.
    recovered = {"entail_RX-004573_multi_condition_replacement_c1": ["no idea", read_answer("entail_no")]}
    result, funnel, _ = go(recovered)
    assert len(result.items) == 12 and not funnel.drops


def test_a_rewrite_given_away_by_style_starts_a_new_cycle(go):
    shouting = {"rewrite_RX-004573_parameter_mismatch_c1": "<response>GOOD NEWS, THIS PRESCRIPTION IS STILL VALID "
                                                           "AND CAN BE REFILLED TODAY.</response>"}
    result, funnel, provider = go(shouting)
    pair = [i for i in result.items if i.pair_id == "RX-004573:parameter_mismatch"]
    assert len(pair) == 2 and pair[1].retries == 1
    retry = next(r for r in provider.requests if "rewrite_RX-004573_parameter_mismatch_c2" in r.call_key)
    assert "style check: casing differs" in retry.messages[0].content


def test_a_manipulation_that_changes_nothing_is_rejected_and_counted(go, monkeypatch):
    real = stage.manipulate

    def broken(tree, kind, seed, within=None, case_values=None):
        result = real(tree, kind, seed, within=within, case_values=case_values)
        if kind == "single_condition_replacement":
            return Manipulation(kind, tree.model_copy(deep=True), result.target_id, result.before, result.before, seed)
        return result

    monkeypatch.setattr(stage, "manipulate", broken)
    result, funnel, _ = go()
    assert not [i for i in result.items if i.manipulation_type == "single_condition_replacement"]
    reasons = [d.reason for d in funnel.drops if d.item_type == "single_condition_replacement"]
    assert reasons == ["manipulation rejected: the manipulation changed nothing"] * 2
    assert {c.name: c.passed for c in result.checks}["compliance.balanced"]


def test_an_ineligible_operator_is_counted_not_crashed(go):
    # Followed actions at the top level of do.c7 make the section do.c7; followed "do.c4.a1" alone gives a
    # section with no number, so parameter mismatch is ineligible there.
    no_number = read_answer("dialogue_2").replace("do.c3.a1, do.c3.a2", "do.c4.a1, do.c4.a2").replace(
        "so it has expired and can't be refilled", "and there are no refills left on it")
    result, funnel, _ = go({"dialogue_RX-004573": no_number})
    [drop] = [d for d in funnel.drops if d.item == "RX-004573:parameter_mismatch"]
    assert drop.reason == "ineligible: no statement compares with a number in section do.c4"


def test_a_dialogue_without_an_enclosing_section_is_excluded(go):
    top_level = read_answer("dialogue_2").replace("do.c3.a1, do.c3.a2", "do.a2")
    result, funnel, _ = go({"dialogue_RX-004573": top_level})
    assert [d.task_id for d in result.dialogues] == ["RX-004550"]
    [drop] = [d for d in funnel.drops if d.component == "dialogue"]
    assert drop.reason.startswith("excluded: the followed actions do.a2 share no enclosing If block")


def test_a_dialogue_contradicting_the_outcome_is_re_asked_then_dropped(go):
    wrong = read_answer("dialogue_2").replace("do.c3.a1, do.c3.a2", "do.c7.c3.a1")
    result, funnel, provider = go({"dialogue_RX-004573": wrong})
    asked = [r for r in provider.requests if "dialogue_RX-004573" in r.call_key]
    assert len(asked) == 3 and "dialogue.outcome_consistent" in asked[1].messages[-1].content
    assert rows(funnel)[("dialogue", "dialogue")] == {"generated": 2, "verified": 1, "retried": 1, "dropped": 1,
                                                      "kept": 1}


def test_an_instruction_document_that_never_passes_fails_the_stage(go):
    no_deny = read_answer("instruction_document").replace("Record the outcome deny", "Refuse the refill")
    with pytest.raises(ValidationFailed, match="instructions.outcomes_covered"):
        go({"instructions": no_deny})


def test_sampling_covers_outcomes_first_and_is_seeded(ground_truth):
    tasks = ground_truth.tasks + [task(f"RX-9{i}", 10 + i, "deny") for i in range(5)]
    picked = stage.sample_tasks(tasks, "refill_decision", 2, seed=0)
    assert {t.expected_outputs["refill_decision"] for t in picked} == {"deny", "refer_to_prescriber"}
    assert stage.sample_tasks(tasks, "refill_decision", 2, seed=0) == picked
    assert len(stage.sample_tasks(tasks, "refill_decision", 50, seed=3)) == len(tasks)
    assert stage.safe_id("RX 45/7") == "RX-45-7"
