"""The dates, identifiers and amounts of a sample's expected parameters, and whether a text carries them.

T25 compares an agent's parameters with the expected ones (L138-146). An agent can only fill a
date, a case number or an amount it has read somewhere, so every one of them must appear in the
evidence: the demo once expected a date that no true positive mentioned, only a distractor did.
The plan assigns each value to a planned document, the evidence prompt asks for it there, and the
checks below find it in the text (a date may be written 2026-03-09, March 9(, 2026), 9 March or
03/09; an amount with or without its currency sign and thousands separators).
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, Field

from sopforge.checks import CheckResult, check
from sopforge.families.probe.models.documents import ParsedDocument
from sopforge.families.probe.verify.dates import mentioned_dates
from sopforge.families.probe.verify.document_checks import identifiers

__all__ = ["ExpectedValue", "carried", "expected_values", "missing_values", "values_check"]

_FULL_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{4}|[A-Za-z]{3,9}\.? \d{1,2}(st|nd|rd|th)?,? \d{4}|"
                        r"\d{1,2}(st|nd|rd|th)? [A-Za-z]{3,9},? \d{4}")
_NUMBER = re.compile(r"(?<![\w.-])([$€£]\s?)?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w-]|\.\d)")
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                "November", "December")


class ExpectedValue(BaseModel):
    """One value an agent's parameters must reproduce, found in an expected parameter."""

    kind: Literal["date", "id", "amount"]
    written: str = Field(description="As the expected parameter writes it.")
    value: str = Field(description="Normalised: ISO day, upper-case identifier, or a plain decimal number.")
    parameter: str = Field(description="The parameter it belongs to.")

    def describe(self) -> str:
        return f"{self.written} ({self.kind}, parameter {self.parameter})"


def _texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def _amount(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", "").replace("$", "").replace("€", "").replace("£", "").strip())
    except InvalidOperation:
        return None


def expected_values(parameters: dict[str, Any]) -> list[ExpectedValue]:
    """Every full date, identifier and amount (a number of two digits or more, a decimal, or money)
    written in the expected parameters, once each, in parameter order."""
    found: dict[tuple[str, str], ExpectedValue] = {}
    for name, value in parameters.items():
        for text in _texts(value):
            spans: list[tuple[int, int]] = []
            for m in _FULL_DATE.finditer(text):
                days = mentioned_dates(m.group(0))
                if days:
                    spans.append(m.span())
                    found.setdefault(("date", days[0][1].isoformat()), ExpectedValue(
                        kind="date", written=m.group(0), value=days[0][1].isoformat(), parameter=name))
            for ident in sorted(identifiers(text)):
                found.setdefault(("id", ident), ExpectedValue(kind="id", written=ident, value=ident, parameter=name))
                spans += [(m.start(), m.end()) for m in re.finditer(re.escape(ident), text, re.I)]
            for m in _NUMBER.finditer(text):
                if any(s <= m.start() < e for s, e in spans):
                    continue
                digits = m.group(2).replace(",", "")
                if not (m.group(1) or m.group(3) or len(digits) >= 2):
                    continue
                amount = _amount(m.group(0))
                if amount is not None:
                    plain = format(amount.normalize(), "f")
                    found.setdefault(("amount", plain), ExpectedValue(
                        kind="amount", written=m.group(0).strip(), value=plain, parameter=name))
    return list(found.values())


def _date_forms(iso: str) -> list[str]:
    day = date.fromisoformat(iso)
    month = _MONTH_NAMES[day.month - 1]
    return [iso, f"{day.month}/{day.day}", f"{day.month:02d}/{day.day:02d}", f"{month} {day.day}",
            f"{month[:3]} {day.day}", f"{month[:3]}. {day.day}", f"{day.day} {month}", f"{day.day} {month[:3]}"]


def carried(value: ExpectedValue, text: str) -> bool:
    """Whether ``text`` states ``value`` (any usual way of writing it)."""
    if value.kind == "id":
        return re.search(rf"(?<![A-Z0-9]){re.escape(value.value)}(?![A-Z0-9])", text.upper()) is not None
    if value.kind == "date":
        lowered = text.lower()
        return any(re.search(rf"(?<![\w/-]){re.escape(form.lower())}(?![\d/])", lowered) for form in _date_forms(value.value))
    wanted = Decimal(value.value)
    return any((_amount(m.group(0)) or Decimal(-1)).normalize() == wanted for m in _NUMBER.finditer(text))


def missing_values(values: list[ExpectedValue], texts: list[str]) -> list[ExpectedValue]:
    """The values none of ``texts`` carries."""
    return [v for v in values if not any(carried(v, t) for t in texts)]


def values_check(doc: ParsedDocument, values: list[ExpectedValue]) -> CheckResult:
    """A true positive states the expected-parameter values its plan entry gave it."""
    missing = missing_values(values, [doc.text])
    return check("probe_evidence.values", not missing,
                 f"{doc.kind} {doc.title!r} must state, exactly as written, "
                 + ", ".join(v.describe() for v in missing) + ": an agent fills the action's parameters from them",
                 ok=f"{doc.kind} {doc.title!r} states the {len(values)} expected-parameter values planned for it"
                 if values else f"{doc.kind} {doc.title!r} carries no expected-parameter value (none planned for it)")
