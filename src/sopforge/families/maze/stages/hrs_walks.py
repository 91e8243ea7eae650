"""HRS plans: random conversations walked through the steps, then picked to cover the procedure.

Many random conversations are walked (a random point of case facts; at each waiting step a random
reply among those that select exactly one sub-step, favouring steps not yet visited; two to
``max_turns`` user turns). Plans are then picked greedily, most new coverage first: sub-steps and
rules taken, steps visited, endings (end, advance, answer) and path features (loop, jump, rule,
check). Two things rank above coverage, because they decide whether an item measures anything:
no shortcut solves it (the first user turn alone, the last one alone, the SOP's first option) and
its final answer differs from those already picked (a majority guess then gains nothing).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from sopforge.families.maze.models.execution import Turn, decision_groups, hrs_turn
from sopforge.families.maze.models.instances import UserTurnPlan
from sopforge.families.maze.models.logic import REPLY, FactValue, Logic
from sopforge.families.maze.models.scenario import HRSScenario, atoms_of
from sopforge.families.maze.stages.sampling import FEATURES, Draft, needed_facts, shortcut_wins
from sopforge.families.maze.verify.shortcuts import answer_key

__all__ = ["HRS_CANDIDATES", "hrs_drafts"]

HRS_CANDIDATES = 600  # random conversations walked per HRS scenario before picking plans


@dataclass
class _Walk:
    point: dict[str, FactValue]
    turns: list[Turn]
    outcomes: list[Any]
    stated: dict[str, int] = field(default_factory=dict)  # fact -> user turn that must state it


def _walk(s: HRSScenario, logic: Logic, case_facts: list[str], max_turns: int, rng: random.Random) -> _Walk | None:
    region = {f: frozenset({rng.randrange(len(logic.cells[f]))}) for f in case_facts}
    point = {f: logic.sample_value(f, next(iter(c)), rng) for f, c in region.items()}
    step = s.steps[0]
    walk = _Walk(point=point, turns=[], outcomes=[])
    visited = {step.id}
    for index in range(1, rng.randint(min(2, max_turns), max_turns) + 1):
        options, weights = [], []
        for reply in [r.name for r in s.replies]:
            turn = Turn(reply, rng.randrange(len(s.knowledge_base)) if s.knowledge_base else None)
            out = hrs_turn(s, logic, step, region, turn, index)
            if out.error is None:
                options.append((turn, out))
                # replies that lead somewhere new are favoured, so walks go deep rather than round in circles
                weights.append(3 if out.waiting_at and out.waiting_at not in visited else 1)
        if not options:
            return walk if walk.turns else None
        turn, out = rng.choices(options, weights)[0]
        walk.turns.append(turn)
        walk.outcomes.append(out)
        visited.update(out.visited)
        if out.waiting_at is None:
            break
        step = s.step(out.waiting_at)  # type: ignore[assignment]
    # what each turn's decisions read, stated at the first turn that needs it
    known: set[str] = {REPLY}
    values = {**point}
    for index, (turn, out) in enumerate(zip(walk.turns, walk.outcomes), start=1):
        values[REPLY] = turn.reply  # type: ignore[assignment]
        for taken, with_rules in zip(out.taken, [True] + [False] * len(out.taken)):
            groups = decision_groups(s, s.step(taken.at), with_rules)  # type: ignore[arg-type]
            atoms = dict(a for g in groups for a in g)
            before = set(known)
            competitors = []
            for ids in ([i for i, _ in g] for g in groups):   # every group up to the one that decided
                competitors += [atoms[i] for i in ids if i != taken.node]
                if taken.node in ids:
                    break
            needed_facts(known, atoms[taken.node], competitors, values)
            for fact in known - before - {REPLY}:
                walk.stated[fact] = index
    return walk


def _features(s: HRSScenario, walk: _Walk) -> tuple[str, list[str]]:
    order = {st.id: i for i, st in enumerate(s.steps)}
    rules = {r.id for r in s.rules}
    taken = [t for out in walk.outcomes for t in out.taken]
    found = set()
    for t in taken:
        if t.node in rules:
            found.add("rule")
        if t.then == "goto" and t.target in order and t.at in order:
            if order[t.target] > order[t.at] + 1:
                found.add("jump")
            elif order[t.target] <= order[t.at]:
                found.add("loop")
    visited_per_turn = [set(out.visited) for out in walk.outcomes]
    if any(visited_per_turn[i] & visited_per_turn[j] for i in range(len(visited_per_turn))
           for j in range(i + 1, len(visited_per_turn))):
        found.add("loop")
    for step_id in {v for out in walk.outcomes for v in out.visited}:
        st = s.step(step_id)
        if st and not s.waits(st) and not any(a.fact == REPLY for b in st.branches for a in atoms_of(b.when)):
            found.add("check")
    last = walk.outcomes[-1].taken[-1]
    ending = "end" if last.then == "end" else "answer" if last.then == "answer" else "advance"
    return ending, [f for f in FEATURES if f in found]


@dataclass
class _Candidate:
    draft: Draft
    covers: set[str]
    target: str
    shortcut: bool
    depth: int


def _script_of(s: HRSScenario, node_id: str) -> str | None:
    return next((b.script for st in s.steps for b in st.branches if b.id == node_id), None)


def _draft(s: HRSScenario, walk: _Walk, ending: str, features: list[str]) -> Draft:
    turns = []
    for index, turn in enumerate(walk.turns, start=1):
        asks_kb = any(t.then == "answer" and not _script_of(s, t.node) for t in walk.outcomes[index - 1].taken)
        turns.append(UserTurnPlan(index=index, reply=turn.reply, question=turn.question if asks_kb else None,
                                  facts=sorted(f for f, i in walk.stated.items() if i == index)))
    facts = {f: walk.point[f] for f in sorted(walk.stated)}
    path = [t.node for out in walk.outcomes for t in out.taken]
    return Draft(facts=facts, turns=turns, path=path, path_kind=ending, features=features)


def hrs_drafts(s: HRSScenario, logic: Logic, count: int, max_turns: int, rng: random.Random) -> list[Draft]:
    """``count`` drafts covering the procedure, none a shortcut solves where the scenario allows it."""
    case_facts = sorted({a.fact for a in s.all_atoms() if a.fact != REPLY})
    pool: dict[tuple, _Candidate] = {}
    for _ in range(HRS_CANDIDATES):
        walk = _walk(s, logic, case_facts, max_turns, rng)
        if walk is None:
            continue
        key = (tuple((t.reply, t.question) for t in walk.turns), tuple(sorted((f, walk.point[f]) for f in walk.stated)))
        if key in pool:
            continue
        ending, features = _features(s, walk)
        draft = _draft(s, walk, ending, features)
        final = walk.outcomes[-1].answer
        covers = ({t.node for out in walk.outcomes for t in out.taken} | {v for out in walk.outcomes for v in out.visited}
                  | {f"ending:{ending}"} | {f"feature:{f}" for f in features})
        wins = shortcut_wins(s, logic, draft, final) if len(walk.turns) > 1 else ["single turn"]
        pool[key] = _Candidate(draft, covers, answer_key(final), bool(wins),
                               len({v for out in walk.outcomes for v in out.visited}))
    candidates = list(pool.values())
    rng.shuffle(candidates)
    chosen: list[Draft] = []
    covered: set[str] = set()
    answers: set[str] = set()
    # a global rule that ends the call fires at any step, so the last turn alone solves it: a few such plans
    # are worth their coverage (one in six), the rest must need the whole conversation
    budget = count // 6
    while candidates and len(chosen) < count:
        allowed = budget > 0
        best = max(candidates, key=lambda c: (not c.shortcut or (allowed and bool(c.covers - covered - {"R"})),
                                              c.target not in answers, len(c.covers - covered), not c.shortcut,
                                              c.depth))
        budget -= best.shortcut
        candidates.remove(best)
        # walks that differ only in a knowledge-base question nobody asked make the same instance
        if any(d.facts == best.draft.facts and d.turns == best.draft.turns for d in chosen):
            continue
        chosen.append(best.draft)
        covered |= best.covers
        answers.add(best.target)
    return chosen
