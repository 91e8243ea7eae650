"""Checks of the TOD-ProcBench compliance pipeline, in code (issue 5 item 5).

* Instruction document: enough branches, shallow enough, and every decision outcome of the
  schema reachable in some action, so that any task's outcome has a section to cite.
* Dialogue: ABCD-like shape, followed ids that exist, and a final turn that does not contradict
  the task's computed outcome.
* Manipulation: exactly the target statement changed, and the target lies in the section.
* Style parity (tod_procbench.md §6): the paper's violating responses are capitalised, formal and
  longer than the terse lowercase ground truths, a surface cue a classifier can exploit. A
  rewrite must match the compliant response in casing and length.
* The final set: balanced twins, comparable length distributions.
"""

from __future__ import annotations

import re
from statistics import mean

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.compliance import ComplianceItem, Dialogue
from sopforge.families.sop_tools.models.instruction_manipulations import Manipulation, changed_statements
from sopforge.families.sop_tools.models.instructions import Action, Condition, InstructionTree, max_depth

__all__ = ["MAX_DEPTH", "MIN_BRANCHES", "LENGTH_RATIO", "UPPER_SHARE_TOLERANCE", "label_mentions",
           "check_instruction_document", "check_dialogue", "manipulation_problem", "style_problems",
           "style_check", "balance_check", "length_parity_check"]

MAX_DEPTH = 4  # the paper's deepest documents (l.64)
MIN_BRANCHES = 2  # a single condition leaves nothing for multi-condition replacement
LENGTH_RATIO = (0.67, 1.5)  # violating / compliant characters; about one short clause either way
UPPER_SHARE_TOLERANCE = 0.05  # absolute difference in the share of uppercase letters
SET_MEAN_RATIO = (0.8, 1.25)  # mean violating/compliant length ratio over the whole set
MIN_TURNS, MAX_TURNS = 4, 10


def _spaced(text: str) -> str:
    return " ".join(re.sub(r"[_\-]", " ", text.lower()).split())


def label_mentions(text: str, labels: list[str]) -> list[str]:
    """Decision labels the text names (``refer_to_prescriber`` matches "refer to prescriber")."""
    spaced = f" {_spaced(re.sub(r'[^A-Za-z0-9_ -]', ' ', text))} "
    return [label for label in labels if f" {_spaced(label)} " in spaced]


def _conditions(tree: InstructionTree) -> list[Condition]:
    found: list[Condition] = []

    def walk(items: list) -> None:
        for item in items:
            if isinstance(item, Condition):
                found.append(item)
                walk(item.items)

    walk(tree.items)
    return found


def _actions(tree: InstructionTree) -> dict[str, str]:
    found: dict[str, str] = {}

    def walk(items: list) -> None:
        for item in items:
            if isinstance(item, Action):
                found[item.id] = item.text
            else:
                walk(item.items)

    walk(tree.items)
    return found


def check_instruction_document(tree: InstructionTree, labels: list[str]) -> list[CheckResult]:
    """Branches, depth and outcome coverage of an f1 What_to_do section.

    Args:
        tree: The parsed section.
        labels: Every allowed value of the schema's decision fields.
    """
    branches, depth = len(_conditions(tree)), max_depth(tree)
    mentioned = {label for text in _actions(tree).values() for label in label_mentions(text, labels)}
    missing = [label for label in labels if label not in mentioned]
    return [
        check("instructions.branches", branches >= MIN_BRANCHES,
              f"{branches} condition block(s); write at least {MIN_BRANCHES} 'If …:' blocks",
              ok=f"{branches} condition blocks (at least {MIN_BRANCHES})", branches=branches),
        check("instructions.depth", depth <= MAX_DEPTH,
              f"nesting depth {depth} exceeds {MAX_DEPTH}; merge inner conditions",
              ok=f"nesting depth {depth} (at most {MAX_DEPTH})", depth=depth),
        check("instructions.outcomes_covered", not missing,
              f"no action names the outcome(s) {', '.join(missing)}; add an action such as "
              f"'Record the outcome {missing[0] if missing else ''}' under the condition that leads to it",
              ok=f"every outcome ({', '.join(labels)}) is named by an action", missing=missing),
    ]


def check_dialogue(dialogue: Dialogue, tree: InstructionTree, labels: list[str],
                   expected_label: str | None) -> list[CheckResult]:
    """Shape of the dialogue, validity of <followed>, and consistency with the task's outcome.

    Outcome rule (kept simple on purpose): if the followed actions name any decision label,
    they must name the task's expected label; followed actions that name no label (asking for
    a number, explaining a rule) are not judged.
    """
    roles = [t.role for t in dialogue.turns]
    run, longest = 0, 0
    for i, role in enumerate(roles):
        run = run + 1 if i and roles[i - 1] == role else 1
        longest = max(longest, run)
    actions = _actions(tree)
    unknown = [i for i in dialogue.followed if i not in actions]
    named = sorted({label for i in dialogue.followed if i in actions for label in label_mentions(actions[i], labels)})
    contradicts = bool(named) and expected_label is not None and expected_label not in named
    return [
        check("dialogue.turn_count", MIN_TURNS <= len(roles) <= MAX_TURNS,
              f"{len(roles)} turns; write {MIN_TURNS} to {MAX_TURNS}", ok=f"{len(roles)} turns", turns=len(roles)),
        check("dialogue.ends_with_agent", len(roles) >= 2 and roles[-1] == "agent" and roles[-2] == "customer",
              "the dialogue must end with a customer turn followed by the final agent turn",
              ok="a customer turn, then the final agent turn"),
        check("dialogue.both_roles", {"agent", "customer"} <= set(roles), "both agent and customer must speak",
              ok="agent and customer both speak"),
        check("dialogue.alternation", longest <= 2,
              f"{longest} consecutive turns by one speaker; let the speakers alternate (at most 2 in a row)",
              ok="the speakers alternate"),
        check("dialogue.followed_known", not unknown,
              f"<followed> names ids that are not actions of the document: {', '.join(unknown)}",
              ok="every <followed> id is an action of the document", unknown=unknown),
        check("dialogue.outcome_consistent", not contradicts,
              f"the followed actions decide {', '.join(named)} but this case's expected outcome is "
              f"{expected_label}; follow the actions for {expected_label}",
              ok="the followed actions agree with the expected outcome", named=named, expected=expected_label),
    ]


def manipulation_problem(original: InstructionTree, manipulation: Manipulation, within: set[str]) -> str | None:
    """Why a manipulation must be rejected, or None: it must change exactly its target, inside the section."""
    changed = changed_statements(original, manipulation.tree)
    if not changed:
        return "the manipulation changed nothing"
    if changed != [manipulation.target_id]:
        return f"the manipulation changed {', '.join(changed)} instead of exactly its target {manipulation.target_id}"
    if manipulation.target_id not in within:
        return f"the target {manipulation.target_id} lies outside the extracted section"
    return None


def _upper_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c.isupper() for c in letters) / len(letters) if letters else 0.0


def _first_letter_upper(text: str) -> bool | None:
    first = next((c for c in text if c.isalpha()), None)
    return None if first is None else first.isupper()


def style_problems(compliant: str, violating: str) -> list[str]:
    """Surface differences that would give the violating response away (empty list = passes)."""
    problems = []
    if " ".join(compliant.split()).lower() == " ".join(violating.split()).lower():
        problems.append("the rewrite is identical to the compliant response")
    a, b = _upper_share(compliant), _upper_share(violating)
    if abs(a - b) > UPPER_SHARE_TOLERANCE:
        problems.append(f"casing differs: {b:.0%} uppercase letters vs {a:.0%} in the compliant response; "
                        "match its casing")
    if _first_letter_upper(compliant) != _first_letter_upper(violating):
        problems.append("the first letter's case differs from the compliant response")
    ratio = len(violating) / max(len(compliant), 1)
    if not LENGTH_RATIO[0] <= ratio <= LENGTH_RATIO[1]:
        problems.append(f"length is {ratio:.2f}x the compliant response; keep it within "
                        f"{LENGTH_RATIO[0]}-{LENGTH_RATIO[1]}x")
    return problems


def style_check(compliant: str, violating: str) -> CheckResult:
    """:func:`style_problems` as a CheckResult named ``compliance.style_parity``."""
    problems = style_problems(compliant, violating)
    return check("compliance.style_parity", not problems, "; ".join(problems) or "casing and length match",
                 length_ratio=round(len(violating) / max(len(compliant), 1), 3))


def balance_check(items: list[ComplianceItem]) -> CheckResult:
    """Every pair holds one compliant and one violating twin with the same prefix and policy."""
    pairs: dict[str, list[ComplianceItem]] = {}
    for item in items:
        pairs.setdefault(item.pair_id, []).append(item)
    bad = [pid for pid, twins in pairs.items()
           if sorted(t.label for t in twins) != ["compliant", "violating"]
           or twins[0].prefix != twins[1].prefix or twins[0].policy != twins[1].policy]
    counts = {label: sum(i.label == label for i in items) for label in ("compliant", "violating")}
    return check("compliance.balanced", not bad and counts["compliant"] == counts["violating"],
                 f"unbalanced twins: {', '.join(bad) or counts}",
                 ok=f"{len(pairs)} pair(s), each one compliant and one violating twin with the same prefix and policy",
                 bad_pairs=bad, **counts)


def length_parity_check(items: list[ComplianceItem]) -> CheckResult:
    """Mean length ratio violating/compliant over the pairs (a warning: a set-level cue, not an item's fault)."""
    by_pair: dict[str, dict[str, str]] = {}
    for item in items:
        by_pair.setdefault(item.pair_id, {})[item.label] = item.response
    ratios = [len(p["violating"]) / max(len(p["compliant"]), 1) for p in by_pair.values() if len(p) == 2]
    ratio = mean(ratios) if ratios else 1.0
    return check("compliance.length_parity", SET_MEAN_RATIO[0] <= ratio <= SET_MEAN_RATIO[1],
                 f"mean violating/compliant length ratio {ratio:.2f}, outside {SET_MEAN_RATIO[0]}-{SET_MEAN_RATIO[1]}",
                 ok=f"mean violating/compliant length ratio {ratio:.2f}, within {SET_MEAN_RATIO[0]}-{SET_MEAN_RATIO[1]}",
                 severity="warning", mean_length_ratio=round(ratio, 3), pairs=len(ratios))
