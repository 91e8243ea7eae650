"""How CSV cells, tool results and schema types relate (shared by the audit and the exporter).

The CSV is text. pandas reads it with its defaults (``sopbench_format.md`` §3.2), tools read it
with ``csv.DictReader`` and convert, the agent passes typed JSON. These helpers decide when two
of those views of one value are the same value.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

from sopforge.pyast import literal_python
from sopforge.labels import NA_TOKENS, normalize_label

__all__ = [
    "NA_TOKENS", "PANDAS_NA_TOKENS", "cell_matches", "coerce_cell", "is_null_like", "is_pandas_na",
    "looks_structured", "normalize_label", "substring_pairs",
]

# pandas.read_csv's default na_values, matched exactly (case-sensitive), plus the empty cell.
PANDAS_NA_TOKENS: frozenset[str] = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})
_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_TRUE_FALSE = {"true": True, "false": False}


def is_pandas_na(cell: str) -> bool:
    """pandas reads this cell as NaN."""
    return cell in PANDAS_NA_TOKENS


def is_null_like(cell: str) -> bool:
    """The cell is missing for pandas or null-like for SOP-Bench's matcher (``none``, ``unknown``, ...)."""
    return cell in PANDAS_NA_TOKENS or cell.strip().lower() in NA_TOKENS


def looks_structured(cell: str) -> bool:
    """The cell holds a JSON/Python list or object rather than a scalar label."""
    text = cell.strip()
    if (text[:1], text[-1:]) not in (("[", "]"), ("{", "}")):
        return False
    return _parse_literal(text) is not _MISSING


_MISSING = object()


def _parse_literal(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return literal_python(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _MISSING


def _as_number(text: str) -> float | None:
    text = text.strip()
    if not _FLOAT_RE.match(text):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _numbers_equal(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def cell_matches(value: Any, cell: str, *, casefold: bool = False) -> bool:
    """Whether a returned ``value`` equals the CSV ``cell`` (text) it should reproduce.

    Booleans match ``true``/``false`` in any case; numbers match numerically (``0.3`` equals
    ``0.30``); strings match after trimming (and lower-casing when ``casefold``), or
    numerically when both sides are numbers; ``None`` matches an NA cell; lists and dicts
    match a cell holding the same JSON or Python literal.
    """
    if value is None:
        return is_pandas_na(cell.strip()) or cell.strip() == ""
    if isinstance(value, bool):
        return cell.strip().lower() == str(value).lower()
    if isinstance(value, (int, float)):
        number = _as_number(cell)
        return number is not None and _numbers_equal(float(value), number)
    if isinstance(value, str):
        a, b = value.strip(), cell.strip()
        if casefold:
            a, b = a.lower(), b.lower()
        if a == b:
            return True
        x, y = _as_number(a), _as_number(b)
        return x is not None and y is not None and _numbers_equal(x, y)
    if isinstance(value, (list, dict, tuple)):
        parsed = _parse_literal(cell.strip())
        if parsed is _MISSING:
            return False
        return json.dumps(parsed, sort_keys=True, default=str) == json.dumps(value, sort_keys=True, default=str)
    return str(value).strip() == cell.strip()


def _coerce_one(cell: str, kind: str) -> Any:
    """Convert ``cell`` to JSON type ``kind``; return ``_MISSING`` when it does not convert."""
    text = cell.strip()
    if kind == "string":
        return cell
    if kind == "integer":
        if _INT_RE.match(text):
            return int(text)
        number = _as_number(text)
        return int(number) if number is not None and number.is_integer() else _MISSING
    if kind == "number":
        if _INT_RE.match(text):
            return int(text)
        number = _as_number(text)
        return number if number is not None and math.isfinite(number) else _MISSING
    if kind == "boolean":
        return _TRUE_FALSE.get(text.lower(), _MISSING)
    if kind == "null":
        return None if is_null_like(cell) else _MISSING
    if kind in ("array", "object"):
        parsed = _parse_literal(text)
        want = list if kind == "array" else dict
        if isinstance(parsed, tuple):
            parsed = list(parsed)
        return parsed if isinstance(parsed, want) else _MISSING
    return _MISSING


def coerce_cell(cell: str, prop_schema: Any) -> Any:
    """The typed value an agent would pass for a CSV ``cell`` under a property's JSON Schema.

    Uses the property's ``type`` (or the first of a type list that converts); a property
    without a type gets the text. A cell that does not convert is returned as text, so the
    schema validation that follows reports it.
    """
    kinds: list[str] = []
    if isinstance(prop_schema, dict):
        declared = prop_schema.get("type")
        if isinstance(declared, str):
            kinds = [declared]
        elif isinstance(declared, list):
            kinds = [k for k in declared if isinstance(k, str)]
            if "null" in kinds and is_null_like(cell):
                return None
        elif "enum" in prop_schema and isinstance(prop_schema["enum"], list):
            for option in prop_schema["enum"]:
                if isinstance(option, bool) or option is None:
                    continue
                if cell_matches(option, cell) and not isinstance(option, str):
                    return option
    for kind in kinds:
        value = _coerce_one(cell, kind)
        if value is not _MISSING:
            return value
    return cell


def substring_pairs(labels: list[str]) -> list[tuple[str, str]]:
    """Pairs (inner, outer) of distinct labels where one contains the other after normalisation."""
    distinct = list(dict.fromkeys(labels))
    pairs = []
    for a, b in itertools.combinations(distinct, 2):
        na, nb = normalize_label(a), normalize_label(b)
        if na != nb and (na in nb or nb in na):
            pairs.append((a, b) if len(na) <= len(nb) else (b, a))
    return pairs
