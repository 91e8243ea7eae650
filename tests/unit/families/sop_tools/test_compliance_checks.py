"""TOD-ProcBench compliance pieces in code: parsers, section extraction, manipulation guard, style parity."""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.compliance import (
    ComplianceItem, Turn, parse_dialogue, parse_entailment, parse_instruction_document, parse_rewrite,
)
from sopforge.families.sop_tools.models.instruction_manipulations import Manipulation, manipulate
from sopforge.families.sop_tools.models.instructions import (
    enclosing_block, parse_f1, render_block, render_f1_with_ids, subtree_ids,
)
from sopforge.families.sop_tools.verify.compliance_checks import (
    balance_check, check_dialogue, check_instruction_document, label_mentions, length_parity_check,
    manipulation_problem, style_check, style_problems,
)

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
LABELS = ["approve", "refer_to_prescriber", "deny"]
KINDS = ["parameter_mismatch", "single_condition_replacement", "multi_condition_replacement"]


def answer(name: str) -> str:
    return (ANSWERS / f"{name}.txt").read_text(encoding="utf-8")


@pytest.fixture
def doc():
    return parse_instruction_document(answer("instruction_document"), intent="refill")


# --- instruction document ---------------------------------------------------------------------

def test_the_recorded_f1_answer_parses_and_flattens(doc):
    statements = doc.tree.statements()
    assert statements["do.c7.c1.c1"] == "the medication is maintenance or acute and the ratio is below 0.80"
    assert statements["do.c7.c1.c1.a2"] == "Record the outcome deny"
    assert "If none of the checks above applies AND more than 7 days of medication are left AND " \
           "the medication is maintenance or acute and the ratio is below 0.80:\n" in doc.f2
    assert doc.f3[0] == {"conditions": [], "actions": [statements["do.a1"], statements["do.a2"], statements["do.a3"]]}
    assert doc.what_to_say.startswith("- Ask for the prescription number")
    assert all(check.passed for check in check_instruction_document(doc.tree, LABELS))
    record = doc.to_record("pharmacy/instructions")
    assert record["json_what_to_do"] == doc.f3 and record["statements"]["do.c3.a1"].startswith("Tell")


def test_tags_are_case_insensitive_and_a_uniformly_indented_block_is_dedented():
    raw = "<what_to_do>\n    If a is 1:\n      - do x\n    - do y\n</what_to_do>\n<WHAT_TO_SAY>- hi</WHAT_TO_SAY>"
    doc = parse_instruction_document(raw, intent="t")
    assert doc.tree.statements() == {"do.c1": "a is 1", "do.c1.a1": "do x", "do.a1": "do y"}


@pytest.mark.parametrize("raw, message", [
    ("<What_to_say>- hi</What_to_say>", "missing <What_to_do>"),
    ("<What_to_do>\nIf a:\n  - x\n</What_to_do><What_to_say></What_to_say>", "<What_to_say> is empty"),
    ("<What_to_do>\nIf a:\n  1. x\n</What_to_do><What_to_say>- hi</What_to_say>", "f1 line 2"),
])
def test_bad_documents_are_parse_errors(raw, message):
    with pytest.raises(ParseError, match=message):
        parse_instruction_document(raw, intent="t")


def test_document_checks_name_the_missing_outcome_and_the_shape_problems(doc):
    no_approve = answer("instruction_document").replace("Record the outcome approve and queue", "Queue")
    checks = {c.name: c for c in check_instruction_document(
        parse_instruction_document(no_approve, intent="t").tree, LABELS)}
    assert not checks["instructions.outcomes_covered"].passed
    assert checks["instructions.outcomes_covered"].details["missing"] == ["approve"]
    flat = parse_f1("If a:\n  - Record the outcome approve, deny or refer to prescriber")
    assert not {c.name: c for c in check_instruction_document(flat, LABELS)}["instructions.branches"].passed
    deep = parse_f1("If a:\n  If b:\n    If c:\n      If d:\n        If e:\n          - x\nIf f:\n  - y")
    assert not {c.name: c for c in check_instruction_document(deep, [])}["instructions.depth"].passed


def test_label_mentions_accepts_spaces_for_underscores_and_needs_whole_words():
    assert label_mentions("Refer to prescriber for renewal", LABELS) == ["refer_to_prescriber"]
    assert label_mentions("Record the outcome `deny`", LABELS) == ["deny"]
    assert label_mentions("The prescriber approved it", LABELS) == []


# --- dialogue ---------------------------------------------------------------------------------

def test_the_recorded_dialogue_parses_and_passes(doc):
    dialogue = parse_dialogue(answer("dialogue_1"), task_id="RX-004550")
    assert [t.role for t in dialogue.turns] == ["customer", "agent"] * 3
    assert dialogue.followed == ["do.c7.c1.c1.a1", "do.c7.c1.c1.a2"]
    assert dialogue.response.startswith("sorry, it's too early") and len(dialogue.prefix) == 5
    assert all(c.passed for c in check_dialogue(dialogue, doc.tree, LABELS, "deny"))


def failing(dialogue, doc, expected="deny"):
    return sorted(c.name for c in check_dialogue(dialogue, doc.tree, LABELS, expected) if not c.passed)


def test_dialogue_checks_catch_shape_unknown_ids_and_a_contradicting_outcome(doc):
    good = answer("dialogue_1")
    ends_with_customer = good.replace("</dialogue>", "customer: ok thanks\n</dialogue>")
    assert failing(parse_dialogue(ends_with_customer, task_id="t"), doc) == ["dialogue.ends_with_agent"]
    unknown = good.replace("do.c7.c1.c1.a2", "do.c9.a1")
    assert failing(parse_dialogue(unknown, task_id="t"), doc) == ["dialogue.followed_known"]
    other_outcome = good.replace("do.c7.c1.c1.a1, do.c7.c1.c1.a2", "do.c7.c3.a1")
    assert failing(parse_dialogue(other_outcome, task_id="t"), doc) == ["dialogue.outcome_consistent"]
    short = "<dialogue>\ncustomer: refill please\nagent: no\n</dialogue><followed>do.c7.c1.c1.a2</followed>"
    assert failing(parse_dialogue(short, task_id="t"), doc) == ["dialogue.turn_count"]
    monologue = ("<dialogue>\ncustomer: hi\nagent: a\nagent: b\nagent: c\ncustomer: ok\nagent: done\n</dialogue>"
                 "<followed>do.c7.c1.c1.a2</followed>")
    assert failing(parse_dialogue(monologue, task_id="t"), doc) == ["dialogue.alternation"]


@pytest.mark.parametrize("raw, message", [
    ("<dialogue>\nagent: hi\nsystem: log\n</dialogue><followed>do.a1</followed>", "dialogue line 2"),
    ("<dialogue>\nagent: hi\n</dialogue><followed></followed>", "<followed> must list"),
    ("<dialogue>\nagent: hi\n</dialogue><followed>the first one</followed>", "<followed> must list"),
    ("<dialogue>\nagent: hi\n</dialogue>", "missing <followed>"),
])
def test_bad_dialogues_are_parse_errors(raw, message):
    with pytest.raises(ParseError, match=message):
        parse_dialogue(raw, task_id="t")


# --- section extraction -----------------------------------------------------------------------

def test_the_section_is_the_innermost_if_block_around_the_followed_actions(doc):
    assert enclosing_block(doc.tree, ["do.c7.c1.c1.a1", "do.c7.c1.c1.a2"]).id == "do.c7.c1.c1"
    assert enclosing_block(doc.tree, ["do.c7.c1.c1.a1", "do.c7.c2.a1"]).id == "do.c7"
    assert enclosing_block(doc.tree, ["do.c3.a1", "do.c7.c2.a1"]) is None, "no common condition"
    assert enclosing_block(doc.tree, ["do.a1"]) is None, "a top-level action has no condition"
    assert enclosing_block(doc.tree, ["do.c99.a1"]) is None
    section = enclosing_block(doc.tree, ["do.c3.a2"])
    assert render_block(section) == (
        "If the medication is maintenance or acute and the prescription was written more than 365 days ago:\n"
        "  - Tell the customer the prescription has expired\n"
        "  - Record the outcome refer_to_prescriber and offer to request a renewal from the prescriber")
    assert subtree_ids(section) == {"do.c3", "do.c3.a1", "do.c3.a2"}


def test_an_else_section_renders_as_a_standalone_if():
    tree = parse_f1("If a:\n  - x\nElse:\n  - y\n  - z")
    block = enclosing_block(tree, ["do.c2.a1", "do.c2.a2"])
    assert render_block(block) == "If NOT (a):\n  - y\n  - z"
    assert parse_f1(render_block(block)).statements()["do.c1"] == "NOT (a)"


def test_ids_are_shown_on_every_line(doc):
    lines = render_f1_with_ids(doc.tree).splitlines()
    assert lines[3] == "[do.c1] If the medication is Schedule II:"
    assert "[do.c7.c1.c1.a2]       - Record the outcome deny" in lines


# --- manipulation restricted to the section and verified -------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("section_id", ["do.c7.c1.c1", "do.c3", "do.c7"])
def test_each_operator_changes_exactly_one_statement_inside_the_section(doc, kind, section_id):
    section = enclosing_block(doc.tree, [f"{section_id}.a1"])
    within = subtree_ids(section)
    for seed in range(10):
        result = manipulate(doc.tree, kind, seed, within=within)
        assert result.target_id in within
        assert manipulation_problem(doc.tree, result, within) is None
        assert manipulate(doc.tree, kind, seed).target_id in doc.tree.statements()


def test_a_manipulation_that_changes_nothing_or_another_statement_is_rejected(doc):
    within = subtree_ids(enclosing_block(doc.tree, ["do.c3.a1"]))
    nothing = Manipulation("parameter_mismatch", doc.tree.model_copy(deep=True), "do.c3", "x", "x", 0)
    assert manipulation_problem(doc.tree, nothing, within) == "the manipulation changed nothing"
    real = manipulate(doc.tree, "single_condition_replacement", 0, within=within)
    mislabelled = Manipulation(real.type, real.tree, "do.c3.a1" if real.target_id != "do.c3.a1" else "do.c3.a2",
                               real.before, real.after, 0)
    assert "instead of exactly its target" in manipulation_problem(doc.tree, mislabelled, within)
    outside = manipulate(doc.tree, "parameter_mismatch", 0, within={"do.c2"})
    assert "outside the extracted section" in manipulation_problem(doc.tree, outside, within)


# --- rewrite, verifier, style -----------------------------------------------------------------

def test_rewrite_and_verdict_parsers():
    assert parse_rewrite('<response>agent:  ok,  done </response>') == "ok, done"
    with pytest.raises(ParseError, match="more than one turn"):
        parse_rewrite("<response>ok\ncustomer: thanks</response>")
    assert parse_entailment(answer("entail_no"))[0] is False
    assert parse_entailment("<reason>same</reason><ENTAILS> Yes. </ENTAILS>") == (True, "same")
    for bad in ("<entails>maybe</entails><reason>r</reason>", "<reason>r</reason>", "yes"):
        with pytest.raises(ParseError):
            parse_entailment(bad)


COMPLIANT = "sorry, it's too early to refill this one. you still have 8 days left, so check back on april 19."


@pytest.mark.parametrize("violating, problem", [
    (COMPLIANT.upper(), "casing differs"),
    ("Sorry, it's too early to refill this one. you still have 8 days left, so check back on april 20.",
     "first letter"),
    (COMPLIANT.replace("check back on april 19.", "check back on april 19, and in the meantime please keep taking "
                                                   "your current supply as directed by your prescriber."), "length"),
    ("sorry, too early.", "length"),
    (COMPLIANT, "identical"),
])
def test_style_check_rejects_rewrites_told_apart_by_surface(violating, problem):
    problems = style_problems(COMPLIANT, violating)
    assert any(problem in p for p in problems), problems
    assert not style_check(COMPLIANT, violating).passed


def test_style_check_accepts_a_minimal_rewrite():
    assert style_check(COMPLIANT, COMPLIANT.replace("8 days", "3 days")).passed


def item(pair: str, label: str, response: str, prefix: str = "customer: hi") -> ComplianceItem:
    return ComplianceItem(pair_id=pair, label=label, task_id="t", document_id="d", section_id="do.c1",
                          prefix=[Turn(role="customer", text=prefix)], policy="If a:\n  - x", response=response,
                          manipulation_type="parameter_mismatch", changed_ids=["do.c1"],
                          manipulated_policy="If b:\n  - x", manipulated_document="", diff="", retries=0, seed=0)


def test_balance_and_length_parity_over_the_set():
    good = [item("p1", "compliant", "a" * 100), item("p1", "violating", "b" * 110)]
    assert balance_check(good).passed
    assert length_parity_check(good).details["mean_length_ratio"] == 1.1
    assert not balance_check(good + [item("p2", "violating", "c")]).passed
    assert not balance_check([good[0], item("p1", "violating", "b", prefix="customer: other")]).passed
    long = [item("p1", "compliant", "a" * 100), item("p1", "violating", "b" * 149)]
    assert not length_parity_check(long).passed and length_parity_check(long).severity == "warning"
