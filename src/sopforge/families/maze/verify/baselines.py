"""Scoring the shortcut baselines of :mod:`sopforge.families.maze.models.baselines`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sopforge.families.maze.models.baselines import BASELINES, BaselineResult, ScenarioBaselines
from sopforge.families.maze.models.instances import MazeInstance
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, Scenario
from sopforge.families.maze.verify.scorer import score_answer
from sopforge.families.maze.verify.shortcuts import answer_key, first_option_answer, leave_one_out_majority

__all__ = ["pooled_means", "scenario_baselines"]


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _subtask_mean(scenario: Scenario, instances: list[MazeInstance], guess) -> float:
    schema = scenario.answer_schema()
    scores = [score_answer(guess(i.id, s), s.target, schema, EXCLUSION_KEYS).score
              for i in instances for s in i.plan.subtasks]
    return _mean(scores)


def scenario_baselines(scenario: Scenario, instances: list[MazeInstance], first_turn: dict[str, dict[str, Any]],
                       last_turn: dict[str, dict[str, Any]]) -> ScenarioBaselines:
    """The four shortcuts on one scenario's instances (``first_turn``/``last_turn``: instance id -> the reader's
    answer)."""
    schema = scenario.answer_schema()
    constant = first_option_answer(scenario)
    finals = {i.id: i.target for i in instances}
    answers = {"majority": leave_one_out_majority(finals, constant), "first_turn": first_turn,
               "last_turn": last_turn, "first_option": {i.id: constant for i in instances}}
    # at the subtask level the majority is taken over the other dialogues' subtasks (a prior without this dialogue)
    by_instance = {}
    for i in instances:
        others = [s.target for j in instances if j.id != i.id for s in j.plan.subtasks]
        counts = Counter(answer_key(t) for t in others)
        by_instance[i.id] = next((t for t in others if counts[answer_key(t)] == max(counts.values())), constant)

    def majority_of(instance: str, _subtask) -> dict[str, Any]:
        return by_instance[instance]

    results = []
    for name in BASELINES:
        scores = {i.id: score_answer(answers[name][i.id], i.target, schema, EXCLUSION_KEYS).score for i in instances}
        subtask_mean = (_subtask_mean(scenario, instances, majority_of) if name == "majority" else
                        _subtask_mean(scenario, instances, lambda _i, _s: constant) if name == "first_option" else None)
        results.append(BaselineResult(name=name, answers=answers[name], scores=scores,  # type: ignore[arg-type]
                                      mean=_mean(list(scores.values())), subtask_mean=subtask_mean,
                                      correct=sum(1 for v in scores.values() if v == 1.0)))
    return ScenarioBaselines(scenario=scenario.name, kind=scenario.kind, instances=len(instances),
                             subtasks=sum(len(i.plan.subtasks) for i in instances), results=results)


def pooled_means(scenarios: list[ScenarioBaselines]) -> dict[str, dict[str, float]]:
    """Kind -> shortcut -> mean over every final answer of that kind (scenarios weighted by their instances)."""
    pooled: dict[str, dict[str, float]] = {}
    for kind in ("LRS", "HRS"):
        mine = [s for s in scenarios if s.kind == kind]
        if mine:
            pooled[kind] = {name: _mean([v for s in mine for v in s.result(name).scores.values()]) for name in BASELINES}
    return pooled
