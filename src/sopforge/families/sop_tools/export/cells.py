"""Writing values as CSV cells that pandas reads back as the same values (§3.2).

The rule is checked, not assumed: :func:`roundtrip_problems` reads the written file with
``pandas.read_csv`` defaults (what the harness does) and compares every cell with the value
it should become. A column pandas would retype (all-digit identifiers, ``"true"`` strings,
``"None"`` labels) is refused with the column named, never silently altered.

Neither quoting nor a type declaration in ``metadata.json`` can save such a column: the harness
calls ``pd.read_csv(path)`` with no ``dtype``, and pandas converts quoted digits too, so
``"0125481932"`` reaches the agent as ``125481932`` and the tools no longer find the row. The
value itself must change, which only the model can do consistently (SOP, schema, data). So the
upstream stages run this same rule where the model can still fix it: :func:`table_problems` on
the schema's choices and examples, on each dataset batch, and on the ground truth's rows.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from collections.abc import Collection
import sys
from pathlib import Path
from typing import Any, TextIO


__all__ = ["expected_value", "roundtrip_problems", "table_problems", "to_cell", "write_csv"]


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
    numpy = sys.modules.get("numpy")  # a numpy bool exists only once numpy is loaded: do not load it to ask
    return isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_))


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


def write_csv(f: TextIO, columns: list[str], table: list[list[str]]) -> None:
    """The CSV dialect of every export: header row, minimal quoting, ``\\n`` line ends."""
    writer = csv.writer(f, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(table)


def table_problems(rows: list[dict[str, Any]], columns: list[str], *, may_be_missing: Collection[str] = (),
                   limit: int = 10) -> list[str]:
    """What the export would refuse in these rows: a value it cannot write, or a column pandas reads
    back differently. The same rule as the export (:func:`to_cell`, :func:`roundtrip_problems`), run
    in memory so a stage can quote the problem to the model while it can still fix it.

    ``may_be_missing`` names the conditional fields (``[present_if: ...]``): like the exporter, a
    ``None`` there is written as an empty cell, which pandas reads back as the missing value it is.

    Returns:
        One message per bad value or column, naming the column and the value (empty when fine).
    """
    table, problems = [], []
    for i, row in enumerate(rows):
        line = []
        for col in columns:
            if row.get(col) is None and col in may_be_missing:
                line.append("")
                continue
            try:
                line.append(to_cell(row.get(col)))
            except ValueError as exc:
                problems.append(f"column {col!r}: row {i}: {exc}")
                line.append("")
        table.append(line)
    if problems or not rows:
        return problems[:limit]
    buffer = io.StringIO()
    write_csv(buffer, columns, table)
    buffer.seek(0)
    return roundtrip_problems(buffer, columns, rows, limit=limit)


def roundtrip_problems(path: Path | TextIO, columns: list[str], rows: list[dict[str, Any]], *,
                       limit: int = 10) -> list[str]:
    """Compare ``pandas.read_csv(path)`` with the intended values; one message per bad column."""
    import pandas as pd  # here, not at the top: the family is loaded by commands that only read the store

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
            return ("a column of numeric-looking strings is read as numbers (leading zeros lost): give such values a "
                    "non-digit prefix (e.g. 'A-0125') everywhere they appear")
        if str(dtype) == "bool":
            return "a column of true/false strings is read as booleans: write Python bools or other words"
        return "NA tokens ('', 'None', 'NA', 'null', ...) are read as missing: use a real word such as not_applicable"
    return "mixed types in one column are coerced to a common type"
