"""Checks on one SOP-Maze instance: the written dialogue, the independent reading, the answer.

The reference answers are trusted only when (1) an independent reader of the user input alone
extracts the same facts (and, in HRS, the same reply per user turn), (2) executing the tree on what
the reader extracted gives exactly the final answer whatever the unstated facts are (no other leaf's
condition holds), (3) after every user turn that has a subtask, the tree executed on what the reader
found *by then* gives exactly that subtask's answer, and a planned reversal is read as first said,
then revoked (so the noise is really in the text, and really resolved), and (4) the answer validates
against the scenario's schema. Only facts are compared, never wording: a sarcastic or disfluent
turn passes when the reader gets the fact right. Before the reader is asked, code checks what it
can check itself: the turn structure, the fixed agent lines of HRS, the operands of every
calculation, numbers planted as decoys and the noise tags.
"""

from __future__ import annotations

import re
from typing import Any


from sopforge.checks import CheckResult, check
from sopforge.families.maze.models.execution import Turn, run_scenario, run_values
from sopforge.families.maze.models.instances import Dialogue, Extraction, InstancePlan, Verification
from sopforge.families.maze.models.logic import REPLY, FactValue, Logic
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, Scenario

__all__ = ["check_dialogue", "compare_extraction", "known_facts", "schema_errors", "verify_instance"]


def _norm(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"').split()).lower()


def check_dialogue(plan: InstancePlan, dialogue: Dialogue) -> list[CheckResult]:
    """What code can verify in a written dialogue before anyone reads it (re-asked when broken)."""
    users = dialogue.user_turns()
    results = [check("maze.dialogue.user_turns", len(users) == len(plan.turns),
                     f"{len(users)} user turns as planned" if len(users) == len(plan.turns) else
                     f"write exactly {len(plan.turns)} user turns (found {len(users)})", found=len(users))]
    if plan.kind == "HRS":
        speakers = [t.speaker for t in dialogue.turns]
        expected = ["agent", "user"] * len(plan.turns)
        wrong_lines = [f"agent turn {k}" for k, (turn, planned) in enumerate(
            zip([t for t in dialogue.turns if t.speaker == "agent"], plan.turns), start=1)
            if _norm(turn.text) != _norm(planned.agent_line or "")]
        results.append(check("maze.dialogue.agent_lines", speakers == expected and not wrong_lines,
                             "turns must alternate agent, user, ..., ending with the user, and every agent turn must "
                             "be the planned line word for word: " + (", ".join(wrong_lines) or "order differs")
                             if speakers != expected or wrong_lines else "agent lines as planned"))
    user_text = " ".join(t.text for _, t in users)
    searched = user_text if plan.kind == "HRS" else " ".join(t.text for t in dialogue.turns)
    missing = [f"{n.fact}: {op}" for n in plan.noise if n.phenomenon == "calculation" for op in n.operands
               if not _mentions(searched, op)]
    # a planted number (an integer decoy outside calculations) must be in the turn that carries it
    turn_text = {k: t.text for k, (_, t) in enumerate(users, start=1)}
    missing += [f"{n.phenomenon} decoy {n.decoy} in user turn {n.decoy_turn or n.user_turn}" for n in plan.noise
                if n.phenomenon != "calculation" and isinstance(n.decoy, int) and not isinstance(n.decoy, bool)
                and not _mentions(turn_text.get(n.decoy_turn or n.user_turn, ""), str(n.decoy))]
    results.append(check("maze.dialogue.calculation_operands", not missing, "state these calculation operands exactly "
                         "as given: " + "; ".join(missing) if missing else "every calculation operand is stated",
                         missing=missing))
    position = {i: k for k, (i, _) in enumerate(users, start=1)}  # position in turns -> user turn number
    tagged = {(n.phenomenon, position.get(n.turn)) for n in dialogue.noise}
    untagged = [f"{n.phenomenon} in user turn {n.user_turn}" for n in plan.noise
                if (n.phenomenon, n.user_turn) not in tagged]
    results.append(check("maze.dialogue.noise_tagged", not untagged, "tag every planned phenomenon in \"noise\" "
                         "with the index (in turns, counting every turn from 1) of the user turn that carries it: "
                         + ", ".join(untagged) if untagged else "every planned phenomenon is tagged",
                         untagged=untagged))
    planned = {(n.phenomenon, n.user_turn) for n in plan.noise}
    extra = sorted(f"{p} at turn {t}" for p, t in tagged - planned)
    results.append(check("maze.dialogue.noise_unplanned", not extra, f"tags of unplanned phenomena: {extra}",
                         ok=f"{len(tagged)} noise tag(s), none of an unplanned phenomenon", severity="warning",
                         extra=extra))
    return results


def _mentions(text: str, operand: str) -> bool:
    if re.fullmatch(r"-?\d+", operand):
        return re.search(rf"(?<![\d.,]){re.escape(operand)}(?![\d]|[.,]\d)", text) is not None
    return operand.lower() in text.lower()


def _same(expected: FactValue, got: Any) -> bool:
    if isinstance(expected, bool):
        return got is expected or (isinstance(got, str) and got.strip().lower() == str(expected).lower())
    if isinstance(expected, int):
        if isinstance(got, str) and re.fullmatch(r"\s*-?\d+\s*", got):
            got = int(got)
        return isinstance(got, int) and not isinstance(got, bool) and got == expected
    return isinstance(got, str) and got.strip().lower() == expected.lower()


def compare_extraction(plan: InstancePlan, extraction: Extraction) -> list[str]:
    """Every difference between what the plan states and what the reader extracted."""
    problems = []
    if len(extraction.turns) != len(plan.turns):
        problems.append(f"{len(extraction.turns)} user turns read, the input has {len(plan.turns)}")
    final = extraction.facts
    for fact, value in plan.facts.items():
        got = final.get(fact)
        if not _same(value, got):
            problems.append(f"{fact} read as {'not stated' if got is None else repr(got)}, planned {value!r}")
    for n in plan.noise:
        if n.phenomenon == "intent_reversal" and n.fact and n.decoy_turn:
            got = extraction.state_after(n.decoy_turn).get(n.fact)
            if not _same(n.decoy, got):  # type: ignore[arg-type]
                problems.append(f"after user turn {n.decoy_turn} {n.fact} read as "
                                f"{'not stated' if got is None else repr(got)}; the customer first says {n.decoy!r} "
                                f"there and takes it back in user turn {n.user_turn}")
    if plan.kind == "HRS":
        planned = [t.reply for t in plan.turns]
        if len(extraction.replies) != len(planned):
            problems.append(f"{len(extraction.replies)} replies read for {len(planned)} user turns")
        for index, (want, got) in enumerate(zip(planned, extraction.replies), start=1):
            if (got or "").strip().lower() != want:
                problems.append(f"user turn {index} read as reply {got!r}, planned {want!r}")
    return problems


def known_facts(logic: Logic, extraction: Extraction) -> dict[str, FactValue]:
    """The reader's facts the tree can use: known names, values inside their domain, ints from digit strings."""
    known: dict[str, FactValue] = {}
    for fact, value in extraction.facts.items():
        if value is None or fact not in logic.facts:
            continue
        spec = logic.facts[fact]
        if spec.type == "integer" and isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            value = int(value)
        if spec.type == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        if isinstance(value, str):
            value = value.strip().lower()
        if spec.accepts(value):
            known[fact] = value
    return known


def schema_errors(schema: dict[str, Any], answer: Any) -> list[str]:
    """Draft-07 violations of ``answer`` (empty when valid)."""
    from jsonschema import Draft7Validator  # loaded by the check, not by every command that loads the family

    return [f"{'/'.join(str(p) for p in e.absolute_path) or 'answer'}: {e.message}"
            for e in sorted(Draft7Validator(schema).iter_errors(answer), key=lambda e: list(e.absolute_path))]


def _reader_turns(logic: Logic, plan: InstancePlan, extraction: Extraction) -> list[Turn] | None:
    if plan.kind != "HRS":
        return None
    # a reply the reader could not classify (or a missing one) is unknown to the tree
    replies = [r.strip().lower() for r in extraction.replies] + [""] * len(plan.turns)
    return [Turn(r if logic.cell_of(REPLY, r) is not None else None, t.question) for r, t in zip(replies, plan.turns)]


def subtask_problems(scenario: Scenario, logic: Logic, plan: InstancePlan, extraction: Extraction) -> list[str]:
    """Subtasks whose answer the tree does not give on what the reader found by that user turn."""
    turns = _reader_turns(logic, plan, extraction)
    problems = []
    for sub in plan.subtasks:
        if sub.final:
            continue  # the final answer is the uniqueness verdict's
        state = known_facts(logic, Extraction(turns=extraction.turns[:sub.turn]))
        run = run_values(scenario, logic, state, turns[:sub.turn] if turns else None)
        graded = [k for k in sub.target if k not in EXCLUSION_KEYS]
        if not run.ok:
            problems.append(f"after user turn {sub.turn}: {run.error}; the plan's answer there is "
                            + ", ".join(f"{k}={sub.target[k]}" for k in graded))
        elif any(run.answer.get(k) != sub.target[k] for k in graded):  # type: ignore[union-attr]
            problems.append(f"after user turn {sub.turn} the reading gives " + ", ".join(
                f"{k}={run.answer.get(k)}" for k in graded) + " instead of "  # type: ignore[union-attr]
                + ", ".join(f"{k}={sub.target[k]}" for k in graded))
    return problems


def verify_instance(scenario: Scenario, logic: Logic, plan: InstancePlan, extraction: Extraction) -> Verification:
    """The four verdicts on one instance (see the module docstring)."""
    mismatches = compare_extraction(plan, extraction)
    turns = _reader_turns(logic, plan, extraction)
    known = known_facts(logic, extraction)
    run = run_scenario(scenario, logic, logic.region_of(known), turns, known)
    graded = [k for k in plan.target if k not in EXCLUSION_KEYS]
    if not run.ok:
        unique, why = False, run.error or "no answer"
    elif any(run.answer.get(k) != plan.target[k] for k in graded):  # type: ignore[union-attr]
        unique, why = False, ("the reader's facts lead to " + ", ".join(f"{k}={run.answer.get(k)}" for k in graded)  # type: ignore[union-attr]
                              + " instead of " + ", ".join(f"{k}={plan.target[k]}" for k in graded))
    else:
        unique, why = True, ""
    errors = schema_errors(scenario.answer_schema(), plan.target)
    later = subtask_problems(scenario, logic, plan, extraction)
    return Verification(extraction_matches=not mismatches, mismatches=mismatches, unique=unique, uniqueness=why,
                        schema_valid=not errors, schema_errors=errors, subtasks_match=not later,
                        subtask_problems=later)
