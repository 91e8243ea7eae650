"""TOD-ProcBench artifacts: the instruction document, dialogues and the balanced compliance set.

The answer formats are in ``docs/hardening/compliance.md``. The parsers here are strict and
raise :class:`~sopforge.parsing.ParseError` with one line the model can act on, because every
answer is read by code (the stage re-asks on a parse error).

Tags are matched case-insensitively: the paper itself mixes ``<What_to_do>`` and
``<what_to_do>`` (tod_procbench.md §3), and a model copying either spelling is not wrong.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any, Literal

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, strip_code_fence
from sopforge.families.sop_tools.models.instructions import InstructionTree, flatten, parse_f1, render_f2

__all__ = ["InstructionDocument", "Turn", "Dialogue", "ComplianceItem", "document_id", "extract_tag_ci",
           "parse_instruction_document", "parse_dialogue", "parse_rewrite", "parse_entailment", "Label"]

Label = Literal["compliant", "violating"]
_TURN = re.compile(r"^(agent|customer)\s*:\s*(.+)$", re.IGNORECASE)
_ID = re.compile(r"[\w.]+")


def extract_tag_ci(text: str, tag: str, *, dedent: bool = False) -> str:
    """The content of the last ``<tag>…</tag>`` block, tag name matched case-insensitively.

    Args:
        text: The model answer.
        tag: Tag name.
        dedent: Keep relative indentation (for f1, where it is the nesting) and remove only the
            indentation common to all lines; otherwise the content is stripped.

    Raises:
        ParseError: The block is missing or never closed.
    """
    blocks = re.findall(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, re.DOTALL | re.IGNORECASE)
    if not blocks:
        if re.search(rf"<{re.escape(tag)}>", text, re.IGNORECASE):
            raise ParseError(f"unclosed <{tag}> block: no </{tag}> after it")
        raise ParseError(f"missing <{tag}>…</{tag}> block")
    if dedent:
        body = re.sub(r"^\s*```[\w+-]*[ \t]*\n|\n?```\s*$", "", blocks[-1].strip("\n"))
        return textwrap.dedent(body).strip("\n").rstrip()
    return strip_code_fence(blocks[-1])


def document_id(theme_slug: str) -> str:
    """Id of a domain's instruction document, as compliance items and the JSONL export name it."""
    return f"{theme_slug}/instructions"


class InstructionDocument(BaseModel):
    """One instruction document (TOD-ProcBench §4 record) in f1 with its deterministic f2/f3."""

    intent: str = Field(description="The task the document governs (the SOP title).")
    what_to_do: str = Field(description="f1 text of <What_to_do>: 'If …:' lines and '- action' bullets.")
    what_to_say: str = Field(description="Text of <What_to_say>: bullets of key utterances.")
    tree: InstructionTree = Field(description="Parsed What_to_do with stable statement ids.")
    f2: str = Field(description="Flattened If-Then text of What_to_do (deterministic).")
    f3: list[dict[str, Any]] = Field(description="Flattened JSON mappings of What_to_do (deterministic).")

    def to_record(self, document_id: str) -> dict[str, Any]:
        """The JSONL export record (docs/hardening/compliance.md, "instruction_document")."""
        return {"record_type": "instruction_document", "document_id": document_id, "intent": self.intent,
                "what_to_do": self.what_to_do, "what_to_say": self.what_to_say,
                "flattened_text_what_to_do": self.f2, "json_what_to_do": self.f3,
                "statements": self.tree.statements()}


def parse_instruction_document(raw_text: str, *, intent: str) -> InstructionDocument:
    """Read ``<What_to_do>`` (f1) and ``<What_to_say>`` from a model answer.

    Raises:
        ParseError: A block is missing, What_to_say is empty, or What_to_do is not valid f1.
    """
    what_to_do = extract_tag_ci(raw_text, "What_to_do", dedent=True)
    what_to_say = extract_tag_ci(raw_text, "What_to_say")
    if not what_to_say:
        raise ParseError("<What_to_say> is empty: list the key utterances as '- ' bullets")
    tree = parse_f1(what_to_do)
    entries = flatten(tree)
    f3 = [{"conditions": e.conditions, "actions": e.actions} for e in entries]
    return InstructionDocument(intent=intent, what_to_do=what_to_do, what_to_say=what_to_say, tree=tree,
                               f2=render_f2(entries), f3=f3)


class Turn(BaseModel):
    """One dialogue turn, ABCD style (lowercase role)."""

    role: Literal["agent", "customer"] = Field(description="Who speaks.")
    text: str = Field(description="What is said, without the role prefix.")

    def line(self) -> str:
        """``role: text`` as in ABCD transcripts."""
        return f"{self.role}: {self.text}"


class Dialogue(BaseModel):
    """A short dialogue for one task whose final agent turn is the compliant response."""

    task_id: str = Field(description="Ground-truth task the dialogue plays out.")
    turns: list[Turn] = Field(description="All turns; the last is the agent's compliant response.")
    followed: list[str] = Field(description="Ids of the actions the final agent turn carries out.")
    section_id: str | None = Field(None, description="Id of the extracted section (innermost If block enclosing "
                                                     "every followed action); None before extraction.")
    section_f1: str | None = Field(None, description="The extracted section rendered as f1.")

    @property
    def prefix(self) -> list[Turn]:
        """Every turn before the final agent turn."""
        return self.turns[:-1]

    @property
    def response(self) -> str:
        """The final agent turn's text (the compliant response)."""
        return self.turns[-1].text


def parse_dialogue(raw_text: str, *, task_id: str) -> Dialogue:
    """Read ``<dialogue>`` (``agent:``/``customer:`` lines) and ``<followed>`` (comma-separated ids).

    Raises:
        ParseError: A block is missing, a line has no known role, or <followed> holds no id.
    """
    turns = []
    for number, line in enumerate(extract_tag_ci(raw_text, "dialogue").splitlines(), 1):
        if not line.strip():
            continue
        match = _TURN.match(line.strip().strip('"'))
        if not match:
            raise ParseError(f"dialogue line {number}: expected 'agent: …' or 'customer: …', "
                             f"got {line.strip()[:60]!r}")
        turns.append(Turn(role=match.group(1).lower(), text=match.group(2).strip()))
    followed_text = extract_tag_ci(raw_text, "followed")
    followed = [part.strip().strip("[]") for part in followed_text.split(",") if part.strip()]
    bad = [f for f in followed if not _ID.fullmatch(f)]
    if bad or not followed:
        raise ParseError("<followed> must list statement ids like do.c1.a2 separated by commas, "
                         f"got {followed_text[:60]!r}")
    return Dialogue(task_id=task_id, turns=turns, followed=followed)


def parse_rewrite(raw_text: str) -> str:
    """The rewritten agent response from ``<response>``, without a leading ``agent:``.

    Raises:
        ParseError: The block is missing, empty, or holds more than one turn.
    """
    text = extract_tag_ci(raw_text, "response").strip().strip('"')
    text = re.sub(r"^agent\s*:\s*", "", text, flags=re.IGNORECASE).strip()
    if not text:
        raise ParseError("<response> is empty: write the revised agent response in it")
    if re.search(r"^\s*(agent|customer)\s*:", text, re.IGNORECASE | re.MULTILINE):
        raise ParseError("<response> holds more than one turn: write only the agent's revised response")
    return " ".join(text.split())


def parse_entailment(raw_text: str) -> tuple[bool, str]:
    """``(entails, reason)`` from ``<entails>yes|no</entails>`` and ``<reason>``.

    Raises:
        ParseError: Either block is missing, or <entails> is not exactly yes or no.
    """
    verdict = extract_tag_ci(raw_text, "entails").strip().lower().rstrip(".")
    if verdict not in ("yes", "no"):
        raise ParseError(f"<entails> must be exactly yes or no, got {verdict[:40]!r}")
    reason = " ".join(extract_tag_ci(raw_text, "reason").split())
    if not reason:
        raise ParseError("<reason> is empty: say in one sentence why")
    return verdict == "yes", reason


class ComplianceItem(BaseModel):
    """One item of the balanced compliance set (TOD-ProcBench Task 2 instance).

    Items come in twins with the same ``pair_id``: the compliant response and its violating
    rewrite, sharing prefix and policy. The manipulation fields describe the pair and are
    filled on both twins, so accuracy can be broken down by manipulation type.
    """

    pair_id: str = Field(description="'<task_id>:<manipulation_type>'; shared by the two twins.")
    label: Label = Field(description="Whether the response complies with the policy.")
    task_id: str = Field(description="Ground-truth task the dialogue plays out.")
    document_id: str = Field(description="Id of the full instruction document the policy was cut from.")
    section_id: str = Field(description="Statement id of the policy section (an If block) in that document.")
    prefix: list[Turn] = Field(description="Dialogue turns before the response (shared by the twins).")
    policy: str = Field(description="The ORIGINAL section as f1 (shared by the twins).")
    response: str = Field(description="The agent response to judge.")
    manipulation_type: str = Field(description="parameter_mismatch, single_condition_replacement or "
                                               "multi_condition_replacement (pair-level).")
    changed_ids: list[str] = Field(description="Statement ids the manipulation changed (exactly one).")
    manipulated_policy: str = Field(description="The section after manipulation, as f1.")
    manipulated_document: str = Field(description="The full What_to_do after manipulation, as f1.")
    diff: str = Field(description="Unified diff of the section text, original -> manipulated.")
    retries: int = Field(description="Extra manipulation cycles the violating twin needed (cycles - 1).")
    seed: int = Field(description="Seed of the manipulation that was kept.")

    def to_record(self) -> dict[str, Any]:
        """The JSONL export record (docs/hardening/compliance.md, "compliance_item")."""
        record = self.model_dump()
        record["prefix"] = [t.line() for t in self.prefix]
        return {"record_type": "compliance_item", **record}
