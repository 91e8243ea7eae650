"""SOP variants: harder, agent-facing rewrites of the base SOP that keep its ground truth (issue 5 item 3).

Sources: SOP-Bench §3.3.2 SOP-level complexity injection (branching logic, redundant details,
tangential information, ambiguous instructions) and TELLER S10 SOP abstraction (implicit decision
points, ambiguous expressions, exception paths without branching instructions). Neither paper gives
a prompt or an answer format; ours is in ``docs/hardening/sop_variants.md``.

Why an edit script instead of a rewritten SOP: the model answers with ``<edit><find>…</find>
<replace>…</replace></edit>`` blocks and code applies them. Every change is then exact and
attributable (the diff is exactly the edits), untouched text cannot drift by accident, and the
answers stay short. A ``find`` that is missing, repeated or overlapping another edit is a
:class:`~sopforge.parsing.ParseError` naming the edit, so the model is re-asked.
"""

from __future__ import annotations

import difflib
from typing import Literal

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, extract_all_tags, extract_tag, one_line
from sopforge.checks import CheckResult

__all__ = [
    "EDITS_TAG",
    "SUMMARY_TAG",
    "VERDICTS",
    "SOPEdit",
    "JudgeVerdict",
    "SOPVariant",
    "parse_edits",
    "parse_summary",
    "apply_edits",
    "unified_diff",
    "parse_verdict",
]

EDITS_TAG = "edits"
SUMMARY_TAG = "variant_summary"
VERDICTS: tuple[str, ...] = ("keeps_ground_truth", "changes_ground_truth")
_QUOTE = 80


class SOPEdit(BaseModel):
    """One replacement in the base SOP text."""

    find: str = Field(description="Exact passage of the base SOP (occurs exactly once), outer whitespace stripped.")
    replace: str = Field(description="Text that takes its place, surrounding whitespace stripped; may be empty.")


class JudgeVerdict(BaseModel):
    """The LLM judge's verdict on one variant (``prompts/sop_bench/variant_judge.j2``)."""

    keeps_ground_truth: bool = Field(description="True when every decision keeps the result the base SOP gives.")
    reason: str = Field(description="The judge's one-paragraph justification.")
    undeterminable: list[str] = Field(
        default_factory=list, description="Decisions or fields the judge found no longer determinable.")


class SOPVariant(BaseModel):
    """A verified SOP variant: what agents are given instead of the base SOP (ground truth is unchanged)."""

    variant_type: str = Field(description="One of options.VARIANT_TYPES, e.g. 'implicit_decision_points'.")
    paper: Literal["sop_bench", "teller"] = Field(description="Paper the variant type comes from.")
    text: str = Field(description="Full variant SOP text (the base SOP with the edits applied).")
    diff: str = Field(description="Unified diff sop.txt -> sop_<type>.txt.")
    edits: list[SOPEdit] = Field(description="The edit script that produced the text, in the model's order.")
    summary: str = Field(description="The model's <variant_summary> of what it changed.")
    verdict: JudgeVerdict = Field(description="The judge's verdict (keeps_ground_truth for a kept variant).")
    cycles: int = Field(ge=1, description="Generation cycle that produced the kept variant (1 = first try).")
    checks: list[CheckResult] = Field(description="Structural checks of the kept variant (sop_variant_checks).")

    @property
    def filename(self) -> str:
        """Export file name, e.g. ``sop_branching.txt``."""
        return f"sop_{self.variant_type}.txt"


def _quote(text: str) -> str:
    return repr(one_line(text, _QUOTE))


def parse_edits(raw: str) -> list[SOPEdit]:
    """Read the ``<edits>`` block of a generator answer.

    Args:
        raw: The model's full answer.

    Returns:
        The edits in order; ``find`` and ``replace`` are stripped of surrounding whitespace
        (models wrap tag contents in newlines; inner newlines are kept).

    Raises:
        ParseError: No ``<edits>`` block, no ``<edit>`` in it, or an edit without exactly one
            non-empty ``<find>`` and one ``<replace>``.
    """
    body = extract_tag(raw, EDITS_TAG)
    blocks = extract_all_tags(body, "edit")
    if not blocks:
        raise ParseError("the <edits> block holds no <edit><find>…</find><replace>…</replace></edit>")
    edits = []
    for n, block in enumerate(blocks, start=1):
        finds, replaces = extract_all_tags(block, "find"), extract_all_tags(block, "replace")
        if len(finds) != 1 or len(replaces) != 1:
            raise ParseError(f"edit {n} must hold exactly one <find> and one <replace>; "
                             f"found {len(finds)} <find> and {len(replaces)} <replace>")
        if not finds[0].strip():
            raise ParseError(f"edit {n} has an empty <find>; copy the passage to change from the SOP")
        edits.append(SOPEdit(find=finds[0].strip(), replace=replaces[0].strip()))
    return edits


def parse_summary(raw: str) -> str:
    """The ``<variant_summary>`` of a generator answer, or ``""`` when absent (it is informative only)."""
    try:
        return extract_tag(raw, SUMMARY_TAG)
    except ParseError:
        return ""


def apply_edits(base_text: str, edits: list[SOPEdit]) -> str:
    """Apply an edit script to the base SOP text.

    Every ``find`` is located in the *base* text (not in the text produced by earlier edits),
    so the edits are independent of their order and each maps to one span of the base.

    Args:
        base_text: The base SOP text (``SOPDocument.text``).
        edits: Edits from :func:`parse_edits`.

    Returns:
        The variant text.

    Raises:
        ParseError: A ``find`` does not occur exactly once, or two edits touch overlapping text.
    """
    spans: list[tuple[int, int, int]] = []  # (start, end, edit number)
    for n, edit in enumerate(edits, start=1):
        count = base_text.count(edit.find)
        if count == 0:
            raise ParseError(f"edit {n}: <find> {_quote(edit.find)} is not in the SOP; copy the passage "
                             "character for character from the SOP, including punctuation and backticks")
        if count > 1:
            raise ParseError(f"edit {n}: <find> {_quote(edit.find)} occurs {count} times in the SOP; "
                             "extend it with neighbouring words until it occurs exactly once")
        start = base_text.index(edit.find)
        spans.append((start, start + len(edit.find), n))
    spans.sort()
    for (s1, e1, n1), (s2, _e2, n2) in zip(spans, spans[1:]):
        if s2 < e1:
            first, second = sorted((n1, n2))
            raise ParseError(f"edits {first} and {second} change overlapping text; merge them into one edit")
    text = base_text
    for start, end, n in reversed(spans):
        text = text[:start] + edits[n - 1].replace + text[end:]
    return text


def unified_diff(base: str, variant: str, variant_type: str) -> str:
    """Unified diff of the base SOP against a variant, labelled as the exported files.

    Args:
        base: Base SOP text (exported as ``sop.txt``).
        variant: Variant text (exported as ``sop_<variant_type>.txt``).
        variant_type: The variant type, for the label.

    Returns:
        The diff text; empty when the texts are equal.
    """
    lines = difflib.unified_diff(base.splitlines(keepends=True), variant.splitlines(keepends=True),
                                 fromfile="sop.txt", tofile=f"sop_{variant_type}.txt")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def parse_verdict(raw: str) -> JudgeVerdict:
    """Read a judge answer: ``<verdict>``, ``<reason>``, ``<undeterminable>`` (strict).

    A verdict the code cannot read is never guessed at: the judge is re-asked. A
    ``keeps_ground_truth`` verdict that lists undeterminable decisions contradicts itself and
    is refused for the same reason.

    Args:
        raw: The judge's full answer.

    Returns:
        The verdict.

    Raises:
        ParseError: A tag is missing, the verdict is not one of :data:`VERDICTS`, the reason is
            empty, or the verdict contradicts the undeterminable list.
    """
    verdict = extract_tag(raw, "verdict").strip().strip("`\"'").strip()
    if verdict not in VERDICTS:
        raise ParseError(f"<verdict> must be exactly keeps_ground_truth or changes_ground_truth, not {_quote(verdict)}")
    reason = extract_tag(raw, "reason")
    if not reason:
        raise ParseError("<reason> is empty; say in one paragraph why the decisions keep or lose their results")
    listed = extract_tag(raw, "undeterminable")
    said_none = listed.lower().strip(".") == "none"
    names = [] if said_none else [x.strip().strip("`") for x in listed.split(",") if x.strip()]
    if not names and not said_none:
        raise ParseError('<undeterminable> must be a comma-separated list of decision or field names, or "none"')
    keeps = verdict == "keeps_ground_truth"
    if keeps and names:
        raise ParseError(f"<verdict> is keeps_ground_truth but <undeterminable> lists {', '.join(names)}; "
                         "either every decision is determinable (none) or the verdict is changes_ground_truth")
    return JudgeVerdict(keeps_ground_truth=keeps, reason=reason, undeterminable=names)
