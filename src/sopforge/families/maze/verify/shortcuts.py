"""The four shortcut answers, computed from what a shortcut reader sees (issue 25, "coverage and difficulty").

A benchmark item only measures SOP-following when reading the whole input and applying the SOP is
necessary. Four shortcuts skip part of that, and each must stay near the format-only credit:

* ``majority``: the answer most frequent among the *other* instances of the scenario (a prior
  estimated without the item it guesses: leave-one-out, so a set of five distinct answers is not
  credited with one hit per answer);
* ``first_turn``: the tree executed on what the first user turn says (a reader that stops early);
* ``last_turn``: the tree executed from the start on the last user turn alone (a reader that
  ignores the history: the paper's models "anchor" on one turn, L153);
* ``first_option``: the first answer the SOP lists, whatever the input (route blindness at its
  bluntest, L145).

Where a reading leaves the answer open, the reader falls back on the first option in SOP order
still possible (LRS) or the first-option answer (HRS): the guess uses nothing but the SOP. The
sampler calls these on plans (a perfect reader of the shown part) to avoid items a shortcut solves;
the baselines stage calls them on what an LLM reader actually found.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sopforge.families.maze.models.execution import Turn, compile_logic, lrs_answer, run_values
from sopforge.families.maze.models.logic import REPLY, FactValue, Logic, Tri
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, HRSScenario, LRSScenario, Scenario

__all__ = ["SHORTCUTS", "answer_key", "first_option_answer", "leave_one_out_majority", "read_answer", "same_answer"]

SHORTCUTS: tuple[str, ...] = ("majority", "first_turn", "last_turn", "first_option")


def answer_key(answer: dict[str, Any]) -> str:
    """A hashable form of the compared part of an answer."""
    import json

    return json.dumps({k: v for k, v in answer.items() if k not in EXCLUSION_KEYS}, sort_keys=True)


def same_answer(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    return a is not None and b is not None and answer_key(a) == answer_key(b)


def _default_details(scenario: LRSScenario, known: dict[str, FactValue]) -> dict[str, FactValue]:
    details: dict[str, FactValue] = {}
    for name in scenario.report:
        fact = scenario.fact(name)
        if name in known:
            details[name] = known[name]
        elif fact is not None:
            details[name] = (fact.values[0] if fact.type == "enum" else False if fact.type == "boolean"
                             else fact.minimum)  # type: ignore[assignment]
    return details


def first_option_answer(scenario: Scenario) -> dict[str, Any]:
    """The first answer the SOP lists: LRS the first option; HRS what Step 1's first sub-step does."""
    if isinstance(scenario, LRSScenario):
        return lrs_answer(scenario, scenario.leaves()[0][1].id, _default_details(scenario, {}))
    branch = scenario.steps[0].branches[0]
    if branch.then == "goto" and (target := scenario.step(branch.target or "")) is not None:
        if target.script:
            return {"step": target.id, "response": target.script, "action": "moveon"}
        return {"step": branch.id, "response": scenario.steps[0].script or "-", "action": "moveon"}
    return {"step": branch.id, "response": branch.script or scenario.steps[0].script or "-",
            "action": "hangup" if branch.then == "end" else "moveon"}


def read_answer(scenario: Scenario, facts: dict[str, FactValue], replies: list[str | None],
                logic: Logic | None = None) -> tuple[dict[str, Any], str]:
    """The answer a reader who found ``facts`` (and these replies, HRS, in order from Step 1) gives:
    the tree's, else the fallback. Returns (answer, how it was decided)."""
    logic = logic or compile_logic(scenario)
    known = {k: v for k, v in facts.items() if k in logic.facts and v is not None and logic.facts[k].accepts(v)}
    turns = None
    if isinstance(scenario, HRSScenario):
        turns = [Turn(r if r and logic.cell_of(REPLY, r) is not None else None) for r in replies] or [Turn(None)]
    run = run_values(scenario, logic, known, turns)
    if run.ok:
        return run.answer, "executed"  # type: ignore[return-value]
    if isinstance(scenario, LRSScenario):
        region = logic.region_of(known)
        for category, option in scenario.leaves():
            if logic.truth(scenario.leaf_atoms(category, option), region) is not Tri.FALSE:
                return (lrs_answer(scenario, option.id, _default_details(scenario, known)),
                        f"first possible option ({run.error})")
    return first_option_answer(scenario), f"first option ({run.error})"


def leave_one_out_majority(targets: dict[str, dict[str, Any]], first_option: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Instance id -> the answer most frequent among the other instances (ties: the earliest; no other
    instance: the first option)."""
    keys = {i: answer_key(t) for i, t in targets.items()}
    guesses = {}
    for item in targets:
        counts = Counter(k for i, k in keys.items() if i != item)
        if not counts:
            guesses[item] = first_option
            continue
        best = max(counts.values())
        guesses[item] = next(targets[i] for i in targets if i != item and counts[keys[i]] == best)
    return guesses

