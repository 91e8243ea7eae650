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
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from sopforge.families.sop_tools.models.instructions import Action, Condition, InstructionTree

__all__ = ["Manipulation", "ManipulationType", "NotApplicable", "changed_statements", "manipulate"]

ManipulationType = Literal["parameter_mismatch", "single_condition_replacement", "multi_condition_replacement"]
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


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


def _negate(text: str) -> str:
    return f"Do not {text[:1].lower()}{text[1:]}"


def manipulate(tree: InstructionTree, kind: ManipulationType, seed: int,
               within: set[str] | None = None) -> Manipulation:
    """Apply one operator to a copy of ``tree``.

    Args:
        tree: The full document; it is never modified.
        kind: The operator.
        seed: Seeds the choice of target and replacement.
        within: Ids eligible as the target (e.g. an extracted section's statements); None means
            any statement. Replacement material (sibling or donor actions) may still come from
            the whole document, as in the paper's multi-condition example (Tables 12-13).

    Raises:
        NotApplicable: No eligible statement qualifies (no number; no action under a condition;
            fewer than two condition branches with actions).
    """
    rng = random.Random(f"{seed}:{kind}")
    nodes = _nodes(tree)
    actions = [(parent, node, path) for parent, node, path in nodes if isinstance(node, Action)]

    def eligible(node: Action | Condition) -> bool:
        return within is None or node.id in within

    if kind == "parameter_mismatch":
        with_numbers = [node for _, node, _ in nodes if _NUMBER.search(node.text) and eligible(node)]
        if not with_numbers:
            raise NotApplicable("no statement contains a number")
        target = rng.choice(with_numbers)
        new_text = _NUMBER.sub(lambda m: _other_number(m.group(0), rng), target.text)
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
