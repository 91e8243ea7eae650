"""Writing values as CSV cells that pandas reads back as the same values (§3.2).

The rule is checked, not assumed: :func:`roundtrip_problems` reads the written file with
``pandas.read_csv`` defaults (what the harness does) and compares every cell with the value
it should become. A column pandas would retype (all-digit identifiers, ``"true"`` strings,
``"None"`` labels) is refused with the column named, never silently altered.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["expected_value", "roundtrip_problems", "to_cell"]


def to_cell(value: Any) -> str:
    """The CSV text of one value.

    ``bool`` -> ``True``/``False``; ``int`` -> digits; ``float`` -> shortest round-trip repr
    (``inf`` allowed, NaN refused); dates -> ISO 8601; lists/dicts -> compact JSON (kept as
    a string by pandas); strings as they are.

    Raises:
        ValueError: ``None`` or NaN (they would be written as an NA token), or another type.
    """
    if value is None:
        raise ValueError("None cannot be written: pandas reads an empty or 'None' cell as missing")
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise ValueError("NaN cannot be written: pandas reads it as missing")
        return repr(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    if hasattr(value, "item") and callable(value.item):  # numpy / pandas scalars
        return to_cell(value.item())
    raise ValueError(f"cannot write a {type(value).__name__} to the CSV")


def expected_value(value: Any) -> Any:
    """What pandas should hand back for a written ``value`` (same Python value, or its text; None stays None)."""
    if value is None:
        return None
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    return to_cell(value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _same(read: Any, want: Any) -> bool:
    """``read`` (from pandas) is ``want`` with its type kept: bool, number or string (None: a missing cell)."""
    if want is None:
        return read is None or (isinstance(read, float) and math.isnan(read))
    if isinstance(want, bool):
        return _is_bool(read) and bool(read) == want
    if isinstance(want, (int, float)):
        if isinstance(read, str) or _is_bool(read):
            return False
        try:
            return float(read) == float(want)
        except (TypeError, ValueError):
            return False
    return isinstance(read, str) and read == want


def roundtrip_problems(path: Path, columns: list[str], rows: list[dict[str, Any]], *, limit: int = 10) -> list[str]:
    """Compare ``pandas.read_csv(path)`` with the intended values; one message per bad column."""
    frame = pd.read_csv(path)
    problems = []
    if list(frame.columns) != columns:
        return [f"pandas reads the header as {list(frame.columns)}, expected {columns}"]
    if len(frame) != len(rows):
        return [f"pandas reads {len(frame)} rows, expected {len(rows)}"]
    for col in columns:
        series = frame[col].tolist()
        for i, (read, row) in enumerate(zip(series, rows)):
            want = expected_value(row[col])
            if not _same(read, want):
                problems.append(f"column {col!r}: row {i} value {want!r} is read back by pandas as {read!r} "
                                f"(dtype {frame[col].dtype}); " + _hint(want, frame[col].dtype))
                break
        if len(problems) >= limit:
            break
    return problems


def _hint(want: Any, dtype: Any) -> str:
    if isinstance(want, str):
        if str(dtype) in ("int64", "float64"):
            return "a column of numeric-looking strings is read as numbers: give identifiers a non-digit prefix"
        if str(dtype) == "bool":
            return "a column of true/false strings is read as booleans: write Python bools or other words"
        return "NA tokens ('', 'None', 'NA', 'null', ...) are read as missing: use a real word such as not_applicable"
    return "mixed types in one column are coerced to a common type"
