"""Dates that agree with the world's "as of" day: nothing after it is told as past.

Every PROBE world is written as of one day (``probe.reference_date``, the world model's ``today``).
An independent answerer once wrote a world dated 2026-03-02 whose goals and relationships told
events of late 2026 and 2027 as done: an agent reading it cannot tell what is pending. The checks
here read the dates a text mentions (ISO, "March 9, 2026", "9 March 2026", "November 2026",
"Q4 2026", "03/09/2026", and a bare year after "in", "by", "since"...), and refuse a sentence that
mentions a date after the reference day in the past tense without any word that makes it a plan
("completed the migration in November 2026" is refused, "complete the migration by November 2026"
is not), clause by clause where a comma and a conjunction join clauses of their own tense. A document is read against its own date: an e-mail of 2026-02-20 cannot report what
happened on 2026-02-27.
"""

from __future__ import annotations

import re
from datetime import date

from sopforge.checks import CheckResult, check

__all__ = ["check_as_of", "future_told_as_past", "mentioned_dates"]

_MONTHS = {m[:3]: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), "ymd"),
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b"), "mdy"),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), "month_day_year"),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{4}})\b", re.I), "day_month_year"),
    (re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I), "month_year"),
    (re.compile(r"\b(?:Q([1-4])|([1-4])Q)\s*(?:FY\s*)?'?(\d{4})\b", re.I), "quarter"),
    (re.compile(r"\b(?:in|by|since|during|for|of|from|until|through|after|before|early|late|mid)[\s-]+(\d{4})\b",
                re.I), "year"),
)
# Words that make a sentence about a later date a plan, an expectation or a deadline.
_FUTURE = re.compile(
    r"\b(will|shall|by|due|scheduled|schedule|planned|plan|plans|planning|target|targets|targeted|deadline|"
    r"expected|expects|expect|upcoming|next|until|till|before|goal|goals|aim|aims|aiming|intend|intends|"
    r"pending|starting|starts|begins|launching|launches|goes|going|renews|renewal|expires|expiring|"
    r"projected|forecast|proposed|tentative)\b"
    # a new slot, not a past event: "start moved from 2026-03-02 to 2026-03-03", "moved to one monthly pickup on
    # 2026-03-28", "is to be moved" (an independent answerer's rescheduling notes were refused for "moved")
    r"|\b(moved|shifted|pushed|brought|rescheduled|postponed|deferred|rebooked)\s+(back\s+|forward\s+|up\s+)?(from|to)\b"
    r"|\bto\s+be\s+\w+(ed|en)\b", re.I)
_PAST = re.compile(
    r"\b(was|were|had|did|completed|finished|launched|went|rolled|started|began|signed|hired|joined|since|ago|"
    r"previously|achieved|delivered|closed|migrated|implemented|passed|received|resolved|ended|expired|"
    r"introduced|opened|moved|replaced|approved|concluded|took|happened|occurred|last)\b"
    # a subject with a verb in -ed ("we resubmitted", "she updated"), or a perfect ("has been", "have sent")
    r"|\b(we|i|they|she|he|it|you)\s+\w+ed\b|\b(has|have)\s+(been|\w+ed)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
# Clauses joined by a conjunction after a comma each have their own tense: "Priya finished the list on
# 2026-02-26, but she never sent it, and his calendar shows him on leave from 2026-03-09" tells the leave
# as planned (an independent answerer's bottleneck was refused for it when the sentence was read whole).
_CLAUSE = re.compile(r",\s+(?=(?:but|and|while|whereas|although|though|yet|so)\b)|\s+[\u2014\u2013]\s+|\s+-{1,2}\s+", re.I)


def _month(word: str) -> int:
    return _MONTHS[word.lower().rstrip(".")[:3]]


def _first_day(kind: str, groups: tuple[str | None, ...]) -> date | None:
    """The earliest day a date mention can mean (a month's first day, a quarter's, a year's)."""
    try:
        if kind == "ymd":
            return date(int(groups[0]), int(groups[1]), int(groups[2]))
        if kind == "mdy":
            return date(int(groups[2]), int(groups[0]), int(groups[1]))
        if kind == "month_day_year":
            return date(int(groups[2]), _month(groups[0]), int(groups[1]))
        if kind == "day_month_year":
            return date(int(groups[2]), _month(groups[1]), int(groups[0]))
        if kind == "month_year":
            return date(int(groups[1]), _month(groups[0]), 1)
        if kind == "quarter":
            quarter = int(groups[0] or groups[1])
            return date(int(groups[2]), 3 * quarter - 2, 1)
        return date(int(groups[0]), 1, 1)
    except (ValueError, KeyError):
        return None


def mentioned_dates(text: str) -> list[tuple[str, date]]:
    """(as written, earliest day it can mean) for every date ``text`` mentions, in order of appearance.

    A span already read by a more precise pattern (a full date) is not read again as a month or a year.
    """
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str, date]] = []
    for pattern, kind in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(s < end and start < e for s, e in taken):
                continue
            day = _first_day(kind, match.groups())
            if day is not None:
                taken.append((start, end))
                found.append((start, match.group(0), day))
    return [(written, day) for _, written, day in sorted(found)]


def future_told_as_past(text: str, reference: date) -> list[str]:
    """Sentences of ``text`` that tell something after ``reference`` as already done."""
    bad = []
    for sentence in _SENTENCE.split(text):
        for clause in _CLAUSE.split(sentence):
            later = [w for w, d in mentioned_dates(clause) if d > reference]
            if later and _PAST.search(clause) and not _FUTURE.search(clause):
                bad.append(sentence.strip())
                break
    return bad


def check_as_of(name: str, texts: dict[str, str], reference: date, what: str) -> CheckResult:
    """One check over named texts (``goal 2``, ``relationship Lena Ortiz``): no later date told as past.

    Args:
        name: The check's name.
        texts: Label -> text.
        reference: The "as of" day they are written on.
        what: What the texts are, for the message ("the world model", "the e-mail").
    """
    bad = {label: sentences for label, text in texts.items() if (sentences := future_told_as_past(text, reference))}
    quoted = "; ".join(f"{label}: {s!r}" for label, sentences in bad.items() for s in sentences[:2])
    return check(name, not bad,
                 f"{what} is written as of {reference.isoformat()}, yet tells later dates as past ({quoted}); "
                 f"write what happens after {reference.isoformat()} as planned, scheduled or expected, or move it "
                 "before that date",
                 ok=f"{what} tells nothing after {reference.isoformat()} as past", sentences=bad)
