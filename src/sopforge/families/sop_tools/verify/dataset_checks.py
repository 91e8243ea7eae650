"""Row checks of a dataset batch, beside its GX suite (DESIGN, chain row 'dataset')."""

from __future__ import annotations

import datetime
import math
import re
from collections import Counter
from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema, FieldSpec
from sopforge.families.sop_tools.models.dataset import (
    LIST_ITEM_TYPES, MAX_QUOTED, item_problem, number_problem, offenders, quote_value, row_label,
)
from sopforge.families.sop_tools.verify.csv_checks import values_check
from sopforge.labels import NA_TOKENS

__all__ = ["conditional_checks", "placeholder_problem", "realism_checks", "row_checks", "spearman"]


def _quoted(found: list[dict[str, Any]]) -> str:
    shown = "; ".join(f"{o['field']}={o['value']} ({o['row']}: {o['problem']})" for o in found[:MAX_QUOTED])
    return shown + (f"; … {len(found) - MAX_QUOTED} more" if len(found) > MAX_QUOTED else "")


def row_checks(rows: list[dict[str, Any]], schema: DataSchema, id_field: str | None = None) -> list[CheckResult]:
    """Value checks the GX suite cannot express.

    GX tests types with ``isinstance``, and Python's ``True`` is an ``int``; list items are
    not inspected by any core expectation. Both are checked here.

    Args:
        rows: Parsed rows (keys are existing fields).
        schema: The data schema.
        id_field: Field used to name rows in messages (see :func:`find_id_field`).

    Returns:
        ``dataset.rows.numbers``, ``dataset.rows.list_items``, ``dataset.rows.conditional`` and
        ``dataset.values_survive_csv`` (the export's CSV rule, so the model fixes values the package stage
        would refuse), passed or not.
    """
    numeric = [f for f in schema.existing if f.type in ("integer", "float")]
    bad_numbers = offenders(rows, numeric, id_field,
                             lambda f, v: number_problem(v) if v is not None else None)
    lists = [f for f in schema.existing if f.type in LIST_ITEM_TYPES]

    def list_problem(f: FieldSpec, value: Any) -> str | None:
        if not isinstance(value, list):
            return None  # the GX type check reports it
        kind = LIST_ITEM_TYPES[f.type]
        for item in value:
            why = item_problem(item, kind)
            if why:
                return f"item {quote_value(item)} is {why}"
        return None

    bad_items = offenders(rows, lists, id_field, list_problem)
    return [
        check("dataset.rows.numbers", not bad_numbers,
              f"integer and float fields must hold numbers, never True/False: {_quoted(bad_numbers)}"
              if bad_numbers else "numeric fields hold real numbers", offending=bad_numbers[:MAX_QUOTED],
              count=len(bad_numbers)),
        check("dataset.rows.list_items", not bad_items,
              f"list fields must hold items of their declared type (list[string]: non-blank text; "
              f"list[integer]: whole numbers; list[float]: numbers): {_quoted(bad_items)}"
              if bad_items else "list items have their declared types", offending=bad_items[:MAX_QUOTED],
              count=len(bad_items)),
        values_check("dataset.values_survive_csv", rows, [f.name for f in schema.existing],
                     may_be_missing={f.name for f in schema.fields if f.present_if is not None},
                     fix="rewrite those values in every row (identifiers with a non-digit part, e.g. a letter prefix)"),
        *conditional_checks(rows, schema, id_field),
    ]


# --------------------------------------------------------------------------------------- conditional fields

_PLACEHOLDER_WORDS = frozenset({"tbd", "pending", "placeholder", "not_applicable", "not applicable", "n_a", "none_found",
                                "no_value", "missing", "-", "--", "x", "xx", "xxx"})


def placeholder_problem(value: Any) -> str | None:
    """Why a present value looks invented to fill a gap: an NA word, 'TBD', an all-zero or one-character code."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    digits = [c for c in text if c.isdigit()]
    if text in NA_TOKENS or text in _PLACEHOLDER_WORDS:
        return "a placeholder word, not a value"
    if len(digits) >= 3 and set(digits) == {"0"}:
        return "an all-zero code, a placeholder"
    if len(text) >= 3 and len(set(text.replace("-", ""))) == 1:
        return "one repeated character, a placeholder"
    return None


def conditional_checks(rows: list[dict[str, Any]], schema: DataSchema, id_field: str | None = None) -> list[CheckResult]:
    """``dataset.rows.conditional``: a [present_if] field has a real value exactly where its condition holds.

    Where the condition fails the value is None (no value; an empty CSV cell), never a placeholder
    such as an all-zero identifier; where it holds, the value is real.
    """
    fields = [f for f in schema.existing if f.present_if is not None]
    found = []
    for i, row in enumerate(rows):
        for f in fields:
            value, wanted = row.get(f.name), f.present_if.holds(row)
            label = row_label(row, i, id_field)
            if wanted and value is None:
                found.append({"row": label, "field": f.name, "value": "None",
                              "problem": f"{f.present_if.text()} holds, so it needs a value"})
            elif not wanted and value is not None:
                found.append({"row": label, "field": f.name, "value": quote_value(value),
                              "problem": f"{f.present_if.text()} does not hold, so write None (no value)"})
            elif wanted and (why := placeholder_problem(value)):
                found.append({"row": label, "field": f.name, "value": quote_value(value), "problem": why})
    return [check("dataset.rows.conditional", not found,
                  f"conditional fields must hold a real value exactly where their condition holds and None elsewhere: "
                  f"{_quoted(found)}" if found else
                  (f"conditional fields ({', '.join(f.name for f in fields)}) follow their conditions" if fields
                   else "no conditional field"), offending=found[:MAX_QUOTED], count=len(found))]


# --------------------------------------------------------------------------------------- realism (issue 16 item 6)

SEQUENCE_SHARE = 0.5  # a step that repeats between more than half the consecutive ids makes them a counter
MIN_ROWS = 8  # fewer rows say nothing about spread or correlation
MIN_DISTINCT_SHARE = 0.1  # numeric fields: distinct values / rows (unless the range holds fewer); low, since real
# fields cluster (a days supply is 30, 90 or 28; an alert count is mostly 0): it catches a column that barely
# varies (every row 30), not a realistic cluster
MIN_CORRELATION = 0.2  # a declared correlation must show at least this rank correlation, with its sign
_TRAILING_NUMBER = re.compile(r"(\d+)\D*$")


def _rank(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (ties averaged); None when either side is constant."""
    rx, ry = _rank(xs), _rank(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx and vy else None


def _ordinal(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(datetime.date.fromisoformat(value).toordinal())
        except ValueError:
            return None
    return None


def realism_checks(rows: list[dict[str, Any]], schema: DataSchema, id_field: str | None = None) -> list[CheckResult]:
    """Data that looks like data: ids no counter made, numbers with a spread, the correlations the schema declares.

    Returns:
        ``dataset.realism.id_sequence``, ``dataset.realism.numeric_spread`` and
        ``dataset.realism.correlations`` (passed when there are too few rows to judge).
    """
    results = []
    numbers = [int(m.group(1)) for r in rows if id_field and isinstance(r.get(id_field), str)
               and (m := _TRAILING_NUMBER.search(r[id_field]))]
    steps = [b - a for a, b in zip(numbers, numbers[1:])]
    step, count = Counter(steps).most_common(1)[0] if steps else (0, 0)
    counter = len(numbers) >= MIN_ROWS and count > SEQUENCE_SHARE * len(steps)
    results.append(check(
        "dataset.realism.id_sequence", not counter,
        f"{id_field} values count up by {step} from row to row ({count} of {len(steps)} steps, e.g. "
        f"{', '.join(str(r[id_field]) for r in rows[:3])}): real identifiers are not consecutive in a batch of cases; "
        "draw them irregularly (e.g. RR-418203, RR-402917, RR-455830)" if counter
        else "identifiers do not follow a counter", step=step, share=round(count / len(steps), 3) if steps else 0))

    flat = []
    if len(rows) >= MIN_ROWS:
        for f in schema.existing:
            if f.type not in ("integer", "float"):
                continue
            values = [r.get(f.name) for r in rows if isinstance(r.get(f.name), (int, float))
                      and not isinstance(r.get(f.name), bool)]
            if len(values) < MIN_ROWS:
                continue
            span = int(f.maximum - f.minimum + 1) if f.type == "integer" and f.minimum is not None else len(values)
            needed = min(max(2, math.ceil(MIN_DISTINCT_SHARE * len(values))), span)
            value, top = Counter(values).most_common(1)[0]
            distinct = len(set(values))
            if distinct < needed:
                flat.append(f"{f.name}: {distinct} distinct value(s) in {len(values)} rows, {value!r} in {top}")
    results.append(check(
        "dataset.realism.numeric_spread", not flat,
        f"numeric fields without a realistic spread: {'; '.join(flat[:MAX_QUOTED])}; vary the values across rows as "
        "real cases would (keep the boundary values the SOP needs, and spread the others)" if flat
        else "numeric fields have a realistic spread", fields=flat))

    weak = []
    if len(rows) >= MIN_ROWS:
        for f in schema.existing:
            if f.correlates is None:
                continue
            pairs = [(a, b) for r in rows if (a := _ordinal(r.get(f.name))) is not None
                     and (b := _ordinal(r.get(f.correlates.field))) is not None]
            rho = spearman([a for a, _ in pairs], [b for _, b in pairs]) if len(pairs) >= MIN_ROWS else None
            sign = 1 if f.correlates.sign == "+" else -1
            if rho is None or rho * sign < MIN_CORRELATION:
                shown = "none (a constant side)" if rho is None else f"{rho:+.2f}"
                weak.append(f"{f.name} vs {f.correlates.field}: rank correlation {shown}, declared {f.correlates.sign}")
    results.append(check(
        "dataset.realism.correlations", not weak,
        f"correlations the schema declares do not show in the rows: {'; '.join(weak)}; make the values move "
        "together as declared" if weak else "declared correlations show in the rows", fields=weak))
    return results
