"""One document, generated and verified in cycles: what the evidence, distractor and hard-negative stages share.

A cycle generates (or receives) a document, runs its deterministic checks, optionally T13's
review, and the blind f(d) judge. A document is kept when the judge finds exactly the expected
bottlenecks in it (its own for a true positive, none otherwise). Otherwise the next cycle
regenerates it with the reasons quoted, up to ``1 + max_retries`` cycles; then it is dropped
with the last reason. Every cycle's answers are kept by the asker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from sopforge.checks import CheckResult
from sopforge.errors import ValidationFailed
from sopforge.families.probe.asker import Asker
from sopforge.families.probe.models.bottlenecks import Bottleneck
from sopforge.families.probe.models.documents import ParsedDocument, parse_documents
from sopforge.families.probe.models.verdicts import ConveysVerdict, EvidenceReview
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.document_checks import check_document
from sopforge.families.probe.verify.judges import ask_conveys
from sopforge.parsing import one_line

__all__ = ["Outcome", "date_window", "document_parser", "documents_per_ask", "verify_in_cycles"]

# The days before "today" an e-mail or document of the datastore is dated in, and the days around it
# a calendar event is: the same for evidence and distractors, so a date says nothing about a role.
_WINDOW = {"email": (-21, -1), "document": (-21, -1), "calendar": (-14, 21)}


def date_window(kind: str, today: str) -> tuple[str, str]:
    """(first, last) ISO day a document of ``kind`` is dated in, for a world written as of ``today``."""
    start, end = _WINDOW[kind]
    day = date.fromisoformat(today)
    return (day + timedelta(days=start)).isoformat(), (day + timedelta(days=end)).isoformat()


def documents_per_ask(max_words: int, max_tokens: int, cap: int) -> int:
    """How many documents of at most ``max_words`` fit one answer of ``max_tokens`` (with a quarter kept
    for headers, tags and the model's own slack), at most ``cap`` and at least one."""
    per_document = int(max_words * 1.4) + 120
    return max(1, min(cap, int(max_tokens * 0.75) // per_document))


@dataclass
class Outcome:
    """What became of one document: kept (with its verdicts) or dropped (with the reason)."""

    document: ParsedDocument | None
    conveys: ConveysVerdict | None
    review: EvidenceReview | None
    retried: bool
    reason: str = ""


def document_parser(kind: str, world: WorldModel, *, words: tuple[int, int], bottlenecks: list[Bottleneck],
                    own: int | None, max_days: int = 200,
                    extra: Callable[[ParsedDocument], list[CheckResult]] | None = None):
    """parse_and_check for an answer holding one ``<document>`` of ``kind``."""
    def parse(raw: str) -> tuple[ParsedDocument, list[CheckResult]]:
        doc = parse_documents(raw, kind, expected=1)[0]
        checks = check_document(doc, world, words=words, bottlenecks=bottlenecks, own=own, max_days=max_days)
        return doc, checks + (extra(doc) if extra else [])
    return parse


def _expected_text(expected: list[int]) -> str:
    return f"evidence of bottleneck {expected[0]} only" if expected else "evidence of no bottleneck"


def verify_in_cycles(asker: Asker, item: str, *, world: WorldModel, bottlenecks: list[Bottleneck], expected: list[int],
                     cycles: int, generate: Callable[[int, str | None], ParsedDocument],
                     review: Callable[[ParsedDocument, int], tuple[EvidenceReview, str]] | None = None) -> Outcome:
    """Generate, check and judge one document until it is accepted or the cycles run out.

    Args:
        asker: The stage's asker (keeps every raw answer).
        item: The document's call-key item; cycle n judges as ``<item>-c<n>-judge``.
        world: The persona's world model.
        bottlenecks: All the persona's bottlenecks (the judge sees them all, numbered).
        expected: What the judge must find: ``[own]`` for a true positive, ``[]`` for the others.
        cycles: How many generation cycles are allowed (1 + max_retries).
        generate: ``(cycle, reasons) -> document``; raises ValidationFailed when no answer passes the checks.
        review: Optional ``(document, cycle) -> (review, failure or "")`` run before the judge (T13).
    """
    reasons: str | None = None
    for cycle in range(1, cycles + 1):
        try:
            doc = generate(cycle, reasons)
        except ValidationFailed as exc:
            reasons = one_line(str(exc), 300)
            continue
        got_review, failure = review(doc, cycle) if review else (None, "")
        if failure:
            reasons = failure
            continue
        verdict = ask_conveys(asker, f"{item}-c{cycle}-judge", world, [b.description for b in bottlenecks], doc)
        if sorted(set(verdict.evidence_of)) == expected:
            return Outcome(doc, verdict, got_review, retried=cycle > 1)
        found = ", ".join(map(str, verdict.evidence_of)) or "none"
        reasons = (f"an independent reader judged it evidence of bottleneck(s) {found}, but it must be "
                   f"{_expected_text(expected)}: {verdict.reason}")
    return Outcome(None, None, None, retried=cycles > 1, reason=reasons or "not generated")
