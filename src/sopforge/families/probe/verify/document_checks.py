"""Deterministic checks of one generated document (research/probe.md requirements 7, 9 and 11).

They run before any judge, so a document that is the wrong length, written by a stranger, dated
in another year or carrying a bottleneck's identifier costs no judge call. A document "leaks" a
bottleneck when it contains one of its identifiers (``RX-88213``, ``PA-2291``): such a string is
specific to the bottleneck, so only its own true positives may carry it.
"""

from __future__ import annotations

import re
from datetime import date

from sopforge.checks import CheckResult, check
from sopforge.families.probe.models.bottlenecks import Bottleneck
from sopforge.families.probe.models.documents import ParsedDocument
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.dates import check_as_of

__all__ = ["check_document", "identifiers", "leaked_identifiers"]

_IDENTIFIER = re.compile(r"\b(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+\b"
                         r"|\b[A-Z]{2,}\d+[A-Z0-9]*\b")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def identifiers(text: str) -> set[str]:
    """Case and ticket numbers: hyphenated tokens with a digit and a capital letter (``RX-88213``,
    ``Q3-2026``) or capitals followed by digits (``ENG4521``). Plain numbers, dates, times and
    ordinary words with digits (``90-day``, ``24-hour``) are not identifiers."""
    found = set()
    for m in _IDENTIFIER.finditer(text):
        token = m.group(0)
        if not re.search(r"[A-Z]", token):
            continue
        found.add(token.upper())
    return found


def leaked_identifiers(text: str, bottlenecks: list[Bottleneck]) -> dict[int, list[str]]:
    """Bottleneck number -> the identifiers of that bottleneck ``text`` contains."""
    upper = text.upper()
    leaks = {}
    for i, b in enumerate(bottlenecks, 1):
        hits = sorted(x for x in identifiers(b.description) if re.search(rf"(?<![A-Z0-9-]){re.escape(x)}(?![A-Z0-9])", upper))
        if hits:
            leaks[i] = hits
    return leaks


def check_document(doc: ParsedDocument, world: WorldModel, *, words: tuple[int, int], bottlenecks: list[Bottleneck],
                   own: int | None, max_days: int = 200, name: str = "probe_document") -> list[CheckResult]:
    """Length, people, date and identifier leaks of one document.

    Args:
        doc: The parsed document.
        world: The persona's world: every address in the headers must belong to it, and dates sit near its today.
        words: [min, max] words of the body for this kind.
        bottlenecks: All the persona's bottlenecks.
        own: The bottleneck a true positive evidences (its identifiers are allowed); None for distractors.
        max_days: How far from today the document's date may be (a time-shifted hard negative passes more).
        name: Check-name prefix.
    """
    known = {world.persona_email.lower(), *(r.email.lower() for r in world.relationships)}
    header_text = " ".join(doc.headers.values())
    strangers = sorted({a for a in (m.lower() for m in _EMAIL.findall(header_text)) if a not in known})
    people = {p.lower() for p in world.people()}
    sender_known = doc.kind == "email" or any(p in doc.sender.lower() for p in people)
    today, written = date.fromisoformat(world.today), date.fromisoformat(doc.date)
    days = abs((written - today).days)
    # E-mails and documents exist already, so they are dated on or before today; a calendar event
    # may lie ahead, but its description is written today.
    future = doc.kind != "calendar" and written > today
    leaks = {i: ids for i, ids in leaked_identifiers(doc.text, bottlenecks).items() if i != own}
    low, high = words
    return [
        check(f"{name}.length", low <= doc.words <= high,
              f"{doc.kind} {doc.title!r} has {doc.words} words; write {low}-{high}",
              ok=f"{doc.kind} {doc.title!r} has {doc.words} words, within {low}-{high}", words=doc.words),
        check(f"{name}.known_people", not strangers and sender_known,
              f"{doc.kind} {doc.title!r}: every address in the header must be the persona's or a relationship's "
              f"(unknown: {strangers or [doc.sender]})",
              ok=f"{doc.kind} {doc.title!r}: everyone in the header is the persona or a relationship"),
        check(f"{name}.date_near_today", days <= max_days,
              f"{doc.kind} {doc.title!r} is dated {doc.date}, {days} days from today ({world.today}); stay within "
              f"{max_days} days",
              ok=f"{doc.kind} {doc.title!r} is dated {doc.date}, {days} days from today ({world.today}), within "
                 f"{max_days} days"),
        check(f"{name}.not_in_future", not future,
              f"{doc.kind} {doc.title!r} is dated {doc.date}, after today ({world.today}): an e-mail or document "
              "in the datastore was written on or before today",
              ok=f"{doc.kind} {doc.title!r} is dated {doc.date}, not after today ({world.today})"),
        check_as_of(f"{name}.dates_as_of", {"body": doc.body}, min(written, today) if future else
                    (today if doc.kind == "calendar" else written), f"{doc.kind} {doc.title!r}"),
        check(f"{name}.no_foreign_identifiers", not leaks,
              f"{doc.kind} {doc.title!r} carries identifiers of "
              + "; ".join(f"bottleneck {i} ({', '.join(ids)})" for i, ids in leaks.items())
              + " it must not evidence",
              ok=f"{doc.kind} {doc.title!r} carries no identifier of "
                 + ("another bottleneck" if own is not None else "any bottleneck"),
              leaks={str(k): v for k, v in leaks.items()}),
    ]
