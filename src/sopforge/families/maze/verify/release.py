"""The release gate: every exported target re-executed from the exported tree and the reader's facts.

A gate that scores each target against itself can only fail on a schema error already rejected
upstream. This one reads the export back from disk and trusts none of it: for every subtask it
takes the scenario tree (``scenario.json``) and what the independent reader found by that user turn
(``reading``), runs its **own interpreter**, and compares the result with the exported ``target``.
It also re-derives every misreading (the answer with a noise decoy taken for the truth) and checks
that the agent lines shown in an HRS input are the scripts the procedure says at those turns.

The interpreter shares nothing with the code that produced the targets but the parsed tree: no
cells, no regions. A condition is evaluated on concrete values; a fact the input leaves unstated is
tried over every value of its domain (Kleene logic: a conjunction is true when it holds for all of
them, false when for none), and an answer counts only when exactly one candidate holds and no other
might. A corrupted target, a wrong misreading or a doctored agent line fails the gate by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, HRSScenario, LRSScenario, Scenario, atoms_of

__all__ = ["Interpreter", "release_problems"]

MAX_DOMAIN = 200_000  # integer ranges wider than this are refused rather than enumerated


def _holds(op: str, expected: Any, value: Any) -> bool:
    same = lambda a, b: a == b and type(a) is type(b)  # noqa: E731  (True is not 1 here)
    if op == "==":
        return same(value, expected)
    if op == "!=":
        return not same(value, expected)
    if op in ("in", "not in"):
        inside = any(same(value, e) for e in expected)
        return inside if op == "in" else not inside
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return {"<": value < expected, "<=": value <= expected, ">": value > expected, ">=": value >= expected}[op]


def _compared_numbers(scenario: Scenario) -> dict[str, set[int]]:
    """fact -> every integer some condition of the tree compares it with."""
    found: dict[str, set[int]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "when" and isinstance(value, list):
                    for atom in atoms_of([w for w in value if isinstance(w, str)]):
                        values = atom.value if isinstance(atom.value, (list, tuple)) else [atom.value]
                        found.setdefault(atom.fact, set()).update(
                            v for v in values if isinstance(v, int) and not isinstance(v, bool))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(scenario.model_dump())
    return found


def _representatives(low: int, high: int, constants: set[int]) -> list[int]:
    """The bounds and each compared number with its neighbours, inside [low, high].

    A comparison with a constant changes its truth only at that constant, so every stretch between
    two consecutive such points behaves alike: one value of each decides, over the whole range, whether
    a condition holds for none, some or all of the values, which is all the interpreter asks.
    """
    points = {low, high} | {c + d for c in constants for d in (-1, 0, 1)}
    return sorted(p for p in points if low <= p <= high)


class Interpreter:
    """Concrete execution of one exported tree (see the module docstring)."""

    def __init__(self, scenario: Scenario):
        self.s = scenario
        self.domains: dict[str, list[Any]] = {}
        constants = _compared_numbers(scenario)
        for f in scenario.facts:
            if f.type == "enum":
                self.domains[f.name] = list(f.values)
            elif f.type == "boolean":
                self.domains[f.name] = [False, True]
            elif (f.maximum or 0) - (f.minimum or 0) <= MAX_DOMAIN:
                self.domains[f.name] = list(range(f.minimum, f.maximum + 1))  # type: ignore[arg-type, operator]
            else:  # a wide range (an amount in dollars): one value of each stretch the conditions tell apart
                self.domains[f.name] = _representatives(f.minimum, f.maximum, constants.get(f.name, set()))
        if isinstance(scenario, HRSScenario):
            self.domains["reply"] = [r.name for r in scenario.replies]

    def truth(self, when: list[str], values: dict[str, Any]) -> bool | None:
        """True, False, or None (depends on what is not stated)."""
        by_fact: dict[str, list[Any]] = {}
        for atom in atoms_of(when):
            by_fact.setdefault(atom.fact, []).append(atom)
        result: bool | None = True
        for fact, atoms in by_fact.items():
            tried = [values[fact]] if values.get(fact) is not None else self.domains.get(fact, [])
            hits = sum(all(_holds(a.op, a.value, x) for a in atoms) for x in tried)
            if hits == 0:
                return False
            if hits < len(tried):
                result = None
        return result

    def choose(self, candidates: list[tuple[str, list[str]]], values: dict[str, Any],
               overrides: dict[str, list[str]] | None = None) -> tuple[str | None, str]:
        """(the one candidate that applies, "") or (None, why not: "none", "undetermined", "ambiguous")."""
        truths = {node: self.truth(when, values) for node, when in candidates}
        beaten = {loser for node, t in truths.items() if t is True for loser in (overrides or {}).get(node, [])}
        true = [n for n, t in truths.items() if t is True and n not in beaten]
        maybe = [n for n, t in truths.items() if t is None and n not in beaten]
        if maybe:
            return None, "undetermined"
        if len(true) > 1:
            return None, "ambiguous"
        return (true[0], "") if true else (None, "none")

    def lrs(self, values: dict[str, Any]) -> dict[str, Any] | None:
        s: LRSScenario = self.s  # type: ignore[assignment]
        candidates = [(o.id, c.when + o.when) for c in s.categories for o in c.options]
        chosen, _ = self.choose(candidates, values, {o.id: o.overrides for _, o in s.leaves()})
        if chosen is None or any(values.get(f) is None for f in s.report):
            return None
        category, option = next((c, o) for c in s.categories for o in c.options if o.id == chosen)
        answer: dict[str, Any] = {"category": category.id, "step": option.id}
        if s.report:
            answer["details"] = {f: values[f] for f in s.report}
        return {**answer, "response": option.script, "action": option.action}

    def hrs(self, values: dict[str, Any], replies: list[str], questions: list[int | None]) -> tuple[list[dict], list[str]]:
        """The answer after each user turn and the agent line before each (stops at the first undetermined turn)."""
        s: HRSScenario = self.s  # type: ignore[assignment]
        steps = {st.id: st for st in s.steps}
        step = s.steps[0]
        lines, answers = [step.script or ""], []
        for reply, question in zip(replies, questions):
            if step is None:
                break
            now, first, seen, answer = {**values, "reply": reply}, True, set(), None
            while answer is None:
                if step.id in seen:
                    return answers, lines
                seen.add(step.id)
                node = None
                groups = ([[(r.id, r.when) for r in s.rules]] if first and s.rules else []) + [
                    [(b.id, b.when) for b in step.branches]]
                for group in groups:
                    node, why = self.choose(group, now)
                    if node is not None or why != "none":
                        break
                if node is None:
                    return answers, lines
                first = False
                item = next((r for r in s.rules if r.id == node), None) or next(b for b in step.branches if b.id == node)
                if item.then == "end":
                    answer, step = {"step": node, "response": item.script, "action": "hangup"}, None
                elif item.then == "answer":
                    kb = s.knowledge_base[question].a if question is not None and 0 <= question < len(
                        s.knowledge_base) else None
                    answer = {"step": node, "response": item.script or kb, "action": "moveon"}
                else:
                    step = steps[item.target]  # type: ignore[index]
                    if step.script:
                        answer = {"step": step.id, "response": step.script, "action": "moveon"}
            answers.append(answer)
            lines.append(answer["response"] or "")
        return answers, lines


def _same_value(a: Any, b: Any) -> bool:
    return a == b and type(a) is type(b)


def _graded(answer: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if answer is None else {k: v for k, v in answer.items() if k not in EXCLUSION_KEYS}


def _norm(text: str) -> str:
    return " ".join(str(text).replace("\u2019", "'").split()).lower()


def _read(folder: Path, name: str) -> list[dict[str, Any]]:
    path = folder / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _check_subtask(interp: Interpreter, sub: dict[str, Any]) -> list[str]:
    where = f"{sub['id']}"
    reading = sub["reading"]
    if sub["kind"] == "LRS":
        got = interp.lrs(reading["facts"])
        problems = [] if _graded(got) == _graded(sub["target"]) else [
            f"{where}: the target is {_graded(sub['target'])}, the tree on the reader's facts gives {_graded(got)}"]
        if got is not None and got["response"] != sub["target"].get("response"):
            problems.append(f"{where}: the reference response is not option {got['step']}'s script")
        return problems
    answers, lines = interp.hrs(reading["facts"], reading["replies"], sub.get("questions") or [None] * sub["turn"])
    got = answers[sub["turn"] - 1] if len(answers) >= sub["turn"] else None
    problems = [] if _graded(got) == _graded(sub["target"]) else [
        f"{where}: the target is {_graded(sub['target'])}, the tree on the reader's replies and facts gives {_graded(got)}"]
    shown = [t["text"] for t in sub.get("turns", []) if t["speaker"] == "agent"]
    if [_norm(x) for x in shown] != [_norm(x) for x in lines[:len(shown)]] or len(shown) != sub["turn"]:
        problems.append(f"{where}: the agent lines in the input are not the procedure's scripts along its path")
    return problems


def _check_misreads(interp: Interpreter, record: dict[str, Any]) -> list[str]:
    problems = []
    facts, replies = dict(record["reading"]["facts"]), list(record["reading"]["replies"])
    for n in record["noise"]:
        if n.get("decoy") is None:
            continue
        if n.get("fact"):
            changed = {**facts, n["fact"]: n["decoy"]}
            if not any(_same_value(n["decoy"], v) for v in interp.domains.get(n["fact"], [])):
                got = None   # a reading outside the fact's declared range: the SOP gives it no answer
            elif record["kind"] == "LRS":
                got = interp.lrs(changed)
            else:
                answers, _ = interp.hrs(changed, replies, record.get("questions") or [])
                got = answers[-1] if len(answers) == len(replies) else None
        else:
            changed = replies[:]
            changed[n["user_turn"] - 1] = n["decoy"]
            answers, _ = interp.hrs(facts, changed, record.get("questions") or [])
            got = answers[-1] if len(answers) == len(replies) else None
        if _graded(got) != _graded(n.get("misread")):
            problems.append(f"{record['id']}: {n['phenomenon']} misread recorded as {_graded(n.get('misread'))}, the "
                            f"tree gives {_graded(got)}")
        changes = got is not None and _graded(got) != _graded(record["target"])
        if changes != bool(n.get("changes_answer")):
            problems.append(f"{record['id']}: {n['phenomenon']} changes_answer is {n.get('changes_answer')}, "
                            f"re-executed {changes}")
    return problems


def release_problems(export: Path) -> list[str]:
    """Every disagreement between the export under ``export`` (the maze folder) and a re-execution."""
    problems: list[str] = []
    for folder in sorted(p for p in export.iterdir() if (p / "scenario.json").is_file()):
        content = json.loads((folder / "scenario.json").read_text(encoding="utf-8"))
        try:
            scenario: Scenario = (HRSScenario if content.get("kind") == "HRS" else LRSScenario).model_validate(content)
            interp = Interpreter(scenario)
        except (ValidationError, ValueError) as exc:
            problems.append(f"{folder.name}: scenario.json does not read back: {str(exc).splitlines()[0]}")
            continue
        subtasks = _read(folder, "subtasks.jsonl")
        for sub in subtasks:
            problems += _check_subtask(interp, sub)
        for record in _read(folder, "instances.jsonl"):
            finals = [s for s in subtasks if s["instance"] == record["id"] and s["final"]]
            if len(finals) != 1 or _graded(finals[0]["target"]) != _graded(record["target"]):
                problems.append(f"{record['id']}: the instance's target is not its last subtask's")
            problems += _check_misreads(interp, record)
    return problems
