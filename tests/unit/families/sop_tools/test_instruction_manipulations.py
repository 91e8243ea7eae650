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
