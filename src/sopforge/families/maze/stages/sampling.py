"""Sampling instance plans in code: facts, the path through the tree, the noise, the input format.

The paper collects real inputs (L70-79); we generate them, so what an input must say is decided
here, seeded, before any model writes (issue 14 item 2). The reference answer is the execution
of the tree on the sampled facts, so it is known before the dialogue exists.

* **LRS**: targets cycle through the categories (every category once before any twice), a
  random option in each. :meth:`Logic.solve_unique` finds a region where the target option is
  the only one that holds; a point is drawn in it.
* **HRS**: many random conversations are walked (a random point of case facts, at each waiting
  step a random reply among those that select exactly one sub-step, a random length up to
  ``max_turns``); plans are then picked greedily so the set covers every ending kind (end,
  advance, answer) and path feature (loop, jump, rule, check) at least once.

A plan states only the facts the decisions along its path read: the facts of each condition
taken, plus one fact that falsifies each competing condition (one already stated when there is
one). Executing the tree with every other fact unknown must give the same answer, which
:func:`plan_instances` asserts: unstated facts cannot change the reference answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from sopforge.families.maze.models.execution import (
    Execution, Turn, compile_logic, decision_groups, hrs_turn, run_hrs, run_lrs,
)
from sopforge.families.maze.models.instances import INPUT_FORMATS, InstancePlan, NoisePlan, UserTurnPlan, long_date
from sopforge.families.maze.models.logic import REPLY, Atom, Fact, FactValue, Logic
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, Scenario, atoms_of

__all__ = ["ENDINGS", "FEATURES", "PlanError", "plan_instances"]

ENDINGS = ("end", "advance", "answer")
FEATURES = ("loop", "jump", "rule", "check")
HRS_CANDIDATES = 400  # random conversations walked per HRS scenario before picking plans
_BASE_DATE = date(2025, 1, 6)


class PlanError(ValueError):
    """The scenario admits no plan (an unreachable target slipped past the checks, or no conversation)."""


def plan_instances(scenario: Scenario, count: int, *, noise: dict[str, float], max_turns: int,
                   seed: int) -> list[InstancePlan]:
    """``count`` seeded plans for ``scenario``, with their reference answers computed.

    Raises:
        PlanError: fewer than ``count`` distinct plans exist.
    """
    rng = random.Random(f"{seed}:{scenario.kind}:{scenario.name}")
    logic = compile_logic(scenario)
    drafts = (_lrs_drafts(scenario, logic, count, rng) if isinstance(scenario, LRSScenario)
              else _hrs_drafts(scenario, logic, count, max_turns, rng))
    if len(drafts) < count:
        raise PlanError(f"scenario {scenario.name}: only {len(drafts)} distinct instances can be planned, "
                        f"{count} were asked for")
    prefix = "L" if scenario.kind == "LRS" else "H"
    formats = list(INPUT_FORMATS)
    rng.shuffle(formats)
    plans = []
    for index, draft in enumerate(drafts[:count], start=1):
        draft.call_date = (_BASE_DATE + timedelta(days=rng.randrange(300))).isoformat()
        draft.format = formats[(index - 1) % len(formats)]
        plans.append(draft)
    _assign_noise(scenario, plans, noise, rng)
    return [_finish(scenario, logic, f"{prefix}{i}", d) for i, d in enumerate(plans, start=1)]


@dataclass
class _Draft:
    facts: dict[str, FactValue]
    turns: list[UserTurnPlan]
    path: list[str]
    path_kind: str
    features: list[str] = field(default_factory=list)
    noise: list[NoisePlan] = field(default_factory=list)
    format: str = "speaker_tags"
    call_date: str = _BASE_DATE.isoformat()


def _needed(known: set[str], target: list[Atom], competitors: list[list[Atom]], values: dict[str, FactValue]) -> set[str]:
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

def _lrs_drafts(s: LRSScenario, logic: Logic, count: int, rng: random.Random) -> list[_Draft]:
    leaves = [(c, o, s.leaf_atoms(c, o)) for c, o in s.leaves()]
    by_category = {c.id: [leaf for leaf in leaves if leaf[0].id == c.id] for c in s.categories}
    order = list(by_category)
    rng.shuffle(order)
    for options in by_category.values():
        rng.shuffle(options)
    facts_read = sorted({a.fact for _, _, atoms in leaves for a in atoms})
    drafts: list[_Draft] = []
    round_ = 0
    while len(drafts) < count and round_ < max(len(v) for v in by_category.values()):
        for category_id in order:
            if len(drafts) == count or round_ >= len(by_category[category_id]):
                continue
            category, option, atoms = by_category[category_id][round_]
            competitors = [a for c, o, a in leaves if o.id != option.id]
            region = logic.solve_unique(atoms, competitors, rng=rng)
            if region is None:
                continue
            point = logic.sample_point(region, facts_read, rng)
            stated = _needed(set(), atoms, competitors, point)
            facts = {f: point[f] for f in sorted(stated)}
            drafts.append(_Draft(facts=facts, turns=_lrs_turns(facts, rng), path=[category.id, option.id],
                                 path_kind=category.id))
        round_ += 1
    return drafts


def _lrs_turns(facts: dict[str, FactValue], rng: random.Random) -> list[UserTurnPlan]:
    names = list(facts)
    rng.shuffle(names)
    n = max(2, min(4, (len(names) + 1) // 2))
    turns = [UserTurnPlan(index=i + 1) for i in range(n)]
    for k, name in enumerate(names):
        turns[k % n].facts.append(name)
    return turns


# ------------------------------------------------------------------------------------------ HRS

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
    for index in range(1, rng.randint(1, max_turns) + 1):
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
            _needed(known, atoms[taken.node], competitors, values)
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


def _hrs_drafts(s: HRSScenario, logic: Logic, count: int, max_turns: int, rng: random.Random) -> list[_Draft]:
    case_facts = sorted({a.fact for a in s.all_atoms() if a.fact != REPLY})
    pool: dict[tuple, tuple[_Walk, str, list[str]]] = {}
    for _ in range(HRS_CANDIDATES):
        walk = _walk(s, logic, case_facts, max_turns, rng)
        if walk is None:
            continue
        key = (tuple((t.reply, t.question) for t in walk.turns), tuple(sorted((f, walk.point[f]) for f in walk.stated)))
        if key not in pool:
            pool[key] = (walk, *_features(s, walk))
    candidates = list(pool.values())
    rng.shuffle(candidates)
    chosen: list[_Draft] = []
    covered: set[str] = set()
    while candidates and len(chosen) < count:
        # most new coverage first, then the most distinct steps (deep routes), then sampling order
        best = max(candidates, key=lambda c: (len(({c[1]} | set(c[2])) - covered),
                                              len({v for out in c[0].outcomes for v in out.visited})))
        candidates.remove(best)
        draft = _hrs_draft(s, *best)
        # walks that differ only in a knowledge-base question nobody asked make the same instance
        if any(d.facts == draft.facts and d.turns == draft.turns for d in chosen):
            continue
        chosen.append(draft)
        covered |= {best[1], *best[2]}
    return chosen


def _hrs_draft(s: HRSScenario, walk: _Walk, ending: str, features: list[str]) -> _Draft:
    turns = []
    for index, turn in enumerate(walk.turns, start=1):
        asks_kb = any(t.then == "answer" and not _script_of(s, t.node) for t in walk.outcomes[index - 1].taken)
        turns.append(UserTurnPlan(index=index, reply=turn.reply, question=turn.question if asks_kb else None,
                                  facts=sorted(f for f, i in walk.stated.items() if i == index)))
    facts = {f: walk.point[f] for f in sorted(walk.stated)}
    path = [t.node for out in walk.outcomes for t in out.taken]
    return _Draft(facts=facts, turns=turns, path=path, path_kind=ending, features=features)


def _script_of(s: HRSScenario, node_id: str) -> str | None:
    return next((b.script for st in s.steps for b in st.branches if b.id == node_id), None)


# ------------------------------------------------------------------------------------------ noise

def _assign_noise(s: Scenario, drafts: list[_Draft], shares: dict[str, float], rng: random.Random) -> None:
    """Draw each phenomenon per instance with its share, then make sure every phenomenon with a
    share above 0 appears at least once in the scenario (where some instance can carry it)."""
    for draft in drafts:
        for phenomenon, share in shares.items():
            if share > 0 and rng.random() < share:
                _add_noise(s, draft, phenomenon, rng)
    for phenomenon, share in shares.items():
        if share > 0 and not any(n.phenomenon == phenomenon for d in drafts for n in d.noise):
            for draft in sorted(drafts, key=lambda d: len(d.noise)):
                if _add_noise(s, draft, phenomenon, rng):
                    break


def _fact_turn(draft: _Draft, fact: str) -> int:
    return next(t.index for t in draft.turns if fact in t.facts)


def _add_noise(s: Scenario, draft: _Draft, phenomenon: str, rng: random.Random) -> bool:
    """Add ``phenomenon`` to ``draft`` if it has a place for it; returns whether it was added."""
    used = {(n.phenomenon, n.fact, n.user_turn) for n in draft.noise}
    taken_facts = {n.fact for n in draft.noise if n.fact}
    hrs = isinstance(s, HRSScenario)
    last = len(draft.turns)
    if phenomenon == "calculation":
        options = [f for f in draft.facts if (fact := s.fact(f)) and fact.derivation and f not in taken_facts
                   and _operands(fact, draft.facts[f], draft.call_date, rng, dry=True)]
        if not options:
            return False
        name = rng.choice(sorted(options))
        fact = s.fact(name)
        operands = _operands(fact, draft.facts[name], draft.call_date, rng)  # type: ignore[arg-type]
        how = {"interval_days": "the two dates it counts the days between", "median": "the numbers it is the median of",
               "sum": "the numbers it is the sum of", "difference": "the two numbers it is the difference of"}
        draft.noise.append(NoisePlan(
            phenomenon="calculation", user_turn=_fact_turn(draft, name), fact=name, operands=operands,
            instruction=f"convey {name} only through {how[fact.derivation]}: "  # type: ignore[index]
                        f"{', '.join(operands)} (write each exactly like that); never state the value {draft.facts[name]} itself"))
        return True
    if phenomenon in ("intent_reversal", "sarcasm") and not hrs:
        options = [f for f in draft.facts if s.fact(f).type in ("enum", "boolean") and f not in taken_facts]  # type: ignore[union-attr]
        if not options:
            return False
        name = rng.choice(sorted(options))
        value, fact = draft.facts[name], s.fact(name)
        if phenomenon == "sarcasm":
            draft.noise.append(NoisePlan(phenomenon="sarcasm", user_turn=_fact_turn(draft, name), fact=name,
                                         instruction=f"convey {name} = {_show(value)} sarcastically: the literal words "
                                                     "suggest the opposite, the meaning is unmistakable in context"))
            return True
        decoy = (not value) if fact.type == "boolean" else rng.choice([v for v in fact.values if v != value])  # type: ignore[union-attr]
        turn = _fact_turn(draft, name)
        speaking = [t for t in draft.turns if not t.off_topic]
        if turn == speaking[0].index:  # the reversal needs an earlier turn for the first statement
            speaking[0].facts.remove(name)
            speaking[1].facts.append(name)
            turn = speaking[1].index
        decoy_turn = max(t.index for t in speaking if t.index < turn)
        draft.noise.append(NoisePlan(phenomenon="intent_reversal", user_turn=turn, fact=name, decoy=decoy,
                                     decoy_turn=decoy_turn,
                                     instruction=f"in user turn {decoy_turn} the caller says {name} is {_show(decoy)}; "
                                                 f"in user turn {turn} they reverse it, and {_show(value)} is final"))
        return True
    if phenomenon == "intent_reversal":
        turn = draft.turns[-1]
        if ("intent_reversal", None, turn.index) in used or ("sarcasm", None, turn.index) in used:
            return False
        others = [r.name for r in s.replies if r.name != turn.reply]  # type: ignore[union-attr]
        decoy = rng.choice(others)
        draft.noise.append(NoisePlan(phenomenon="intent_reversal", user_turn=turn.index, decoy=decoy,
                                     instruction=f"the turn first sounds like a {decoy!r} reply, then the user changes "
                                                 f"their mind within the same turn and {turn.reply!r} is what they mean"))
        return True
    free = [t.index for t in draft.turns if not any(n.user_turn == t.index and n.fact is None for n in draft.noise)]
    if phenomenon == "sarcasm":
        if not free:
            return False
        index = free[-1]
        draft.noise.append(NoisePlan(phenomenon="sarcasm", user_turn=index, instruction=(
            f"the user says it sarcastically: the literal words point the other way, but the reply is clearly "
            f"{draft.turns[index - 1].reply!r}")))
        return True
    if phenomenon == "disfluency":
        index = rng.randint(1, last)
        draft.noise.append(NoisePlan(phenomenon="disfluency", user_turn=index, instruction=(
            "fillers, false starts and self-corrections, with words from someone or something else in the "
            "background (another person, a TV, a car's navigation) mixed into the user's speech")))
        return True
    if phenomenon == "off_topic":
        if hrs:
            index = rng.randint(1, last)
            draft.noise.append(NoisePlan(phenomenon="off_topic", user_turn=index, instruction=(
                "the user first makes an unrelated remark that is not a question for the agent (about the weather, "
                "their day, someone nearby), then gives the reply")))
            return True
        if any(t.off_topic for t in draft.turns):
            return False
        position = rng.randint(1, last)  # a new turn before the turn now at this position
        for n in draft.noise:
            n.user_turn += n.user_turn >= position
            if n.decoy_turn is not None:
                n.decoy_turn += n.decoy_turn >= position
        draft.turns.insert(position - 1, UserTurnPlan(index=position, off_topic=True))
        for i, t in enumerate(draft.turns, start=1):
            t.index = i
        draft.noise.append(NoisePlan(phenomenon="off_topic", user_turn=position, instruction=(
            "the whole turn is about something unrelated to the request and states no fact")))
        return True
    return False


def _show(value: FactValue) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _operands(fact: Fact, value: FactValue, call_date: str, rng: random.Random, *, dry: bool = False) -> list[str]:
    """What the dialogue states instead of ``value`` (empty when the value cannot be expressed that way)."""
    assert isinstance(value, int)
    low, high = fact.minimum or 0, fact.maximum or value
    if fact.derivation == "interval_days":
        call = date.fromisoformat(call_date)
        if dry:
            return ["ok"]
        start = call - timedelta(days=value) if fact.interval_anchor == "until_call" else call + timedelta(
            days=rng.randint(1, 14))
        return [long_date(start.isoformat()), long_date((start + timedelta(days=value)).isoformat())]
    if fact.derivation == "median":
        if dry:
            return ["ok"]
        spread = max(1, (high - low) // 5)
        below = sorted(rng.randint(max(low, value - spread), value) for _ in range(2))
        above = sorted(rng.randint(value, min(high, value + spread)) for _ in range(2))
        numbers = below + [value] + above
        rng.shuffle(numbers)
        return [str(n) for n in numbers]
    if fact.derivation == "sum":
        if value < 2:
            return []
        part = rng.randint(1, value - 1)
        return [str(part), str(value - part)]
    if fact.derivation == "difference":
        bigger = value + rng.randint(1, 40)
        return [str(bigger), str(bigger - value)]
    return []


# ------------------------------------------------------------------------------------------ finish

def _finish(s: Scenario, logic: Logic, plan_id: str, draft: _Draft) -> InstancePlan:
    """Execute the tree on the stated facts only and attach the reference answer and agent lines."""
    region = logic.region_of(draft.facts)
    if isinstance(s, LRSScenario):
        run: Execution = run_lrs(s, logic, region)
    else:
        run = run_hrs(s, logic, region, [Turn(t.reply, t.question) for t in draft.turns])
        for turn, line in zip(draft.turns, run.agent_lines):
            turn.agent_line = line
    if not run.ok:
        raise PlanError(f"{plan_id}: the stated facts do not determine one answer: {run.error}")
    return InstancePlan(id=plan_id, kind=s.kind, facts=draft.facts, turns=draft.turns, noise=draft.noise,
                        path=draft.path, path_kind=draft.path_kind, features=draft.features, target=run.answer,
                        input_format=draft.format, call_date=draft.call_date)  # type: ignore[arg-type]
