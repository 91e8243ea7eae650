"""Computing the shortcut baselines of :mod:`sopforge.families.maze.models.baselines` and scoring them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sopforge.families.maze.models.baselines import BaselineResult, ScenarioBaselines
from sopforge.families.maze.models.execution import Turn, compile_logic, run_scenario
from sopforge.families.maze.models.instances import Extraction, MazeInstance
from sopforge.families.maze.models.logic import REPLY, Tri
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, LRSScenario, Scenario
from sopforge.families.maze.verify.instance_checks import known_facts
from sopforge.families.maze.verify.scorer import score_answer

__all__ = ["constant_answer", "first_turn_answer", "majority_answer", "scenario_baselines"]


def _key(answer: dict[str, Any]) -> tuple:
    return tuple((k, answer[k]) for k in sorted(answer) if k not in EXCLUSION_KEYS)


def majority_answer(instances: list[MazeInstance]) -> dict[str, Any]:
    """The reference answer most frequent in the set (ties: the one met first)."""
    counts = Counter(_key(i.target) for i in instances)
    best = max(counts.values())
    return next(i.target for i in instances if counts[_key(i.target)] == best)


def constant_answer(scenario: Scenario) -> dict[str, Any]:
    """The first value of every enum of the schema, and a one-word response: valid, and blind."""
    answer: dict[str, Any] = {}
    for key, spec in scenario.answer_schema()["properties"].items():
        answer[key] = spec["enum"][0] if "enum" in spec else "OK"
    return answer


def first_turn_answer(scenario: Scenario, reading: Extraction) -> tuple[dict[str, Any], str]:
    """Execute the tree on what was read up to the first user turn. When that leaves the answer
    open, an LRS reader takes the first option, in SOP order, that the reading leaves possible, and
    an HRS reader the constant answer: the guess uses nothing but the SOP (no answer of the set).
    Returns (answer, how it was decided)."""
    logic = compile_logic(scenario)
    region = logic.region_of(known_facts(logic, reading))
    turns = None
    if not isinstance(scenario, LRSScenario):
        first = reading.replies[0].strip().lower() if reading.replies else ""
        turns = [Turn(first if logic.cell_of(REPLY, first) is not None else None)]
    run = run_scenario(scenario, logic, region, turns)
    if run.ok:
        return run.answer, "executed"  # type: ignore[return-value]
    if isinstance(scenario, LRSScenario):
        for category, option in scenario.leaves():
            if logic.truth(scenario.leaf_atoms(category, option), region) is not Tri.FALSE:
                return ({"category": category.id, "step": option.id, "response": option.script,
                         "action": option.action}, f"first possible option ({run.error})")
    return constant_answer(scenario), f"constant ({run.error})"


def _result(name: str, scenario: Scenario, instances: list[MazeInstance], answers: dict[str, dict[str, Any]]) -> BaselineResult:
    schema = scenario.answer_schema()
    scores = {i.id: score_answer(answers[i.id], i.target, schema, EXCLUSION_KEYS).score for i in instances}
    return BaselineResult(name=name, answers=answers, scores=scores,  # type: ignore[arg-type]
                          mean=round(sum(scores.values()) / len(scores), 4) if scores else 0.0,
                          correct=sum(1 for s in scores.values() if s == 1.0))


def scenario_baselines(scenario: Scenario, instances: list[MazeInstance],
                       first_turn: dict[str, dict[str, Any]]) -> ScenarioBaselines:
    """The three shortcuts on one scenario's instances (``first_turn``: instance id -> its answer)."""
    majority, constant = majority_answer(instances), constant_answer(scenario)
    return ScenarioBaselines(scenario=scenario.name, kind=scenario.kind, instances=len(instances), results=[
        _result("majority_leaf", scenario, instances, {i.id: majority for i in instances}),
        _result("first_turn", scenario, instances, first_turn),
        _result("constant", scenario, instances, {i.id: constant for i in instances}),
    ])
