"""Executing an SOP tree on the facts: the reference answer, and a proof that it is the only one.

One function per kind, both on a *region* (what is known: stated facts are one cell, the rest
unknown, see :mod:`.logic`), so the same code computes a reference answer from sampled facts,
re-derives it from what an independent reader extracted, and tells a shortcut reader's answer
from an undetermined one.

At every decision the candidates are judged on the whole region: the answer is **unique** when
exactly one candidate is true everywhere and every other one false everywhere. Anything else
(two candidates true, or one whose truth depends on an unstated fact) stops the execution with
the ids involved: the instance does not determine a single answer. LRS options may state a
**precedence** (an exception ``overrides`` a general option): a candidate that holds is set aside
when a candidate that overrides it holds too, as the rendered SOP says.

HRS semantics (docs/families/maze.md, "Executing an HRS tree"): the conversation waits at a
step with a script. A user reply is matched first against the global rules, then against the
step's sub-steps; ``goto`` a step with a script says that script and waits there; ``goto`` a
step without one evaluates it at once on the same reply; ``answer`` replies and stays;
``end`` says its script and ends the call. The answer is what the agent does after the last
user turn (``step`` is the final index reached, as the paper's constraint says, L485).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sopforge.families.maze.models.logic import REPLY, Atom, Logic, Region, Tri
from sopforge.families.maze.models.scenario import (
    HRSScenario, LRSScenario, Scenario, Step, atoms_of,
)

__all__ = ["Decision", "Execution", "Taken", "Turn", "TurnOutcome", "compile_logic", "decide", "decision_groups",
           "hrs_turn", "lrs_answer", "run_hrs", "run_lrs", "run_scenario", "run_values"]

KB_PLACEHOLDER = "(the knowledge-base answer to the user's question)"


@dataclass(frozen=True)
class Turn:
    """One user turn as the HRS tree reads it: its reply kind (None: unknown) and, for a knowledge-base
    question, the index of the Q/A pair asked."""

    reply: str | None
    question: int | None = None


@dataclass(frozen=True)
class Decision:
    """The outcome of one decision point."""

    at: str
    status: Literal["unique", "ambiguous", "undetermined", "none"]
    taken: str | None = None
    candidates: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.status == "unique":
            return f"{self.at}: {self.taken}"
        if self.status == "none":
            return f"at {self.at} no condition holds"
        ids = ", ".join(self.candidates)
        why = "several conditions hold" if self.status == "ambiguous" else "depends on facts the input does not state"
        return f"at {self.at} {why} ({ids})"


@dataclass(frozen=True)
class Taken:
    """One branch, rule or option taken, with the turn it was taken on (HRS) and what it did."""

    turn: int
    node: str
    at: str
    then: str
    target: str | None = None


@dataclass
class Execution:
    """What executing a tree gave: the answer, or where it stopped being unique."""

    answer: dict[str, Any] | None = None
    decisions: list[Decision] = field(default_factory=list)
    taken: list[Taken] = field(default_factory=list)
    agent_lines: list[str] = field(default_factory=list)  # HRS: what the agent says before each user turn
    turn_answers: list[dict[str, Any]] = field(default_factory=list)  # HRS: the answer after each user turn
    visited: list[str] = field(default_factory=list)      # HRS: steps in the order they were evaluated
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.answer is not None


def compile_logic(scenario: Scenario) -> Logic:
    """The cells of the scenario's facts (and replies) under its atoms."""
    replies = [r.name for r in scenario.replies] if isinstance(scenario, HRSScenario) else []
    return Logic(scenario.facts, scenario.all_atoms(), replies)


def decide(logic: Logic, at: str, groups: list[list[tuple[str, list[Atom]]]], region: Region,
           overrides: dict[str, frozenset[str]] | None = None) -> Decision:
    """Judge candidate groups in precedence order (global rules before sub-steps) on ``region``.

    ``overrides`` (node -> nodes it takes precedence over): a candidate overridden by one that is
    true everywhere drops out, whatever its own truth; one that could override a true candidate
    but may or may not hold leaves the decision undetermined."""
    overrides = overrides or {}
    for group in groups:
        truths = {node_id: logic.truth(atoms, region) for node_id, atoms in group}
        beaten = {loser for node_id, tri in truths.items() if tri is Tri.TRUE for loser in overrides.get(node_id, ())}
        true = [n for n, tri in truths.items() if tri is Tri.TRUE and n not in beaten]
        unknown = [n for n, tri in truths.items() if tri is Tri.UNKNOWN and n not in beaten]
        if unknown:
            return Decision(at, "undetermined", candidates=tuple(true + unknown))
        if len(true) > 1:
            return Decision(at, "ambiguous", candidates=tuple(true))
        if true:
            return Decision(at, "unique", taken=true[0])
    return Decision(at, "none")


def lrs_answer(scenario: LRSScenario, option_id: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answer that names ``option_id`` (with its category, script and action, and ``details`` when the
    scenario reports facts), keys in the schema's order."""
    category, option = scenario.option(option_id)  # type: ignore[misc]
    answer: dict[str, Any] = {"category": category.id, "step": option.id}
    if scenario.report:
        answer["details"] = dict(details or {})
    answer.update(response=option.script, action=option.action)
    return answer


def run_lrs(scenario: LRSScenario, logic: Logic, region: Region, values: dict[str, Any] | None = None) -> Execution:
    """The one option whose condition (its category's and its own) holds on ``region``, with precedence.

    ``values``: the known facts' values, which the answer's ``details`` report (a scenario with
    ``report`` facts needs every one of them known)."""
    leaves = [(o.id, scenario.leaf_atoms(c, o)) for c, o in scenario.leaves()]
    decision = decide(logic, "root", [leaves], region, scenario.overrides_map())
    run = Execution(decisions=[decision])
    if decision.status != "unique":
        run.error = decision.describe()
        return run
    missing = [f for f in scenario.report if (values or {}).get(f) is None]
    if missing:
        run.error = f"the details to report are not all stated ({', '.join(missing)})"
        return run
    category, option = scenario.option(decision.taken)  # type: ignore[misc, arg-type]
    run.taken.append(Taken(turn=0, node=option.id, at=category.id, then="choose"))
    run.answer = lrs_answer(scenario, option.id, {f: values[f] for f in scenario.report} if values else {})
    return run


def decision_groups(scenario: HRSScenario, step: Step, with_rules: bool) -> list[list[tuple[str, list[Atom]]]]:
    """The candidates of one HRS decision in precedence order: the global rules (on the first decision
    of a turn), then the step's sub-steps."""
    groups = [[(r.id, atoms_of(r.when)) for r in scenario.rules]] if with_rules and scenario.rules else []
    return groups + [[(b.id, atoms_of(b.when)) for b in step.branches]]


@dataclass
class TurnOutcome:
    """One user turn from one waiting step: what was evaluated and taken, and where it leaves the call."""

    taken: list[Taken] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)
    answer: dict[str, Any] | None = None
    waiting_at: str | None = None  # the step the next user turn is evaluated at; None once the call ended
    error: str | None = None


def hrs_turn(scenario: HRSScenario, logic: Logic, step: Step, region: Region, turn: Turn, index: int = 1) -> TurnOutcome:
    """Evaluate one user reply at ``step`` (global rules first), following same-turn gotos."""
    out = TurnOutcome()
    region = dict(region)
    if turn.reply is not None:
        cell = logic.cell_of(REPLY, turn.reply)
        if cell is None:
            out.error = f"user turn {index}: unknown reply kind {turn.reply!r}"
            return out
        region[REPLY] = frozenset({cell})
    rules = {r.id: r for r in scenario.rules}
    current, first = step, True
    while True:
        if current.id in out.visited:
            out.error = (f"user turn {index}: steps {', '.join(dict.fromkeys(out.visited))} loop without waiting "
                         "for the user")
            return out
        out.visited.append(current.id)
        decision = decide(logic, f"Step {current.id}", decision_groups(scenario, current, first), region)
        out.decisions.append(decision)
        if decision.status != "unique":
            out.error = f"user turn {index}: {decision.describe()}"
            return out
        node_id = decision.taken
        if node_id in rules:
            node, at = rules[node_id], current.id
        else:  # the candidates were the rules and this step's sub-steps
            node, at = next(b for b in current.branches if b.id == node_id), current.id
        out.taken.append(Taken(turn=index, node=node_id, at=at, then=node.then, target=node.target))  # type: ignore[arg-type]
        first = False
        if node.then == "end":
            out.answer = {"step": node_id, "response": node.script, "action": "hangup"}
            return out
        if node.then == "answer":
            kb = scenario.knowledge_base
            response = node.script or (kb[turn.question].a if turn.question is not None
                                       and 0 <= turn.question < len(kb) else KB_PLACEHOLDER)
            out.answer, out.waiting_at = {"step": node_id, "response": response, "action": "moveon"}, current.id
            return out
        nxt = scenario.step(node.target or "")
        if nxt is None:
            out.error = f"{node_id} goes to unknown step {node.target!r}"
            return out
        if scenario.waits(nxt):
            out.answer, out.waiting_at = {"step": nxt.id, "response": nxt.script, "action": "moveon"}, nxt.id
            return out
        current = nxt


def run_hrs(scenario: HRSScenario, logic: Logic, facts: Region, turns: list[Turn]) -> Execution:
    """Walk the steps over ``turns`` (one per user turn) with the case facts ``facts``."""
    run = Execution()
    if not turns:
        run.error = "no user turn"
        return run
    step: Step | None = scenario.steps[0]
    run.agent_lines.append(step.script or "")
    for index, turn in enumerate(turns, start=1):
        if step is None:
            run.error = f"user turn {index} comes after the call ended"
            return run
        out = hrs_turn(scenario, logic, step, facts, turn, index)
        run.decisions += out.decisions
        run.taken += out.taken
        run.visited += out.visited
        if out.error:
            run.error = out.error
            return run
        run.answer = out.answer
        run.turn_answers.append(out.answer)  # type: ignore[arg-type]
        run.agent_lines.append(out.answer["response"])  # type: ignore[index]
        step = scenario.step(out.waiting_at) if out.waiting_at else None
    run.agent_lines = run.agent_lines[:len(turns)]
    return run


def run_scenario(scenario: Scenario, logic: Logic, facts: Region, turns: list[Turn] | None = None,
                 values: dict[str, Any] | None = None) -> Execution:
    """:func:`run_lrs` or :func:`run_hrs`, by kind."""
    if isinstance(scenario, LRSScenario):
        return run_lrs(scenario, logic, facts, values)
    return run_hrs(scenario, logic, facts, turns or [])


def run_values(scenario: Scenario, logic: Logic, values: dict[str, Any], turns: list[Turn] | None = None) -> Execution:
    """Execute on known values (None or absent: unknown); values outside a fact's domain are an error."""
    known = {k: v for k, v in values.items() if v is not None}
    try:
        region = logic.region_of(known)
    except ValueError as exc:
        return Execution(error=str(exc))
    return run_scenario(scenario, logic, region, turns, known)
