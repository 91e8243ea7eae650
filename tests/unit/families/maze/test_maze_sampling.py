"""Plans sampled in code: reproducible, covering, and with answers no unstated fact can change."""

from __future__ import annotations

import random
from datetime import datetime

import pytest

from sopforge.families.maze.models.execution import Turn, compile_logic, run_scenario
from sopforge.families.maze.models.instances import PHENOMENA
from sopforge.families.maze.options import DEFAULT_NOISE
from sopforge.families.maze.stages.sampling import ENDINGS, FEATURES, PlanError, plan_instances


def plans(scenario, count=5, *, noise=DEFAULT_NOISE, seed=0):
    return plan_instances(scenario, count, noise=noise, max_turns=5, seed=seed)


def test_the_same_seed_gives_the_same_plans_and_another_seed_others(lrs, hrs):
    for scenario in (lrs, hrs):
        first = plans(scenario)
        assert plans(scenario) == first
        assert [p.facts for p in plans(scenario, seed=1)] != [p.facts for p in first]


@pytest.mark.parametrize("kind", ["lrs", "hrs"])
def test_no_unstated_fact_can_change_the_reference_answer(kind, request):
    scenario = request.getfixturevalue(kind)
    logic = compile_logic(scenario)
    rng = random.Random(7)
    for plan in plans(scenario, 5) + plans(scenario, 5, seed=3):
        turns = [Turn(t.reply, t.question) for t in plan.turns] if plan.kind == "HRS" else None
        for _ in range(25):
            # every unstated fact gets a random value; the stated ones stay
            filled = {f: logic.sample_value(f, rng.randrange(len(logic.cells[f])), rng)
                      for f in logic.facts if f not in plan.facts}
            run = run_scenario(scenario, logic, logic.region_of({**filled, **plan.facts}), turns)
            assert run.ok and run.answer == plan.target, (plan.id, filled)


def test_lrs_plans_visit_every_category_before_repeating_one(lrs):
    chosen = plans(lrs, 5)
    assert sorted(p.path_kind for p in chosen) == ["1", "2", "3", "4", "5"]
    assert len({p.target["step"] for p in plans(lrs, 12)}) == 12


def test_hrs_plans_cover_every_ending_and_path_feature(hrs):
    chosen = plans(hrs, 5)
    assert {p.path_kind for p in chosen} == set(ENDINGS)
    assert {f for p in chosen for f in p.features} == set(FEATURES)
    assert len({(tuple(p.facts.items()), tuple((t.reply, t.question) for t in p.turns)) for p in chosen}) == 5
    for plan in chosen:   # agent lines are the scripts the walk reached, the first one Step 1's
        assert plan.turns[0].agent_line == hrs.step("1").script


def test_every_phenomenon_with_a_share_appears_at_least_once_per_scenario(lrs, hrs):
    rare = dict.fromkeys(PHENOMENA, 0.01)
    for scenario in (lrs, hrs):
        found = {n.phenomenon for p in plans(scenario, 5, noise=rare) for n in p.noise}
        assert found == set(PHENOMENA)
        assert not [n for p in plans(scenario, 5, noise=dict.fromkeys(PHENOMENA, 0.0)) for n in p.noise]


def test_an_lrs_reversal_states_the_decoy_in_an_earlier_turn(lrs):
    for plan in plans(lrs, 5, noise={**dict.fromkeys(PHENOMENA, 0.0), "intent_reversal": 1.0}):
        (noise,) = plan.noise
        assert noise.decoy != plan.facts[noise.fact] and noise.decoy_turn < noise.user_turn
        assert noise.fact in plan.turns[noise.user_turn - 1].facts


@pytest.mark.parametrize("derivation", ["sum", "median", "difference"])
def test_calculation_operands_compute_the_value(lrs, hrs, derivation):
    lrs.fact("total_copay_usd").derivation = derivation
    only = {**dict.fromkeys(PHENOMENA, 0.0), "calculation": 1.0}
    seen = set()
    for scenario in (lrs, hrs):
        seeds = range(6) if scenario is lrs else range(2)   # HRS plans walk 400 conversations each
        for plan in [p for seed in seeds for p in plans(scenario, 5, noise=only, seed=seed)]:
            for noise in plan.noise:
                fact, value = scenario.fact(noise.fact), plan.facts[noise.fact]
                numbers = [int(x) for x in noise.operands] if fact.derivation != "interval_days" else []
                if fact.derivation == "interval_days":
                    start, end = (datetime.strptime(d, "%B %d, %Y").date() for d in noise.operands)
                    assert (end - start).days == value
                    if fact.interval_anchor == "until_call":
                        assert end.isoformat() == plan.call_date
                    else:
                        assert start.isoformat() > plan.call_date
                elif fact.derivation == "sum":
                    assert sum(numbers) == value and min(numbers) > 0
                elif fact.derivation == "median":
                    assert sorted(numbers)[len(numbers) // 2] == value and len(numbers) == 5
                else:
                    assert numbers[0] - numbers[1] == value and numbers[1] >= 0
                seen.add(fact.derivation)
    assert {"interval_days", derivation} <= seen


def test_asking_for_more_plans_than_the_tree_allows_is_an_error(lrs):
    with pytest.raises(PlanError, match="only 47 distinct instances can be planned, 60 were asked for"):
        plans(lrs, 60)


def test_input_formats_rotate_so_every_layout_appears(lrs):
    assert {p.input_format for p in plans(lrs, 3)} == {"speaker_tags", "timestamped", "json_lines"}
