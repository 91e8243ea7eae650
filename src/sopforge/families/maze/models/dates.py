"""Dates in SOP-Maze instances: calendar days, business days and how dates are written.

The paper's calculation errors are mostly about time (reply latency from timestamps, date ranges,
L159-161), and real SOPs count in **business days** as often as in calendar days. A fact derived
with ``interval_days`` counts calendar days; one derived with ``business_days`` counts weekdays,
minus the holidays the scenario lists (``MM-DD``, every year). Both count the days *after* the
first date up to and including the second, so "March 1 to March 4" is 3 calendar days. The SOP
text, the reader prompt and the sampler all state and use exactly these rules.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Iterable

__all__ = ["HOLIDAY", "add_business_days", "business_days_between", "calendar_days_between", "holiday_set",
           "long_date", "subtract_business_days"]

HOLIDAY = re.compile(r"^(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")  # MM-DD, recurring every year


def long_date(iso: str) -> str:
    """``2025-03-04`` -> ``March 4, 2025``: how plans state dates and calculation operands."""
    day = date.fromisoformat(iso)
    return f"{day:%B} {day.day}, {day.year}"


def holiday_set(holidays: Iterable[str]) -> frozenset[str]:
    """The ``MM-DD`` holidays as a set (validated by the scenario model)."""
    return frozenset(holidays)


def _is_business_day(day: date, holidays: frozenset[str]) -> bool:
    return day.weekday() < 5 and f"{day:%m-%d}" not in holidays


def calendar_days_between(start: date, end: date) -> int:
    """Calendar days after ``start`` up to and including ``end`` (negative when ``end`` is earlier)."""
    return (end - start).days


def business_days_between(start: date, end: date, holidays: frozenset[str] = frozenset()) -> int:
    """Weekdays after ``start`` up to and including ``end`` that are not listed holidays (0 when ``end <= start``)."""
    count, day = 0, start
    while day < end:
        day += timedelta(days=1)
        count += _is_business_day(day, holidays)
    return count


def add_business_days(start: date, days: int, holidays: frozenset[str] = frozenset()) -> date:
    """The date ``days`` business days after ``start`` (``start`` itself when ``days`` is 0)."""
    day = start
    while days > 0:
        day += timedelta(days=1)
        days -= _is_business_day(day, holidays)
    return day


def subtract_business_days(end: date, days: int, holidays: frozenset[str] = frozenset()) -> date:
    """The latest ``start`` with ``business_days_between(start, end) == days``."""
    day = end
    while days > 0:
        days -= _is_business_day(day, holidays)
        day -= timedelta(days=1)
    return day
