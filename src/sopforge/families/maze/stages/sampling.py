"""Sampling instance plans in code: facts, the path through the tree, turns, noise, format, every answer.

The paper collects real inputs (L70-79); we generate them, so what an input must say is decided
here, seeded, before any model writes. Every answer is the execution of the tree: the final one,
the answer after each user turn (the paper's input-target pairs, Appendix B.2) and the answer a
reader fooled by each noise phenomenon would give.

* **LRS** (this module): targets are drawn to *cover* the options, not the common path: the
  categories in turn, exceptions (options that override another) first, each option at most once,
  the SOP's first option last. An exception is sampled where the option it overrides holds too, so
  the stated precedence decides. :meth:`Logic.solve_unique` gives a region where the target wins; a
  point is drawn in it. The facts are spread over two to four user turns so that neither the first
  nor the last turn alone settles the answer (the first-turn and last-turn shortcuts).
* **HRS** (:mod:`.hrs_walks`): random conversations are walked and picked greedily to cover
  sub-steps, rules, endings and path features, with distinct final answers and no shortcut win.
* **Noise** (:mod:`.noise`): each phenomenon carries a decoy chosen so that, where the scenario
  allows it, taking the decoy changes the answer.

A plan states only the facts its decisions read (plus the facts an LRS answer reports), so no
unstated fact can change any of its answers; :func:`.planning.plan_instances` re-executes to be sure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from sopforge.families.maze.models.execution import Turn, compile_logic, run_values
from sopforge.families.maze.models.instances import INPUT_FORMATS, InstancePlan, NoisePlan, Subtask, UserTurnPlan
from sopforge.families.maze.models.logic import Atom, FactValue, Logic
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, Scenario
from sopforge.families.maze.verify.shortcuts import first_option_answer, read_answer, same_answer

__all__ = ["BASE_DATE", "ENDINGS", "FEATURES", "Draft", "PlanError", "finish", "lrs_drafts", "needed_facts",
           "shortcut_wins"]

ENDINGS = ("end", "advance", "answer")
FEATURES = ("loop", "jump", "rule", "check")
LAYOUT_TRIES = 16  # turn layouts tried per LRS plan before accepting one a shortcut solves
BASE_DATE = date(2025, 1, 6)


class PlanError(ValueError):
    """The scenario admits no plan (an unreachable target slipped past the checks, or no conversation)."""


@dataclass
class Draft:
    """A plan being built: facts, turns and path; noise, format and date come later."""

    facts: dict[str, FactValue]
    turns: list[UserTurnPlan]
    path: list[str]
    path_kind: str
    features: list[str] = field(default_factory=list)
    noise: list[NoisePlan] = field(default_factory=list)
    format: str = "speaker_tags"
    call_date: str = BASE_DATE.isoformat()


def needed_facts(known: set[str], target: list[Atom], competitors: list[list[Atom]],
                 values: dict[str, FactValue]) -> set[str]:
    """Facts to state so that ``target`` is true and every competitor false (``known`` is extended)."""
    known.update(a.fact for a in target)
    for atoms in competitors:
        if any(a.fact in known and not a.holds(values[a.fact]) for a in atoms):
            continue
        false = [a for a in atoms if not a.holds(values[a.fact])]
        if not false:
            raise PlanError(f"a competing condition holds too: {[a.text() for a in atoms]}")
        known.add(false[0].fact)
    return known


# ------------------------------------------------------------------------------------------ LRS

def _lrs_targets(s: LRSScenario, rng: random.Random) -> list[str]:
    """Option ids in the order they become targets: categories in turn; in each, exceptions first, then
    the others at random; the SOP's very first option (the blind shortcut's answer) last of all."""
    first = s.leaves()[0][1].id
    queues = {}
    for c in s.categories:
        options = [o for o in c.options if o.id != first]
        rng.shuffle(options)
        options.sort(key=lambda o: not o.overrides)
        queues[c.id] = [o.id for o in options]
    order = list(queues)
    rng.shuffle(order)
    targets: list[str] = []
    while any(queues.values()):
        for category_id in order:
            if queues[category_id]:
                targets.append(queues[category_id].pop(0))
    return targets + [first]


def _lrs_region(s: LRSScenario, logic: Logic, option_id: str, rng: random.Random) -> tuple[Any, list[Atom]] | None:
    """A region where ``option_id`` is the answer, preferring one where an option it overrides holds too
    (so the stated precedence decides); returns (region, the atoms that must be stated true)."""
    category, option = s.option(option_id)  # type: ignore[misc]
    atoms = s.leaf_atoms(category, option)
    beaten = set(option.overrides)
    competitors = [s.leaf_atoms(c, o) for c, o in s.leaves() if o.id != option_id and o.id not in beaten]
    losers = sorted(beaten)  # sorted first: a set's order depends on PYTHONHASHSEED, and so would the draws
    rng.shuffle(losers)
    for loser in losers:
        found = s.option(loser)
        if found is None:
            continue
        both = atoms + s.leaf_atoms(*found)
        region = logic.solve_unique(both, competitors, rng=rng)
        if region is not None:
            return region, both
    region = logic.solve_unique(atoms, competitors, rng=rng)
    return (region, atoms) if region is not None else None


def lrs_drafts(s: LRSScenario, logic: Logic, count: int, rng: random.Random) -> list[Draft]:
    """Drafts in target order; one that a shortcut solves whatever the layout is kept only when the tree
    has too few others."""
    facts_read = sorted({a.fact for a in s.all_atoms()} | set(s.report))
    drafts: list[Draft] = []
    solved: list[Draft] = []
    for option_id in _lrs_targets(s, rng):
        if len(drafts) == count:
            break
        found = _lrs_region(s, logic, option_id, rng)
        if found is None:
            continue
        region, true_atoms = found
        point = logic.sample_point(region, facts_read, rng)
        beaten = set(s.option(option_id)[1].overrides)  # type: ignore[index]
        competitors = [s.leaf_atoms(c, o) for c, o in s.leaves() if o.id != option_id and o.id not in beaten]
        stated = needed_facts(set(), true_atoms, competitors, point) | set(s.report)
        facts = {f: point[f] for f in sorted(stated)}
        category = s.option(option_id)[0]  # type: ignore[index]
        draft = Draft(facts=facts, turns=[], path=[category.id, option_id], path_kind=category.id)
        draft.turns, wins = _lrs_layout(s, logic, facts, rng)
        (solved if wins else drafts).append(draft)
    return drafts + solved[:count - len(drafts)]


def _lrs_layout(s: LRSScenario, logic: Logic, facts: dict[str, FactValue],
                rng: random.Random) -> tuple[list[UserTurnPlan], list[str]]:
    """Spread the facts over two to four user turns so that neither the first nor the last turn alone gives
    the answer (tried ``LAYOUT_TRIES`` times). Returns the layout and the shortcuts that still win on it."""
    target = run_values(s, logic, facts).answer
    turns: list[UserTurnPlan] = []
    wins: list[str] = []
    for _ in range(LAYOUT_TRIES):
        names = list(facts)
        rng.shuffle(names)
        n = rng.randint(2, max(2, min(4, len(names))))
        turns = [UserTurnPlan(index=i + 1) for i in range(n)]
        for k, name in enumerate(names):
            turns[k % n].facts.append(name)
        wins = shortcut_wins(s, logic, Draft(facts=facts, turns=turns, path=[], path_kind=""), target)
        if not wins:
            break
    return turns, wins


def shortcut_wins(s: Scenario, logic: Logic, draft: Draft, target: dict[str, Any] | None) -> list[str]:
    """The shortcuts a perfect reader of the shown part would win with on this draft (first_turn, last_turn,
    first_option)."""
    wins = []
    first, last = draft.turns[0], draft.turns[-1]
    shown = {"first_turn": (first, [first.reply]), "last_turn": (last, [last.reply])}
    for name, (turn, replies) in shown.items():
        answer, _ = read_answer(s, {f: draft.facts[f] for f in turn.facts}, replies, logic)  # type: ignore[arg-type]
        if same_answer(answer, target):
            wins.append(name)
    if same_answer(first_option_answer(s), target):
        wins.append("first_option")
    return wins


# ------------------------------------------------------------------------------------------ finish

def _turns(plan: InstancePlan, upto: int) -> list[Turn]:
    return [Turn(t.reply, t.question) for t in plan.turns[:upto]]


def finish(s: Scenario, logic: Logic, plan_id: str, draft: Draft) -> InstancePlan:
    """Execute the tree for the final answer, the answer after every user turn and every misreading."""
    plan = InstancePlan(id=plan_id, scenario=s.name, kind=s.kind, facts=draft.facts, turns=draft.turns,
                        noise=draft.noise, path=draft.path, path_kind=draft.path_kind, features=draft.features,
                        target={}, input_format=draft.format, call_date=draft.call_date)  # type: ignore[arg-type]
    hrs = isinstance(s, HRSScenario)
    final = run_values(s, logic, plan.facts, _turns(plan, len(plan.turns)) if hrs else None)
    if not final.ok:
        raise PlanError(f"{plan_id}: the stated facts do not determine one answer: {final.error}")
    plan.target = final.answer  # type: ignore[assignment]
    if hrs:
        for turn, line in zip(plan.turns, final.agent_lines):
            turn.agent_line = line
    for k in range(1, len(plan.turns) + 1):
        state = plan.state_after(k)
        run = run_values(s, logic, state, _turns(plan, k) if hrs else None)
        if k == len(plan.turns) and not same_answer(run.answer, plan.target):
            raise PlanError(f"{plan_id}: the last turn's answer {run.answer or run.error} is not the target")
        if run.ok:
            plan.subtasks.append(Subtask(turn=k, target=run.answer, facts=state,  # type: ignore[arg-type]
                                         replies=[t.reply for t in plan.turns[:k] if t.reply] if hrs else [],
                                         final=k == len(plan.turns)))
        elif hrs:
            raise PlanError(f"{plan_id}: user turn {k} leaves the call undetermined: {run.error}")
    for n in plan.noise:
        n.misread = misread(s, logic, plan, n)
        n.changes_answer = n.misread is not None and not same_answer(n.misread, plan.target)
    return plan


def misread(s: Scenario, logic: Logic, plan: InstancePlan, noise: NoisePlan) -> dict[str, Any] | None:
    """The final answer when ``noise``'s decoy is taken for the truth (None: no decoy, or no single answer)."""
    if noise.decoy is None:
        return None
    facts, turns = dict(plan.facts), _turns(plan, len(plan.turns))
    if noise.fact is not None:
        if not logic.facts[noise.fact].accepts(noise.decoy):
            return None
        facts[noise.fact] = noise.decoy
    else:
        original = turns[noise.user_turn - 1]
        turns[noise.user_turn - 1] = Turn(str(noise.decoy), original.question)
    run = run_values(s, logic, facts, turns if isinstance(s, HRSScenario) else None)
    return run.answer if run.ok else None
