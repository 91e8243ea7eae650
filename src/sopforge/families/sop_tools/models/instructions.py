"""TOD-ProcBench instruction documents: the nested IF-THEN format (f1) and its flattened forms.

f1 is a tree: ``If <condition>:`` lines open blocks, ``- <action>`` bullets are actions, and
nesting is two spaces per level (TOD-ProcBench §4, l.296-306). The paper converts f1 to the
flattened forms with an LLM (P3); here the conversion is **deterministic code** following the
paper's formal rule (l.646-660): every run of actions becomes a pair (C, a) where C is the
conjunction of its ancestor conditions and a the actions in document order; after a nested
block the parent's conditions apply again; neighbours with identical condition lists merge.

* f2 renders the pairs as ``If c1 AND c2:`` blocks (``In all cases:`` when C is empty).
* f3 renders them as ``{"conditions": [...], "actions": [...]}`` records.

Decisions the paper leaves open (stated here so exports can cite them):
* **Stable ids.** Every condition and action gets an id from its position, e.g. ``do.c2.c1``
  (first condition block inside the second top-level one) and ``do.c2.a3`` (third action
  directly under it); top-level actions are ``do.a1``… Manipulations name the ids they change.
* **Else.** ``Else:`` is allowed after an ``If`` block at the same level; it is flattened as the
  condition ``NOT (<condition of that If>)``, so a flattened entry never depends on order
  between siblings.
"""

from __future__ import annotations

import json
import re
from typing import Union

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError

__all__ = ["Action", "Condition", "InstructionTree", "FlatEntry", "parse_f1", "flatten", "render_f1",
           "render_f2", "render_f3", "render_f1_with_ids", "render_block", "max_depth", "enclosing_block",
           "subtree_ids"]

# Case-insensitive: the paper itself writes both "If" and "if" (l.296-306, l.840-848).
_IF = re.compile(r"^If\s+(.+?):\s*$", re.IGNORECASE)
_ELSE = re.compile(r"^Else\s*:\s*$", re.IGNORECASE)
_ACTION = re.compile(r"^-\s+(.+?)\s*$")
INDENT = 2


class Action(BaseModel):
    """One action statement."""

    id: str = Field(description="Stable id from its position, e.g. 'do.c2.a1'.")
    text: str = Field(description="The action as written, without the bullet.")


class Condition(BaseModel):
    """An ``If`` (or ``Else``) block: its condition and what it contains, in document order."""

    id: str = Field(description="Stable id from its position, e.g. 'do.c2.c1'.")
    text: str = Field(description="The condition as written; for Else, 'NOT (<the If's condition>)'.")
    is_else: bool = Field(False, description="True when written as 'Else:'.")
    items: list[Union[Action, "Condition"]] = Field(default_factory=list, description="Actions and nested blocks in order.")


Condition.model_rebuild()


class InstructionTree(BaseModel):
    """One section (e.g. What_to_do) of an instruction document in f1."""

    section: str = Field(description="Id prefix of the section, e.g. 'do' or 'say'.")
    items: list[Union[Action, Condition]] = Field(default_factory=list, description="Top-level actions and blocks in order.")

    def statements(self) -> dict[str, str]:
        """Every condition and action by id, in document order."""
        found: dict[str, str] = {}

        def walk(items: list) -> None:
            for item in items:
                found[item.id] = item.text
                if isinstance(item, Condition):
                    walk(item.items)

        walk(self.items)
        return found


class FlatEntry(BaseModel):
    """One flattened pair (C, a): the conjunction of conditions and the ordered actions under it."""

    conditions: list[str] = Field(description="Ancestor conditions, outermost first; [] when unconditional.")
    condition_ids: list[str] = Field(description="Ids of those conditions.")
    actions: list[str] = Field(description="Actions in document order.")
    action_ids: list[str] = Field(description="Ids of those actions.")


def parse_f1(text: str, *, section: str = "do") -> InstructionTree:
    """Parse an f1 section (the text inside ``<What_to_do>``) into a tree with stable ids.

    Raises:
        ParseError: A line is neither ``If …:``, ``Else:`` nor ``- action``; indentation is not a
            multiple of two or jumps more than one level; an ``If`` has no content; an ``Else``
            follows no ``If``. The message names the line number.
    """
    root = InstructionTree(section=section)
    # Open containers by depth: the root's items, then each open block's items.
    stack: list[tuple[str, list]] = [(section, root.items)]
    last_block: Condition | None = None
    expecting_body: tuple[int, int] | None = None  # (line number, depth) of an If awaiting its body
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        spaces = len(raw) - len(raw.lstrip(" "))
        if spaces % INDENT:
            raise ParseError(f"f1 line {number}: indentation of {spaces} spaces is not a multiple of {INDENT}")
        depth, line = spaces // INDENT, raw.strip()
        if expecting_body and depth != expecting_body[1] + 1:
            raise ParseError(f"f1 line {expecting_body[0]}: the If block has no indented content")
        expecting_body = None
        if depth >= len(stack):
            raise ParseError(f"f1 line {number}: indented {depth} levels but only {len(stack) - 1} block(s) are open")
        if depth < len(stack) - 1:
            last_block = _last_condition(stack[depth][1])
            del stack[depth + 1:]
        prefix, items = stack[-1]
        if match := _ACTION.match(line):
            items.append(Action(id=f"{prefix}.a{_count(items, Action) + 1}", text=match.group(1)))
            last_block = None
            continue
        if_match, else_match = _IF.match(line), _ELSE.match(line)
        if not (if_match or else_match):
            raise ParseError(f"f1 line {number}: expected 'If <condition>:', 'Else:' or '- <action>', got {line[:60]!r}")
        sibling = last_block if last_block is not None and items and items[-1] is last_block else None
        if else_match and (sibling is None or sibling.is_else):
            raise ParseError(f"f1 line {number}: 'Else:' must follow an If block at the same indentation")
        condition_text = if_match.group(1) if if_match else f"NOT ({sibling.text})"
        block = Condition(id=f"{prefix}.c{_count(items, Condition) + 1}", text=condition_text, is_else=bool(else_match))
        items.append(block)
        stack.append((block.id, block.items))
        last_block = None
        expecting_body = (number, depth)
    if expecting_body:
        raise ParseError(f"f1 line {expecting_body[0]}: the If block has no indented content")
    if not root.items:
        raise ParseError("f1 section is empty: write 'If <condition>:' blocks and '- <action>' bullets")
    return root


def _count(items: list, kind: type) -> int:
    return sum(1 for item in items if isinstance(item, kind))


def _last_condition(items: list) -> Condition | None:
    return items[-1] if items and isinstance(items[-1], Condition) else None


def flatten(tree: InstructionTree) -> list[FlatEntry]:
    """The paper's flattening (l.646-660): order kept, ancestors conjoined, equal neighbours merged."""
    entries: list[FlatEntry] = []

    def emit(conditions: list[Condition], actions: list[Action]) -> None:
        texts, ids = [c.text for c in conditions], [c.id for c in conditions]
        if entries and entries[-1].condition_ids == ids:
            entries[-1].actions.extend(a.text for a in actions)
            entries[-1].action_ids.extend(a.id for a in actions)
            return
        entries.append(FlatEntry(conditions=texts, condition_ids=ids, actions=[a.text for a in actions],
                                 action_ids=[a.id for a in actions]))

    def walk(items: list, path: list[Condition]) -> None:
        run: list[Action] = []
        for item in items:
            if isinstance(item, Action):
                run.append(item)
                continue
            if run:
                emit(path, run)
                run = []
            walk(item.items, [*path, item])
        if run:
            emit(path, run)

    walk(tree.items, [])
    return entries


def render_f1(tree: InstructionTree) -> str:
    """The tree as f1 text; ``parse_f1(render_f1(t))`` gives ``t`` back."""
    lines: list[str] = []

    def walk(items: list, depth: int) -> None:
        pad = " " * (INDENT * depth)
        for item in items:
            if isinstance(item, Action):
                lines.append(f"{pad}- {item.text}")
            else:
                lines.append(f"{pad}Else:" if item.is_else else f"{pad}If {item.text}:")
                walk(item.items, depth + 1)

    walk(tree.items, 0)
    return "\n".join(lines)


def render_f2(entries: list[FlatEntry]) -> str:
    """Flattened If-Then text (f2): ``If c1 AND c2:`` then indented ``- action`` lines."""
    blocks = []
    for entry in entries:
        head = f"If {' AND '.join(entry.conditions)}:" if entry.conditions else "In all cases:"
        blocks.append("\n".join([head, *(f"{' ' * INDENT}- {a}" for a in entry.actions)]))
    return "\n".join(blocks)


def render_f3(entries: list[FlatEntry]) -> str:
    """Flattened JSON mappings (f3): a list of ``{"conditions": [...], "actions": [...]}``."""
    return json.dumps([{"conditions": e.conditions, "actions": e.actions} for e in entries], indent=2,
                      ensure_ascii=False)


def render_f1_with_ids(tree: InstructionTree) -> str:
    """f1 with every line prefixed by its statement id (``[do.c1.a2] - Check ...``).

    Prompts that must name statements (the dialogue stage reports which actions its final turn
    carries out) get this form, so the model copies ids instead of paraphrasing text.
    """
    lines: list[str] = []

    def walk(items: list, depth: int) -> None:
        pad = " " * (INDENT * depth)
        for item in items:
            if isinstance(item, Action):
                lines.append(f"[{item.id}] {pad}- {item.text}")
            else:
                lines.append(f"[{item.id}] {pad}" + ("Else:" if item.is_else else f"If {item.text}:"))
                walk(item.items, depth + 1)

    walk(tree.items, 0)
    return "\n".join(lines)


def _walk_blocks(items: list, path: tuple[Condition, ...]):
    for item in items:
        yield item, path
        if isinstance(item, Condition):
            yield from _walk_blocks(item.items, (*path, item))


def max_depth(tree: InstructionTree) -> int:
    """Deepest nesting of condition blocks (0 when the section has only top-level actions)."""
    return max((len(path) + isinstance(item, Condition) for item, path in _walk_blocks(tree.items, ())), default=0)


def enclosing_block(tree: InstructionTree, ids: list[str]) -> Condition | None:
    """The innermost condition block that contains every statement in ``ids``.

    This is TOD-ProcBench's "section, including its closest 'if' condition" (l.147) decided in
    code: the deepest common ancestor block. None when an id is unknown, when ``ids`` is empty,
    or when the statements share no enclosing condition (e.g. a top-level action).
    """
    paths = {item.id: path for item, path in _walk_blocks(tree.items, ())}
    if not ids or any(i not in paths for i in ids):
        return None
    common: Condition | None = None
    for blocks in zip(*(paths[i] for i in ids), strict=False):  # shortest path bounds the common prefix
        if any(b.id != blocks[0].id for b in blocks):
            break
        common = blocks[0]
    return common


def subtree_ids(block: Condition) -> set[str]:
    """The block's own id and the ids of everything inside it."""
    found = {block.id}
    for item in block.items:
        found |= subtree_ids(item) if isinstance(item, Condition) else {item.id}
    return found


def render_block(block: Condition, *, section: str = "do") -> str:
    """One block as standalone f1; an ``Else`` block is written as ``If NOT (...):`` so it parses alone."""
    standalone = block.model_copy(update={"is_else": False})
    return render_f1(InstructionTree(section=section, items=[standalone]))
