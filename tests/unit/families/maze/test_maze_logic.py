"""Conditions over facts: parsing atoms, cells, truth on partially known facts, the exact solver."""

from __future__ import annotations

import random

import pytest

from sopforge.families.maze.models.logic import REPLY, Fact, Logic, Tri, parse_atom

DAYS = Fact(name="days", type="integer", minimum=0, maximum=100, unit="days", description="d")
CLASS = Fact(name="klass", type="enum", values=["plain", "controlled", "strict"], description="c")
FLAG = Fact(name="flag", type="boolean", description="f")


def logic(*atoms: str, replies: tuple[str, ...] = ()) -> Logic:
    return Logic([DAYS, CLASS, FLAG], [parse_atom(a) for a in atoms], replies)


@pytest.mark.parametrize("text, canonical", [
    ("days >= 24", "days >= 24"),
    ("  klass   ==   plain ", "klass == plain"),
    ("klass in [plain, strict]", "klass in [plain, strict]"),
    ('klass not  in ["plain"]', "klass not in [plain]"),
    ("flag == true", "flag == true"),
    ("reply == affirm", "reply == affirm"),
    ("klass in[plain]", "klass in [plain]"),
    ("days_since_fill>=3", "days_since_fill >= 3"),
])
def test_atoms_read_into_one_canonical_form(text: str, canonical: str):
    assert parse_atom(text).text() == canonical


@pytest.mark.parametrize("text, fragment", [
    ("days", "must read"),
    ("days => 3", "must read"),
    ("klass in plain", "needs a list"),
    ("klass == [plain]", "needs 'in' or 'not in'"),
    ("days < plain", "compares with a number"),
    ("klass == Not Snake", "snake_case"),
    ("klass in []", "empty"),
    ("days_since is at least 24", "must read"),   # "in" inside a name is not the operator
])
def test_malformed_atoms_say_what_is_expected(text: str, fragment: str):
    with pytest.raises(ValueError, match=fragment):
        parse_atom(text)


def test_thresholds_cut_integer_ranges_into_cells_where_every_atom_agrees():
    lg = logic("days < 24", "days >= 72", "days == 50")
    cells = [(c.low, c.high) for c in lg.cells["days"]]
    # each threshold value is a cell of its own, so boundaries are sampled as often as interiors
    assert cells == [(0, 23), (24, 24), (25, 49), (50, 50), (51, 71), (72, 72), (73, 100)]
    assert [(c.low, c.high) for c in lg.cells["klass"]] == [("plain", "plain"), ("controlled", "controlled"),
                                                            ("strict", "strict")]
    assert lg.cell_of("days", 23) == 0 and lg.cell_of("days", 24) == 1 and lg.cell_of("days", 101) is None


def test_a_condition_is_true_false_or_undetermined_on_what_is_known():
    lg = logic("days >= 24", "klass == plain")
    due_plain = [parse_atom("days >= 24"), parse_atom("klass == plain")]
    assert lg.truth(due_plain, lg.region_of({"days": 30, "klass": "plain"})) is Tri.TRUE
    assert lg.truth(due_plain, lg.region_of({"days": 10})) is Tri.FALSE          # false whatever the class
    assert lg.truth(due_plain, lg.region_of({"days": 30})) is Tri.UNKNOWN        # depends on the unstated class
    assert lg.truth(due_plain, lg.region_of({"days": 30, "klass": None})) is Tri.UNKNOWN
    assert lg.truth([], {}) is Tri.TRUE


def test_region_of_refuses_unknown_facts_and_impossible_values():
    lg = logic("days >= 24")
    with pytest.raises(ValueError, match="unknown fact"):
        lg.region_of({"weight": 3})
    with pytest.raises(ValueError, match="outside its domain"):
        lg.region_of({"klass": "herbal"})


def test_types_are_not_confused():
    assert not parse_atom("days == 1").holds(True)          # a boolean is not the integer 1
    assert not parse_atom("flag == true").holds(1)
    assert parse_atom("klass != plain").holds("strict")
    assert parse_atom("klass not in [plain, strict]").holds("controlled")


def test_the_solver_finds_a_region_where_only_the_target_holds():
    lg = logic("days < 24", "days >= 24", "klass == plain", "flag == true")
    early = [parse_atom("days < 24")]
    due_plain = [parse_atom("days >= 24"), parse_atom("klass == plain")]
    due_flagged = [parse_atom("days >= 24"), parse_atom("flag == true")]
    region = lg.solve_unique(due_plain, [early, due_flagged])
    assert region is not None
    assert lg.truth(due_plain, region) is Tri.TRUE
    assert lg.truth(early, region) is Tri.FALSE and lg.truth(due_flagged, region) is Tri.FALSE
    # a target that a sibling always covers has no such region
    assert lg.solve_unique(due_plain, [early, [parse_atom("days >= 24")]]) is None
    # nor does a contradictory one
    assert lg.solve_unique([parse_atom("days < 24"), parse_atom("days >= 24")], []) is None


def test_the_solver_is_exact_where_one_falsifying_atom_per_sibling_is_not_enough():
    # the target holds only where klass == controlled; sibling A must be killed through flag, sibling B
    # through days: a greedy choice of the first atom of each sibling would miss the only solution
    lg = logic("klass == controlled", "klass in [controlled, strict]", "flag == true", "days >= 24")
    target = [parse_atom("klass == controlled")]
    a = [parse_atom("klass in [controlled, strict]"), parse_atom("flag == true")]
    b = [parse_atom("klass == controlled"), parse_atom("days >= 24")]
    region = lg.solve_unique(target, [a, b], rng=random.Random(3))
    assert region is not None
    point = lg.sample_point(region, ["klass", "flag", "days"], random.Random(0))
    assert point["klass"] == "controlled" and point["flag"] is False and point["days"] < 24


def test_integer_values_are_sampled_near_the_threshold_of_an_open_ended_cell():
    lg = logic("days >= 24")
    top = len(lg.cells["days"]) - 1  # (25, 100): open-ended above the threshold
    values = {lg.sample_value("days", top, random.Random(i)) for i in range(50)}
    assert min(values) >= 25 and max(values) <= 40   # near the threshold, not anywhere up to 100


def test_replies_are_a_per_turn_enum():
    lg = logic("reply == affirm", replies=("affirm", "decline"))
    assert lg.truth([parse_atom("reply == affirm")], {REPLY: frozenset({lg.cell_of(REPLY, "decline")})}) is Tri.FALSE
    assert lg.cell_of(REPLY, "maybe") is None
