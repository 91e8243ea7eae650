"""The branch a write API runs on: ``when`` conditions as precise as the SOP's own rules.

A write's ``when`` was once ``{field: [values]}`` over decision values only, which is coarser than
SOPs are: "post the adjustment only when the variance is not 0" or "notify compliance only under
sub-rule 5.8.3" could not be said, so the checks then demanded the write on every case of that
decision and the ground truth contradicted the SOP text (issue 19). A condition is now:

* a mapping ``{field: [entries]}``: every field must match (AND); a field matches when any of its
  entries does (OR). An entry is a value label (``refer_to_prescriber``, ``true``), a bare number
  (``0``), or a comparison with a number: ``"> 0"``, ``">= 2500"``, ``"< 30"``, ``"<= 7"``,
  ``"!= 0"``, ``"== 3"``; ``"!= deny"`` excludes a label;
* or a list of such mappings, any of which may hold (a rule reached along several sub-rules).

``{}`` means the write happens on every branch. Pure data and evaluation: the checks that tie a
condition to the schema live in ``verify/api_graph_checks.py``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Conditions", "alternatives", "entry_matches", "parse_entry", "render", "satisfied"]

Conditions = dict[str, list[str]] | list[dict[str, list[str]]]
_ENTRY = re.compile(r"^(?P<op>==|!=|>=|<=|>|<)\s*(?P<operand>.+?)\s*$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def _label(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def normalize(value: Any) -> Any:
    """Booleans and numbers as the schema labels them, one list per field, for either shape."""
    if isinstance(value, dict):
        return {k: [_label(v) for v in (vs if isinstance(vs, list) else [vs])] for k, vs in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def alternatives(when: Conditions) -> list[dict[str, list[str]]]:
    """The alternatives of a condition (one mapping for the plain form); [] for 'every branch'."""
    if isinstance(when, dict):
        return [when] if when else []
    return [w for w in when if w]


def parse_entry(entry: str) -> tuple[str, str | float]:
    """(operator, operand): ``"> 0"`` → ('>', 0.0); ``"approve"`` → ('==', 'approve')."""
    text = entry.strip()
    m = _ENTRY.match(text)
    op, operand = (m.group("op"), m.group("operand")) if m else ("==", text)
    return op, float(operand) if _NUMBER.match(operand) else operand


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return float(value) if isinstance(value, str) and _NUMBER.match(value.strip()) else None


def entry_matches(entry: str, value: Any) -> bool:
    """Whether one entry holds for a task's value of its field."""
    op, operand = parse_entry(entry)
    if isinstance(operand, float):
        number = _number(value)
        if number is None:
            return op == "!="
        return {"==": number == operand, "!=": number != operand, ">": number > operand, ">=": number >= operand,
                "<": number < operand, "<=": number <= operand}[op]
    same = _label(value).lower() == operand.lower()
    return same if op == "==" else (not same if op == "!=" else False)


def satisfied(when: Conditions, values: dict[str, Any]) -> bool:
    """Whether the SOP performs the write on a task with these field values."""
    options = alternatives(when)
    if not options:
        return True
    return any(all(any(entry_matches(e, values.get(name)) for e in entries) for name, entries in option.items())
               for option in options)


def render(when: Conditions) -> str:
    """Plain text: ``variance_amount != 0 and review_outcome is "post"``, alternatives joined by 'or'."""
    def one(name: str, entries: list[str]) -> str:
        equal, other = [], []
        for e in entries:
            op, operand = parse_entry(e)
            shown = f"{operand:g}" if isinstance(operand, float) else f'"{operand}"'
            (equal if op == "==" else other).append(shown if op == "==" else f"{name} {op} {shown}")
        parts = ([f"{name} is {' or '.join(equal)}"] if equal else []) + other
        return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"

    options = alternatives(when)
    if not options:
        return "every branch"
    texts = [" and ".join(one(name, entries) for name, entries in option.items()) for option in options]
    return texts[0] if len(texts) == 1 else " or ".join(f"({t})" for t in texts)
