"""TOD-ProcBench §3.3 (S7.2) manipulation operators on instruction trees, in code and seeded.

The paper asks an LLM to manipulate the instructions and never checks what it changed. Here each
operator edits the parsed tree (``sopforge.families.sop_tools.models.instructions``) directly, and
:func:`changed_statements` proves afterwards that exactly the target statement changed, so a
manipulation "that changes nothing, or changes a statement other than its target" cannot pass.

* (a) ``parameter_mismatch``: every number in one statement is replaced by another number.
* (b) ``single_condition_replacement``: in a condition block, one action becomes its negation or
  another action of the same block (a block with a single action: its negation).
* (c) ``multi_condition_replacement``: an action is replaced by an action from a different
  condition branch of the same document.

Decisions the paper leaves open: the operator applies to the whole tree, so the extracted section
(a subtree) and the full document change the same statement by id; new numbers differ from the
old by at least one and keep the digit count where possible; the negation is written as
"Do not <action, first letter lowercased>".

Validated before anything is asked (issue 19: independent answerers were asked to apply changes
that could not be applied): a parameter mismatch changes only numbers a comparator governs ("more
than 365", not the "30" of "the 30-day figure", which would name a quantity no tool computes),
keeps the order of the statement's numbers ("at least 0.81 and less than 0.33" is never produced),
and, where the case's own value of the compared quantity is known, moves the threshold across it,
so the change alters the outcome it is meant to alter; a bare "Else:" is never a target or a donor.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from sopforge.families.sop_tools.models.instructions import Action, Condition, InstructionTree
from sopforge.families.sop_tools.models.sop import THRESHOLD_RE, SOPThreshold

__all__ = ["Manipulation", "ManipulationType", "NotApplicable", "changed_statements", "manipulate"]

ManipulationType = Literal["parameter_mismatch", "single_condition_replacement", "multi_condition_replacement"]
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_BARE_ELSE = re.compile(r"^\W*(?:else|otherwise)\W*$", re.IGNORECASE)
_COMPARE = {">": lambda v, t: v > t, ">=": lambda v, t: v >= t, "<": lambda v, t: v < t, "<=": lambda v, t: v <= t}
#: (canonical comparator, threshold) → the case's value of the quantity compared (from the SOP's thresholds
#: and the task's values); lets a mismatch move a threshold across the case.
CaseValues = dict[tuple[str, float], float]


class NotApplicable(ValueError):
    """The document has nothing this operator can change (counted in the funnel as ineligible)."""


@dataclass
class Manipulation:
    """A manipulated copy of a tree and what was changed."""

    type: ManipulationType
    tree: InstructionTree
    target_id: str
    before: str
    after: str
    seed: int


def _nodes(tree: InstructionTree) -> list[tuple[Condition | None, Action | Condition, tuple[str, ...]]]:
    """Every statement with its parent block and its condition path (ids of enclosing blocks)."""
    found = []

    def walk(items: list, parent: Condition | None, path: tuple[str, ...]) -> None:
        for item in items:
            found.append((parent, item, path))
            if isinstance(item, Condition):
                walk(item.items, item, (*path, item.id))

    walk(tree.items, None, ())
    return found


def _replace_text(tree: InstructionTree, target_id: str, text: str) -> InstructionTree:
    copy = tree.model_copy(deep=True)
    for _, node, _ in _nodes(copy):
        if node.id == target_id:
            node.text = text
            return copy
    raise KeyError(target_id)


def _other_number(old: str, rng: random.Random) -> str:
    if "." in old:
        value, places = float(old), len(old.split(".")[1])
        new = value
        while f"{new:.{places}f}" == old:
            # A share or ratio below 1 stays below 1 ("0.80" -> "0.55", not "2.65"), so the
            # mismatch reads as a plausible but wrong threshold rather than an absurd one.
            new = (round(rng.uniform(0.05, 0.99), places) if value < 1
                   else round(value * rng.uniform(0.3, 3.0) + rng.uniform(0.1, 2.0), places))
        return f"{new:.{places}f}"
    value, digits = int(old), len(old)
    low, high = (10 ** (digits - 1) if digits > 1 else 0), 10 ** digits - 1
    choices = [n for n in range(low, high + 1) if n != value] or [value + 1]
    return str(rng.choice(choices))


def _threshold_spans(text: str) -> list[tuple[int, int, str, float | None]]:
    """(start, end, comparator, number) of every number a comparator governs, in text order."""
    spans = []
    for m in THRESHOLD_RE.finditer(text):
        number = _NUMBER.search(text, m.start(), m.end())
        if number is None:
            continue
        statement = SOPThreshold(step="", section="", text=" ".join(m.group(0).split())).statement()
        comparator = statement[1] if statement else None
        spans.append((number.start(), number.end(), comparator, float(number.group(0))))
    return spans


def _order(values: list[float]) -> list[int]:
    return [(a > b) - (a < b) for i, a in enumerate(values) for b in values[i + 1:]]


def _flipping_number(old: str, comparator: str, case_value: float, rng: random.Random) -> str | None:
    """A threshold like ``old`` (same decimals) on the other side of ``case_value`` than ``old``."""
    places = len(old.split(".")[1]) if "." in old else 0
    step = 10 ** -places
    holds = _COMPARE[comparator](case_value, float(old))
    offsets = [k * step * scale for scale in (1, 5, 25) for k in range(1, 6)]
    candidates = sorted({round(case_value + d, places) for d in offsets} | {round(case_value - d, places) for d in offsets})
    flips = [c for c in candidates if c >= 0 and f"{c:.{places}f}" != old
             and _COMPARE[comparator](case_value, c) != holds]
    return f"{rng.choice(flips):.{places}f}" if flips else None


def _mismatched(text: str, rng: random.Random, case_values: CaseValues | None) -> str | None:
    """``text`` with its threshold numbers changed, or None when no valid change exists."""
    spans = _threshold_spans(text)
    if not spans:
        return None
    old_numbers = [n for *_, n in spans]
    for _ in range(20):
        new_text, cursor, changed = [], 0, []
        for start, end, comparator, number in spans:
            old = text[start:end]
            known = case_values.get((comparator, round(number, 6))) if case_values and comparator else None
            new = (_flipping_number(old, comparator, known, rng) if known is not None and comparator in _COMPARE
                   else _other_number(old, rng))
            if new is None:
                return None  # the case cannot be moved across this threshold: the change would alter nothing
            new_text += [text[cursor:start], new]
            cursor = end
            changed.append(float(new))
        if _order(changed) == _order(old_numbers):  # "at least 0.81 and less than 0.33" would contradict itself
            return "".join(new_text) + text[cursor:]
    return None


def _negate(text: str) -> str:
    return f"Do not {text[:1].lower()}{text[1:]}"


def manipulate(tree: InstructionTree, kind: ManipulationType, seed: int,
               within: set[str] | None = None, case_values: CaseValues | None = None) -> Manipulation:
    """Apply one operator to a copy of ``tree``.

    Args:
        tree: The full document; it is never modified.
        kind: The operator.
        seed: Seeds the choice of target and replacement.
        within: Ids eligible as the target (e.g. an extracted section's statements); None means
            any statement. Replacement material (sibling or donor actions) may still come from
            the whole document, as in the paper's multi-condition example (Tables 12-13).
        case_values: The case's values of the quantities the SOP's thresholds compare (see CaseValues);
            a parameter mismatch of such a threshold moves it across the case's value.

    Raises:
        NotApplicable: No eligible statement qualifies (no number; no action under a condition;
            fewer than two condition branches with actions).
    """
    rng = random.Random(f"{seed}:{kind}")
    # An Else block renders as a bare "Else:" whatever its (derived) condition says: a change to it would be
    # invisible in the document the model is shown.
    nodes = [(parent, node, path) for parent, node, path in _nodes(tree)
             if not (isinstance(node, Condition) and node.is_else) and not _BARE_ELSE.match(node.text)]
    actions = [(parent, node, path) for parent, node, path in nodes if isinstance(node, Action)]

    def eligible(node: Action | Condition) -> bool:
        return within is None or node.id in within

    if kind == "parameter_mismatch":
        with_numbers = [node for _, node, _ in nodes if _threshold_spans(node.text) and eligible(node)]
        if not with_numbers:
            raise NotApplicable("no statement compares with a number")
        rng.shuffle(with_numbers)
        found = next(((node, text) for node in with_numbers
                      if (text := _mismatched(node.text, rng, case_values)) is not None), None)
        if found is None:
            raise NotApplicable("no threshold can be changed so that the case's outcome changes")
        target, new_text = found
    elif kind == "single_condition_replacement":
        # A block with one action qualifies too: its action becomes its negation (the paper's first
        # option), so documents whose branches each carry a single action are not left out.
        siblings: dict[tuple[str, ...], list[Action]] = {}
        for _, node, path in actions:
            siblings.setdefault(path, []).append(node)
        groups = [group for path, group in siblings.items() if path and any(eligible(a) for a in group)]
        if not groups:
            raise NotApplicable("no condition block holds an action")
        group = rng.choice(groups)
        target = rng.choice([a for a in group if eligible(a)])
        others = [a.text for a in group if a.text != target.text]
        new_text = _negate(target.text) if not others or rng.random() < 0.5 else rng.choice(others)
    elif kind == "multi_condition_replacement":
        conditional = [(node, path) for _, node, path in actions if path]
        branches = {path for _, path in conditional}
        if len(branches) < 2:
            raise NotApplicable("fewer than two condition branches hold actions")
        targets = [(node, path) for node, path in conditional if eligible(node)]
        if not targets:
            raise NotApplicable("no eligible action sits under a condition")
        target, path = rng.choice(targets)
        donors = [n.text for n, p in conditional if p != path and n.text != target.text]
        if not donors:
            raise NotApplicable("every other branch holds only the same action text")
        new_text = rng.choice(donors)
    else:
        raise ValueError(f"unknown manipulation type {kind!r}")
    return Manipulation(kind, _replace_text(tree, target.id, new_text), target.id, target.text, new_text, seed)


def changed_statements(before: InstructionTree, after: InstructionTree) -> list[str]:
    """Ids whose text differs (or that exist in only one tree); [] means nothing changed."""
    old, new = before.statements(), after.statements()
    return sorted(i for i in old.keys() | new.keys() if old.get(i) != new.get(i))
