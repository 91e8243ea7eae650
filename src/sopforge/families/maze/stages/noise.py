"""Noise that matters: each phenomenon carries a decoy chosen so that taking it changes the answer.

SOP-Maze's conversational fragility and calculation errors (L151-161) are not style: "they directly
affect which SOP branch is applicable". So every phenomenon here has a **decoy**, what a careless
reader takes instead of the truth, and the decoy is chosen, where the scenario allows it, so that
the tree executed with it gives a different single answer:

| phenomenon | LRS decoy | HRS decoy |
|---|---|---|
| intent_reversal | a value first stated, revoked in a later turn of its own | a reply kind the turn first sounds like |
| sarcasm | the literal reading of an enum or boolean fact | the reply kind the literal words suggest |
| disfluency | background speech that would state another value | background speech that sounds like another reply |
| off_topic | an unrelated turn mentioning another value about something else | an unrelated remark that would read as another reply |
| calculation | the naive computation: both end days counted, calendar instead of business days, the mean instead of the median, one addend for the sum, the larger number for the difference | same |

Shares decide how many instances get each phenomenon; every phenomenon with a share appears at least
once per scenario; then instances whose noise changes nothing get an answer-changing phenomenon
until at least half of the noisy instances have one (where the scenario offers one).
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any, Callable

from sopforge.families.maze.models.dates import (
    add_business_days, business_days_between, holiday_set, long_date, subtract_business_days,
)
from sopforge.families.maze.models.execution import Turn, run_values
from sopforge.families.maze.models.instances import NoisePlan, UserTurnPlan
from sopforge.families.maze.models.logic import Fact, FactValue, Logic
from sopforge.families.maze.models.scenario import HRSScenario, Scenario
from sopforge.families.maze.stages.sampling import Draft
from sopforge.families.maze.verify.shortcuts import read_answer, same_answer

__all__ = ["CHANGING_ORDER", "assign_noise", "calculation_options"]

# the phenomena tried, in order, when an instance needs noise that changes its answer
CHANGING_ORDER = ("intent_reversal", "calculation", "sarcasm", "disfluency", "off_topic")


def _show(value: FactValue) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class _Ctx:
    """What placing noise on one draft needs: the scenario, its logic, the draft's answer and the rng."""

    def __init__(self, s: Scenario, logic: Logic, draft: Draft, rng: random.Random, max_turns: int):
        self.s, self.logic, self.draft, self.rng, self.max_turns = s, logic, draft, rng, max_turns
        self.hrs = isinstance(s, HRSScenario)
        self.target = self.answer(draft.facts, None)
        self.changed = False  # some noise placed so far changes the answer

    def add(self, noise: NoisePlan, changes: bool) -> bool:
        self.draft.noise.append(noise)
        self.changed = self.changed or changes
        return True

    def answer(self, facts: dict[str, FactValue], turns: list[Turn] | None) -> dict[str, Any] | None:
        if self.hrs and turns is None:
            turns = [Turn(t.reply, t.question) for t in self.draft.turns]
        run = run_values(self.s, self.logic, facts, turns if self.hrs else None)
        return run.answer if run.ok else None

    def changes_fact(self, fact: str, value: FactValue, moved: dict[str, FactValue] | None = None) -> bool:
        """Taking ``value`` for ``fact`` gives another single answer (``moved``: facts set to another value
        with the same answer first, as a calculation does)."""
        if not self.logic.facts[fact].accepts(value):
            return False
        base = {**self.draft.facts, **(moved or {})}
        target = self.answer(base, None) if moved else self.target
        found = self.answer({**base, fact: value}, None)
        return found is not None and not same_answer(found, target)

    def same_route(self, facts: dict[str, FactValue]) -> bool:
        """``facts`` lead to the draft's answer, reported details aside."""
        found = self.answer(facts, None)
        strip = lambda a: {k: v for k, v in (a or {}).items() if k != "details"}  # noqa: E731
        return found is not None and same_answer(strip(found), strip(self.target))

    def changes_reply(self, index: int, reply: str) -> bool:
        turns = [Turn(t.reply, t.question) for t in self.draft.turns]
        turns[index - 1] = Turn(reply, turns[index - 1].question)
        found = self.answer(self.draft.facts, turns)
        return found is not None and not same_answer(found, self.target)

    def free_facts(self, types: tuple[str, ...]) -> list[str]:
        used = {n.fact for n in self.draft.noise if n.fact}
        return [f for f in self.draft.facts if f not in used and self.logic.facts[f].type in types
                and not self.logic.facts[f].derivation]

    def other_values(self, fact: str) -> list[FactValue]:
        """One value per other cell of ``fact`` (enum values, the other boolean, an integer per other cell)."""
        current = self.logic.cell_of(fact, self.draft.facts[fact])
        return [self.logic.sample_value(fact, i, self.rng) for i in range(len(self.logic.cells[fact])) if i != current]

    def pick(self, options: list[Any], changes: Callable[[Any], bool], *, must_change: bool) -> tuple[Any, bool] | None:
        """A random option, one that changes the answer when there is one (None: nothing suitable)."""
        self.rng.shuffle(options)
        for option in options:
            if changes(option):
                return option, True
        if must_change or not options:
            return None
        return options[0], False

    def fact_turn(self, fact: str) -> int:
        return next(t.index for t in self.draft.turns if fact in t.facts)


def assign_noise(s: Scenario, logic: Logic, drafts: list[Draft], shares: dict[str, float], rng: random.Random, *,
                 max_turns: int) -> None:
    """Give the drafts their noise (see the module docstring)."""
    contexts = [_Ctx(s, logic, d, rng, max_turns) for d in drafts]
    for ctx in contexts:
        for phenomenon, share in shares.items():
            if share > 0 and rng.random() < share:
                _add(ctx, phenomenon, must_change=False)
    for phenomenon, share in shares.items():
        if share > 0 and not any(n.phenomenon == phenomenon for d in drafts for n in d.noise):
            for ctx in sorted(contexts, key=lambda c: len(c.draft.noise)):
                if _add(ctx, phenomenon, must_change=False):
                    break
    allowed = [p for p in CHANGING_ORDER if shares.get(p, 0) > 0]
    for ctx in contexts:  # the verdict is recomputed when the plan is finished; this only steers the placement
        noisy = [c for c in contexts if c.draft.noise]
        if 2 * sum(c.changed for c in noisy) >= len(noisy):
            break
        if ctx.draft.noise and not ctx.changed:
            for phenomenon in allowed:
                if _add(ctx, phenomenon, must_change=True):
                    break


def _add(ctx: _Ctx, phenomenon: str, *, must_change: bool) -> bool:
    if phenomenon == "calculation":
        return _calculation(ctx, must_change)
    if ctx.hrs:
        return _reply_noise(ctx, phenomenon, must_change)
    return _fact_noise(ctx, phenomenon, must_change)


# ------------------------------------------------------------------------------------------ LRS facts

def _fact_noise(ctx: _Ctx, phenomenon: str, must_change: bool) -> bool:
    draft = ctx.draft
    if phenomenon == "off_topic" and any(t.off_topic for t in draft.turns):
        return False
    types = ("enum", "boolean") if phenomenon == "sarcasm" else ("enum", "boolean", "integer")
    options = [(f, v) for f in ctx.free_facts(types) for v in ctx.other_values(f)]
    if phenomenon == "intent_reversal" and len(draft.turns) >= ctx.max_turns + 1:
        return False
    changes = (lambda o: ctx.changes_fact(*o) and not _reversal_solved(ctx, o[0])) if phenomenon == "intent_reversal" \
        else (lambda o: ctx.changes_fact(*o))
    picked = ctx.pick(options, changes, must_change=must_change)
    if picked is None:
        if phenomenon in ("disfluency", "off_topic") and not must_change:
            return _plain(ctx, phenomenon)
        return False
    (fact, decoy), changes = picked
    value = draft.facts[fact]
    if phenomenon == "intent_reversal":
        old = ctx.fact_turn(fact)
        draft.turns[old - 1].facts.remove(fact)
        draft.turns.append(UserTurnPlan(index=len(draft.turns) + 1, facts=[fact]))
        turn = len(draft.turns)
        return ctx.add(NoisePlan(phenomenon="intent_reversal", user_turn=turn, fact=fact, decoy=decoy, decoy_turn=old,
                                 instruction=f"in user turn {old} the customer says {fact} is {_show(decoy)} as if it "
                                             f"were true; user turn {turn} is a short turn of its own that takes it "
                                             f"back: {fact} is {_show(value)}, and that is final"), changes)
    turn = ctx.fact_turn(fact)
    if phenomenon == "sarcasm":
        text = (f"convey {fact} = {_show(value)} sarcastically: taken literally the words would mean {fact} = "
                f"{_show(decoy)}, but in context the meaning is unmistakably {_show(value)}; do not restate it plainly")
    elif phenomenon == "disfluency":
        text = (f"fillers, false starts and self-corrections, and background speech (another person, a TV, a car's "
                f"navigation) mixed into the turn that, taken as the customer's words, would say {fact} = "
                f"{_show(decoy)}; the customer's own words say {fact} = {_show(value)}")
    else:
        turn = _insert_off_topic(draft, ctx.rng)
        text = (f"the whole turn is about something unrelated to this request (another person, another matter) and in "
                f"passing mentions {fact} = {_show(decoy)} about that other matter; it says nothing about this "
                "customer's own case")
    return ctx.add(NoisePlan(phenomenon=phenomenon, user_turn=turn, fact=fact, decoy=decoy,  # type: ignore[arg-type]
                             instruction=text), changes)


def _reversal_solved(ctx: _Ctx, fact: str) -> bool:
    """Whether moving ``fact`` to a last turn of its own would let the last-turn shortcut solve the draft."""
    facts = ctx.draft.facts
    answer, _ = read_answer(ctx.s, {fact: facts[fact]}, [None], ctx.logic)
    return same_answer(answer, ctx.target)


def _insert_off_topic(draft: Draft, rng: random.Random) -> int:
    position = rng.randint(1, len(draft.turns))  # a new turn before the turn now at this position
    for n in draft.noise:
        n.user_turn += n.user_turn >= position
        if n.decoy_turn is not None:
            n.decoy_turn += n.decoy_turn >= position
    draft.turns.insert(position - 1, UserTurnPlan(index=position, off_topic=True))
    for i, t in enumerate(draft.turns, start=1):
        t.index = i
    return position


def _plain(ctx: _Ctx, phenomenon: str) -> bool:
    draft = ctx.draft
    if phenomenon == "disfluency":
        draft.noise.append(NoisePlan(phenomenon="disfluency", user_turn=ctx.rng.randint(1, len(draft.turns)),
                                     instruction="fillers, false starts and self-corrections, with words from someone "
                                                 "or something else in the background (another person, a TV, a car's "
                                                 "navigation) mixed into the user's speech"))
        return True
    if ctx.hrs:
        draft.noise.append(NoisePlan(phenomenon="off_topic", user_turn=ctx.rng.randint(1, len(draft.turns)),
                                     instruction="the user first makes an unrelated remark that is not a question for "
                                                 "the agent (the weather, their day, someone nearby), then gives the reply"))
        return True
    turn = _insert_off_topic(draft, ctx.rng)
    draft.noise.append(NoisePlan(phenomenon="off_topic", user_turn=turn,
                                 instruction="the whole turn is about something unrelated to the request and states no fact"))
    return True


# ------------------------------------------------------------------------------------------ HRS replies

def _reply_noise(ctx: _Ctx, phenomenon: str, must_change: bool) -> bool:
    draft = ctx.draft
    taken = {n.user_turn for n in draft.noise if n.fact is None and n.decoy is not None}
    replies = [r.name for r in ctx.s.replies]  # type: ignore[union-attr]
    options = [(t.index, r) for t in draft.turns if t.index not in taken for r in replies if r != t.reply]
    picked = ctx.pick(options, lambda o: ctx.changes_reply(*o), must_change=True)
    if picked is None:
        if phenomenon in ("disfluency", "off_topic") and not must_change:
            return _plain(ctx, phenomenon)
        if must_change or not options:
            return False
        picked = (ctx.rng.choice(options), False)
    (index, decoy), changes = picked
    reply = draft.turns[index - 1].reply
    text = {
        "intent_reversal": f"the turn first sounds like a {decoy!r} reply, then the user changes their mind within the "
                           f"same turn and {reply!r} is what they mean, unmistakably; no plain restatement afterwards",
        "sarcasm": f"the user says it sarcastically: taken literally the words sound like a {decoy!r} reply, but the "
                   f"meaning is clearly {reply!r}",
        "disfluency": f"fillers and false starts, with background speech (someone else, a TV, a car's navigation) that "
                      f"sounds like a {decoy!r} reply; the user's own words are a {reply!r} reply",
        "off_topic": f"before replying, the user makes an unrelated remark to someone else or about something else "
                     f"that, taken on its own, would sound like a {decoy!r} reply; then the user gives the {reply!r} "
                     "reply",
    }[phenomenon]
    return ctx.add(NoisePlan(phenomenon=phenomenon, user_turn=index, decoy=decoy,  # type: ignore[arg-type]
                             instruction=text), changes)


# ------------------------------------------------------------------------------------------ calculation

_HOW = {"interval_days": "the two dates it counts the calendar days between",
        "business_days": "the two dates it counts the business days between",
        "median": "the numbers it is the median of", "sum": "the numbers it is the sum of",
        "difference": "the two numbers it is the difference of"}


def calculation_options(s: Scenario, fact: Fact, value: int, alternatives: list[int], call_date: str,
                        rng: random.Random) -> list[tuple[int, list[str], int]]:
    """Ways to state ``fact`` through operands: (the value, ``value`` or one of the ``alternatives`` (values
    with the same answer, so that the naive reading can cross a threshold); the operands; the naive
    reader's value). Empty when the derivation cannot express the value."""
    low, high = fact.minimum or 0, fact.maximum or value
    call = date.fromisoformat(call_date)
    found: list[tuple[int, list[str], int]] = []
    if fact.derivation in ("interval_days", "business_days"):
        holidays = holiday_set(s.holidays)
        for v in sorted({value, *alternatives}):
            for _ in range(3):
                if fact.interval_anchor == "until_call":
                    end = call
                    start = (end - timedelta(days=v) if fact.derivation == "interval_days"
                             else subtract_business_days(end, v, holidays) - timedelta(days=rng.randrange(2)))
                else:
                    start = call + timedelta(days=rng.randint(1, 14))
                    end = start + timedelta(days=v) if fact.derivation == "interval_days" else add_business_days(
                        start, v, holidays)
                if fact.derivation == "business_days" and business_days_between(start, end, holidays) != v:
                    continue
                naive = (end - start).days + 1 if fact.derivation == "interval_days" else (end - start).days
                found.append((v, [long_date(start.isoformat()), long_date(end.isoformat())], naive))
        return found
    if fact.derivation == "median":
        spread = max(2, (high - low) // 5)
        for _ in range(8):
            below = sorted(rng.randint(max(low, value - spread), value) for _ in range(2))
            above = [rng.randint(value, min(high, value + spread)), rng.randint(value, high)]
            if rng.random() < 0.5:
                below[0] = rng.randint(low, value)
            numbers = below + [value] + above
            rng.shuffle(numbers)
            found.append((value, [str(n) for n in numbers], round(sum(numbers) / len(numbers))))
        return found
    if fact.derivation == "sum" and value >= 2:
        for _ in range(6):
            part = rng.randint(1, value - 1)
            found.append((value, [str(value - part), str(part)], part))
        return found
    if fact.derivation == "difference":
        for _ in range(6):
            bigger = value + rng.randint(1, max(2, high - low))
            found.append((value, [str(bigger), str(bigger - value)], bigger))
    return found


def _calculation(ctx: _Ctx, must_change: bool) -> bool:
    used = {n.fact for n in ctx.draft.noise if n.fact}
    options = []
    for name in ctx.draft.facts:
        fact = ctx.logic.facts[name]
        if fact.derivation and name not in used:
            # the boundary values of every cell where the answer stays the same (the option, if not the details)
            bounds = sorted({v for c in ctx.logic.cells[name] for v in (c.low, c.high)})  # type: ignore[misc]
            same = [v for v in bounds if ctx.same_route({**ctx.draft.facts, name: v})]
            options += [(name, *o) for o in calculation_options(ctx.s, fact, ctx.draft.facts[name], same,  # type: ignore[arg-type]
                                                                 ctx.draft.call_date, ctx.rng)]
    picked = ctx.pick(options, lambda o: ctx.changes_fact(o[0], o[3], {o[0]: o[1]}), must_change=must_change)
    if picked is None:
        return False
    (name, value, operands, naive), changes = picked
    ctx.draft.facts[name] = value
    ctx.target = ctx.answer(ctx.draft.facts, None)
    fact = ctx.logic.facts[name]
    return ctx.add(NoisePlan(
        phenomenon="calculation", user_turn=ctx.fact_turn(name), fact=name, decoy=naive, operands=operands,
        instruction=f"convey {name} only through {_HOW[fact.derivation]}: {', '.join(operands)} (write each "  # type: ignore[index]
                    f"exactly like that); never state the value {value} itself"), changes)
