"""TOD-ProcBench instruction documents: f1 parsing with stable ids, and the deterministic f2/f3 flattening."""

from __future__ import annotations

import json

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.instructions import flatten, parse_f1, render_f1, render_f2, render_f3

# The paper's own example (l.646-660): If c1: a1; If c2: a3 a4; a2; If c3: a5
PAPER_EXAMPLE = """\
If c1:
  - a1
  If c2:
    - a3
    - a4
  - a2
If c3:
  - a5"""

REFILL = """\
- Greet the customer and ask for the prescription number
If the prescription is on file:
  - Look up the prescription
  If refills remaining is 0:
    - Tell the customer no refills are left
    - Offer to contact the prescriber
  Else:
    - Queue the refill
  - Confirm the pickup time
If the prescription is not on file:
  - Ask for the prescriber's name
- Thank the customer"""


def pairs(entries):
    return [(tuple(e.conditions), tuple(e.actions)) for e in entries]


def test_paper_example_flattens_as_the_paper_says():
    entries = flatten(parse_f1(PAPER_EXAMPLE))
    assert pairs(entries) == [(("c1",), ("a1",)), (("c1", "c2"), ("a3", "a4")), (("c1",), ("a2",)), (("c3",), ("a5",))]
    assert json.loads(render_f3(entries))[1] == {"conditions": ["c1", "c2"], "actions": ["a3", "a4"]}


def test_ids_are_stable_positions_and_flattening_keeps_them():
    tree = parse_f1(REFILL)
    statements = tree.statements()
    assert statements["do.a1"] == "Greet the customer and ask for the prescription number"
    assert statements["do.c1.c1"] == "refills remaining is 0"
    assert statements["do.c1.c2"] == "NOT (refills remaining is 0)"
    assert statements["do.c1.a2"] == "Confirm the pickup time"
    assert statements["do.a2"] == "Thank the customer"
    entries = flatten(tree)
    assert [e.condition_ids for e in entries] == [[], ["do.c1"], ["do.c1", "do.c1.c1"], ["do.c1", "do.c1.c2"],
                                                  ["do.c1"], ["do.c2"], []]
    assert entries[2].action_ids == ["do.c1.c1.a1", "do.c1.c1.a2"]
    # Every action appears exactly once, in document order.
    assert [i for e in entries for i in e.action_ids] == [k for k in statements if k.rsplit(".", 1)[-1].startswith("a")]


def test_f2_text_and_round_trip():
    tree = parse_f1(REFILL)
    assert render_f1(tree) == REFILL
    assert parse_f1(render_f1(tree)) == tree
    f2 = render_f2(flatten(tree))
    assert f2.splitlines()[:3] == ["In all cases:", "  - Greet the customer and ask for the prescription number",
                                   "If the prescription is on file:"]
    assert "If the prescription is on file AND NOT (refills remaining is 0):\n  - Queue the refill" in f2


def test_neighbours_with_the_same_conditions_merge():
    text = "If a:\n  - x\n  If b:\n    - y\n  If c:\n    - z\n- w\n- v"
    entries = flatten(parse_f1(text))
    assert pairs(entries) == [(("a",), ("x",)), (("a", "b"), ("y",)), (("a", "c"), ("z",)), ((), ("w", "v"))]
    consecutive = [(x.condition_ids, y.condition_ids) for x, y in zip(entries, entries[1:])]
    assert all(a != b for a, b in consecutive)


@pytest.mark.parametrize("text, message", [
    ("If a:\n   - x", "not a multiple of 2"),
    ("If a:\n  - x\n      - y", "indented 3 levels but only 1 block"),
    ("If a:\n- x", "line 1: the If block has no indented content"),
    ("If a:", "line 1: the If block has no indented content"),
    ("Else:\n  - x", "'Else:' must follow an If block"),
    ("- x\nElse:\n  - y", "'Else:' must follow an If block"),
    ("If a:\n  - x\nElse:\n  - y\nElse:\n  - z", "'Else:' must follow an If block"),
    ("If a\n  - x", "line 1: expected 'If <condition>:'"),
    ("", "empty"),
])
def test_malformed_f1_is_refused_with_the_line(text, message):
    with pytest.raises(ParseError, match=message):
        parse_f1(text)
