"""The three TOD-ProcBench manipulation operators change exactly their target statement, seeded."""

from __future__ import annotations

import pytest

from sopforge.families.sop_tools.models.instruction_manipulations import NotApplicable, changed_statements, manipulate
from sopforge.families.sop_tools.models.instructions import flatten, parse_f1

DOC = """\
- Ask for the prescription number
If the prescription is on file:
  - Look up the prescription
  If more than 2 refills remain:
    - Queue the refill for pickup within 3 days
    - Send a confirmation text
  Else:
    - Tell the customer only 1 refill is left
    - Offer to contact the prescriber
If the prescription is not on file:
  - Ask for the prescriber's name"""
KINDS = ["parameter_mismatch", "single_condition_replacement", "multi_condition_replacement"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(12))
def test_each_operator_changes_exactly_its_target(kind, seed):
    tree = parse_f1(DOC)
    result = manipulate(tree, kind, seed)
    assert changed_statements(tree, result.tree) == [result.target_id]
    assert result.before == tree.statements()[result.target_id] != result.after
    assert manipulate(tree, kind, seed).after == result.after, "seeded: the same seed gives the same edit"
    assert parse_f1(DOC) == tree, "the original tree is not modified"
    # The flattened forms of the manipulated document differ in that statement only.
    before, after = flatten(tree), flatten(result.tree)
    assert [e.action_ids for e in before] == [e.action_ids for e in after]


def test_what_each_operator_is_allowed_to_change():
    tree = parse_f1(DOC)
    statements = tree.statements()
    for seed in range(20):
        numbers = manipulate(tree, "parameter_mismatch", seed)
        assert any(ch.isdigit() for ch in numbers.before)
        assert [t for t in numbers.before.split() if not t.isdigit()] == [t for t in numbers.after.split() if not t.isdigit()]

        single = manipulate(tree, "single_condition_replacement", seed)
        block = single.target_id.rsplit(".", 1)[0]
        same_block = {text for sid, text in statements.items() if sid.rsplit(".", 1)[0] == block and ".a" in sid[len(block):]}
        assert single.after == f"Do not {single.before[0].lower()}{single.before[1:]}" or single.after in same_block

        multi = manipulate(tree, "multi_condition_replacement", seed)
        donors = [sid for sid, text in statements.items() if text == multi.after]
        assert donors and all(d.rsplit(".", 1)[0] != multi.target_id.rsplit(".", 1)[0] for d in donors)


def test_documents_an_operator_cannot_change_are_reported_ineligible():
    flat = parse_f1("- Greet the customer\n- Ask how to help")
    for kind in KINDS:
        with pytest.raises(NotApplicable):
            manipulate(flat, kind, 0)
    one_branch = parse_f1("If the order shipped:\n  - Give the tracking number")
    with pytest.raises(NotApplicable, match="fewer than two condition branches"):
        manipulate(one_branch, "multi_condition_replacement", 0)


def test_single_condition_replacement_negates_the_action_of_a_single_action_block():
    """Issue 16, item 7: a document whose blocks each hold one action was never eligible (0 of 2 on a new
    theme); the operator now negates that action, the paper's first option."""
    doc = parse_f1("If the order shipped:\n  - Give the tracking number\nIf the order is late:\n  - Offer a refund")
    for seed in range(4):
        result = manipulate(doc, "single_condition_replacement", seed)
        assert result.after == f"Do not {result.before[:1].lower()}{result.before[1:]}"
        assert changed_statements(doc, result.tree) == [result.target_id]


def test_a_manipulation_that_changes_nothing_or_something_else_is_detected():
    tree = parse_f1(DOC)
    assert changed_statements(tree, tree.model_copy(deep=True)) == []
    result = manipulate(tree, "parameter_mismatch", 1)
    other = result.tree.model_copy(deep=True)
    other.items[0].text = "Ask for the order number"
    assert changed_statements(tree, other) == sorted([result.target_id, "do.a1"])


# --- validated before it is asked (issue 19) --------------------------------------------------------

RANGE_DOC = """\
If the early refill ratio is at least 0.80 and less than 0.95:
  - Tell the customer the refill can be filled in 3 days
If the 30-day fill count is more than 4:
  - Refer the refill to the pharmacist
Else:
  - Approve the refill"""


@pytest.mark.parametrize("seed", range(30))
def test_a_mismatch_keeps_the_order_of_a_range_and_changes_only_compared_numbers(seed):
    """'at least 0.81 and less than 0.33' and a '45-day figure' no tool computes were asked of answerers."""
    tree = parse_f1(RANGE_DOC)
    result = manipulate(tree, "parameter_mismatch", seed)
    if result.before.startswith("If the early refill ratio"):
        low, high = (float(x) for x in __import__("re").findall(r"\d\.\d+", result.after))
        assert low < high, result.after
    assert "30-day" in result.after or "30-day" not in result.before  # a quantity's name is not a threshold
    assert "3 days" in result.after or "3 days" not in result.before  # no comparator governs it
    assert result.target_id != "do.c3"


def test_a_bare_else_is_never_a_target_or_a_donor():
    tree = parse_f1(RANGE_DOC)
    for seed in range(30):
        for kind in KINDS:
            result = manipulate(tree, kind, seed)
            assert result.after.strip(" :").lower() not in ("else", "otherwise")
            assert result.before.strip(" :").lower() not in ("else", "otherwise")


@pytest.mark.parametrize("seed", range(20))
def test_a_threshold_the_case_is_compared_with_moves_across_the_case(seed):
    """The change must alter the outcome it is meant to alter: a count of 6 against 'more than 4' becomes a
    threshold of 6 or more, not 7 against 'more than 5' where the case stays on the same side."""
    tree = parse_f1(RANGE_DOC)
    result = manipulate(tree, "parameter_mismatch", seed, within={"do.c2"}, case_values={(">", 4.0): 6.0})
    new = int(__import__("re").search(r"more than (\d+)", result.after).group(1))
    assert (6 > new) != (6 > 4), result.after


def test_no_threshold_that_can_cross_the_case_makes_the_operator_ineligible():
    tree = parse_f1("If the count is more than 4:\n  - Refer it\nElse:\n  - Approve it")
    with pytest.raises(NotApplicable, match="so that the case's outcome changes"):
        manipulate(tree, "parameter_mismatch", 0, case_values={(">", 4.0): -100000.0})
