"""Datastore documents: e-mails, calendar events and documents (PROBE L84), and how they are read.

A document is raw text with a header block, as T9-T11 and T14-T16 ask (L1326-1551, L1685-1889):
- email: ``From:``, ``To:``, optional ``CC:``, ``Subject:``, ``Date:``, a blank line, the body;
- calendar: ``Title:``, ``Date:``, ``Time:``, ``Duration:``, ``Location:``, ``Organizer:``,
  ``Attendees:``, then ``Description:`` and the agenda;
- document: ``Title:``, ``Author:``, ``Date:``, ``Type:``, ``Recipients:``, a blank line, headed sections.
Each answer wraps every document in ``<document>…</document>``. The header fields are parsed so the
shortcut gate can compare surface features and the adversary sees only titles, senders and dates.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, extract_all_tags, one_line
from sopforge.tokens import approx_token_count

__all__ = ["DOCUMENT_KINDS", "REQUIRED_HEADERS", "Document", "ParsedDocument", "document_id", "parse_document",
           "parse_documents"]

DocumentKind = Literal["email", "calendar", "document"]
DOCUMENT_KINDS: tuple[str, ...] = ("email", "calendar", "document")
REQUIRED_HEADERS: dict[str, tuple[str, ...]] = {
    "email": ("From", "To", "Subject", "Date"),
    "calendar": ("Title", "Date", "Time", "Duration", "Location", "Organizer", "Attendees"),
    "document": ("Title", "Author", "Date", "Type", "Recipients"),
}
_TITLE_FIELD = {"email": "Subject", "calendar": "Title", "document": "Title"}
_SENDER_FIELD = {"email": "From", "calendar": "Organizer", "document": "Author"}
_HEADER_RE = re.compile(r"^([A-Z][A-Za-z/ ]{1,20}):[ \t]*(.*)$")
_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


class ParsedDocument(BaseModel):
    """A document's text and the surface fields read from its header."""

    kind: DocumentKind
    text: str = Field(description="The full document as the agent reads it (header and body).")
    headers: dict[str, str] = Field(description="Header name -> value, as written.")
    title: str = Field(description="Subject (email) or Title (calendar, document).")
    sender: str = Field(description="From (email), Organizer (calendar) or Author (document).")
    date: str = Field(description="ISO date (YYYY-MM-DD) from the Date header.")
    body: str = Field(description="Everything after the header block.")

    @property
    def words(self) -> int:
        return len(re.findall(r"\w+", self.body))

    @property
    def tokens(self) -> int:
        return approx_token_count(self.text)


class Document(ParsedDocument):
    """A generated document with its place in the pipeline (never shown to an agent besides id/text)."""

    id: str = Field(description="Opaque id, 'd' + 8 hex of the sha256 of its sample and text: identical format for "
                                "every role, different in every sample.")
    role: Literal["true_positive", "distractor", "hard_negative"]
    persona_id: str
    sample_id: str = Field(description="The sample whose datastore holds it: every document belongs to one sample.")
    origin: str = Field(description="How it was made: evidence/<kind>, bulk/<kind>, enhanced, natural, "
                                    "hard_negative/<manipulation>, camouflage, revised.")
    note: str = Field("", description="Evidence role (true positives), or what a rewrite started from.")
    changed: list[dict[str, str]] = Field(default_factory=list, description="Hard negatives: what was changed from "
                                                                            "the source evidence, one {what, original, "
                                                                            "replacement} per change.")

    def for_agent(self) -> dict:
        return {"id": self.id, "type": self.kind, "text": self.text}


def document_id(text: str, sample_id: str) -> str:
    """'d' + 8 hex of the sample and the text: the same format for every role, and fresh in every sample, so
    ids never tell which documents two datastores share."""
    return "d" + hashlib.sha256(f"{sample_id}\n{text.strip()}".encode("utf-8")).hexdigest()[:8]


def parse_document(text: str, kind: str) -> ParsedDocument:
    """Read one document of ``kind``.

    Raises:
        ParseError: a required header is missing or empty, the date is not ISO, or the body is empty.
    """
    if kind not in DOCUMENT_KINDS:
        raise ParseError(f"unknown document kind {kind!r}")
    text = text.strip()
    lines = text.splitlines()
    headers: dict[str, str] = {}
    body_start = len(lines)
    for i, line in enumerate(lines):
        match = _HEADER_RE.match(line.strip())
        if not line.strip():
            if headers:
                body_start = i + 1
                break
            continue
        if match is None or (kind == "calendar" and match.group(1) == "Description"):
            body_start = i
            break
        headers[match.group(1).strip()] = match.group(2).strip()
    missing = [h for h in REQUIRED_HEADERS[kind] if not headers.get(h)]
    if missing:
        raise ParseError(f"{kind} {one_line(text, 60)!r} lacks header line(s) {', '.join(m + ':' for m in missing)} "
                         f"(needs {', '.join(h + ':' for h in REQUIRED_HEADERS[kind])} at the top, one per line)")
    found = _DATE_RE.search(headers["Date"])
    if found is None:
        raise ParseError(f"{kind} {headers[_TITLE_FIELD[kind]]!r}: Date must contain an ISO date YYYY-MM-DD, "
                         f"got {headers['Date']!r}")
    try:
        iso = date(*map(int, found.groups())).isoformat()
    except ValueError as exc:
        raise ParseError(f"{kind} {headers[_TITLE_FIELD[kind]]!r}: {headers['Date']!r} is not a real date") from exc
    body = "\n".join(lines[body_start:]).strip()
    if not body:
        raise ParseError(f"{kind} {headers[_TITLE_FIELD[kind]]!r} has no body after its header")
    return ParsedDocument(kind=kind, text=text, headers=headers, title=headers[_TITLE_FIELD[kind]],
                          sender=headers[_SENDER_FIELD[kind]], date=iso, body=body)


def parse_documents(raw: str, kind: str, *, expected: int | None = None) -> list[ParsedDocument]:
    """Every ``<document>`` block of an answer, read as ``kind``.

    Raises:
        ParseError: no block, a different count than ``expected``, or an unreadable block.
    """
    blocks = [b for b in extract_all_tags(raw, "document") if b.strip()]
    if not blocks:
        raise ParseError("missing <document>…</document> block")
    if expected is not None and len(blocks) != expected:
        raise ParseError(f"expected {expected} <document> block(s), got {len(blocks)}")
    return [parse_document(b, kind) for b in blocks]
