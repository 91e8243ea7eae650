"""Does the data look like data? Realism checks of the dataset, and how sure each one can be.

Two kinds of check live here, and they are treated differently (issue 19):

* **Contracts** the schema or the SOP states, which the data either keeps or breaks:
  ``dataset.realism.correlations`` (a ``[correlates]`` annotation) and ``dataset.realism.branch_reach``
  (a field the SOP compares against a number, yet every row sits on one side of it, so the branch
  the SOP takes on the other side can never be reached). These are errors: the model is re-asked.
* **Heuristics** that can be wrong on real data: ``dataset.realism.numeric_spread`` (a number that
  barely varies) and ``dataset.realism.id_sequence`` (identifiers a counter made). Real data is
  narrow in many honest ways (a duty threshold fixed per destination country, a count of rare
  events that is mostly zero, a configuration value), so these are warnings shown to the reviewer,
  and the spread check first looks for the reasons a narrow column is realistic: the schema says the
  field is a parameter or a count (``[kind: ...]``), a categorical field determines it, or it is a
  count that is mostly zero.

The checks run over every row kept so far, inside each batch's ask, so a problem that only shows
once batches are merged is re-asked at the batch that causes it, never found after the last ask.
"""

from __future__ import annotations

import datetime
import math
import re
from collections import Counter, defaultdict
from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema, FieldSpec
from sopforge.families.sop_tools.models.dataset import MAX_QUOTED
from sopforge.families.sop_tools.models.sop import SOPDocument

__all__ = ["MIN_ROWS", "narrow_reason", "realism_checks", "spearman"]

SEQUENCE_SHARE = 0.5  # a step that repeats between more than half the consecutive ids makes them a counter
MIN_ROWS = 8  # fewer rows say nothing about spread or correlation
MIN_DISTINCT_SHARE = 0.1  # measurements: distinct values / rows (unless the range holds fewer)
# ... and one value on more than this share of rows: a days supply of 30, 90, 28 or 60 (4 values in 50 rows,
# 30 on 62 %) is how real fills cluster; every row 30 is not (an independent answerer's pharmacy, issue 19).
MAX_TOP_SHARE = 0.8
MIN_CORRELATION = 0.2  # a declared correlation must show at least this rank correlation, with its sign
MAX_CATEGORY_SHARE = 0.5  # a field with more distinct values than this share of rows is no category
_TRAILING_NUMBER = re.compile(r"(\d+)\D*$")
_COMPARE = {">": lambda v, t: v > t, ">=": lambda v, t: v >= t, "<": lambda v, t: v < t, "<=": lambda v, t: v <= t}


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


def _numbers(rows: list[dict[str, Any]], name: str) -> list[tuple[int, float]]:
    return [(i, r[name]) for i, r in enumerate(rows)
            if isinstance(r.get(name), (int, float)) and not isinstance(r.get(name), bool)]


def _categories(schema: DataSchema, rows: list[dict[str, Any]]) -> list[FieldSpec]:
    """Existing fields that sort cases into a few groups: enums, booleans, and short-listed strings."""
    out = []
    for f in schema.existing:
        if f.type in ("enum", "boolean") or (f.type == "string" and f.choices):
            out.append(f)
        elif f.type == "string":
            values = [r.get(f.name) for r in rows if isinstance(r.get(f.name), str)]
            if values and len(set(values)) <= MAX_CATEGORY_SHARE * len(values):
                out.append(f)
    return out


def _determined_by(values: list[tuple[int, float]], rows: list[dict[str, Any]],
                   categories: list[FieldSpec], name: str) -> str | None:
    """A categorical field that fixes this number (one value per group, and not one value for all)."""
    if len({v for _, v in values}) < 2:
        return None  # a constant is fixed by every category; only [kind: parameter] explains it
    for cat in categories:
        if cat.name == name:
            continue
        groups: dict[Any, set[float]] = defaultdict(set)
        for i, v in values:
            key = rows[i].get(cat.name)
            if key is None:
                break
            groups[str(key)].add(v)
        else:
            if len(groups) >= 2 and all(len(g) == 1 for g in groups.values()):
                return cat.name
    return None


def narrow_reason(f: FieldSpec, values: list[tuple[int, float]], rows: list[dict[str, Any]],
                  categories: list[FieldSpec]) -> str | None:
    """Why a numeric column with few distinct values is still realistic, or None.

    Args:
        f: The numeric field.
        values: (row index, value) of the rows that hold a number in it.
        rows: Every row (to read categorical fields).
        categories: The schema's categorical existing fields.

    Returns:
        A short reason (shown on the passing check) or None when nothing explains the narrowness.
    """
    if f.kind == "parameter":
        return "a parameter set by policy"
    if f.kind == "count":
        return "a count of events"
    counts = Counter(v for _, v in values)
    if counts.most_common(1)[0][0] == 0:
        return "mostly zero, as counts of rare events are"
    determiner = _determined_by(values, rows, categories, f.name)
    if determiner:
        return f"fixed per {determiner}"
    return None


def _threshold_sides(f: FieldSpec, values: list[float], sop: SOPDocument | None) -> list[str]:
    """SOP thresholds on ``f`` that every row falls on the same side of.

    A ``[kind: parameter]`` field holds a threshold itself (a fast-track ceiling of 7,500 per policy):
    the SOP's number is its value, not a line the cases must fall on both sides of (the insurance
    trial's dataset failed three asks on exactly that).
    """
    if sop is None or f.kind == "parameter":
        return []
    stuck = []
    for t in sop.thresholds:
        statement = t.statement()
        if statement is None or statement[0] != f.name or statement[1] not in _COMPARE:
            continue
        _, comparator, number = statement
        if f.minimum is not None and f.maximum is not None and not f.minimum <= number <= f.maximum:
            continue  # a number outside the field's own range belongs to another quantity in that clause
        holds = {_COMPARE[comparator](v, number) for v in values}
        if len(holds) == 1:
            side = "meets" if holds.pop() else "misses"
            stuck.append(f"step {t.step}: `{f.name}` {comparator} {number:g}, which every row {side}")
    return stuck


def realism_checks(rows: list[dict[str, Any]], schema: DataSchema, id_field: str | None = None,
                   sop: SOPDocument | None = None) -> list[CheckResult]:
    """Data that looks like data, and reaches every branch the SOP bases on a number.

    Args:
        rows: Every row kept so far (the checks are about the whole dataset, not one batch).
        schema: The data schema (``[kind]`` and ``[correlates]`` annotations).
        id_field: The identifier field, or None.
        sop: The SOP, whose numeric thresholds make a flat field an error rather than a warning.

    Returns:
        ``dataset.realism.id_sequence`` (warning), ``dataset.realism.numeric_spread`` (warning),
        ``dataset.realism.branch_reach`` and ``dataset.realism.correlations`` (errors); each passes when
        there are too few rows to judge.
    """
    return [_id_sequence(rows, id_field), *_spread(rows, schema, sop), _correlations(rows, schema)]


def _id_sequence(rows: list[dict[str, Any]], id_field: str | None) -> CheckResult:
    numbers = [int(m.group(1)) for r in rows if id_field and isinstance(r.get(id_field), str)
               and (m := _TRAILING_NUMBER.search(r[id_field]))]
    steps = [b - a for a, b in zip(numbers, numbers[1:])]
    step, count = Counter(steps).most_common(1)[0] if steps else (0, 0)
    counter = len(numbers) >= MIN_ROWS and count > SEQUENCE_SHARE * len(steps)
    return check(
        "dataset.realism.id_sequence", not counter,
        f"{id_field} values count up by {step} from row to row ({count} of {len(steps)} steps, e.g. "
        f"{', '.join(str(r.get(id_field)) for r in rows[:3])}): real identifiers of a batch of cases are rarely "
        "consecutive; draw them irregularly (e.g. RR-418203, RR-402917, RR-455830)",
        ok="identifiers do not follow a counter", severity="warning", step=step,
        share=round(count / len(steps), 3) if steps else 0)


def _spread(rows: list[dict[str, Any]], schema: DataSchema, sop: SOPDocument | None) -> list[CheckResult]:
    flat, explained, unreachable = [], [], []
    if len(rows) >= MIN_ROWS:
        categories = _categories(schema, rows)
        for f in schema.existing:
            if f.type not in ("integer", "float"):
                continue
            values = _numbers(rows, f.name)
            if len(values) < MIN_ROWS:
                continue
            plain = [v for _, v in values]
            unreachable += _threshold_sides(f, plain, sop)
            span = int(f.maximum - f.minimum + 1) if f.type == "integer" and f.minimum is not None else len(plain)
            needed = min(max(2, math.ceil(MIN_DISTINCT_SHARE * len(plain))), span)
            distinct = len(set(plain))
            value, top = Counter(plain).most_common(1)[0]
            if distinct >= needed or top <= MAX_TOP_SHARE * len(plain):
                continue
            reason = narrow_reason(f, values, rows, categories)
            line = f"{f.name}: {distinct} distinct value(s) in {len(plain)} rows, {value!r} in {top}"
            if reason:
                explained.append(f"{line} ({reason})")
            else:
                flat.append(line)
    spread = check(
        "dataset.realism.numeric_spread", not flat,
        f"measurements that barely vary: {'; '.join(flat[:MAX_QUOTED])}. If these are measurements, real cases "
        "would spread them; if the value is set by policy or per category, or counts rare events, this is "
        "realistic (say so with [kind: parameter] or [kind: count] in the schema, or waive the check)",
        ok="numeric fields have a realistic spread" + (f"; narrow but realistic: {'; '.join(explained)}"
                                                       if explained else ""),
        severity="warning", fields=flat, explained=explained)
    reach = check(
        "dataset.realism.branch_reach", not unreachable,
        f"thresholds of the SOP that no row crosses: {'; '.join(unreachable[:MAX_QUOTED])}; the branch on the "
        "other side can never be taken: add cases on both sides of each threshold (keep the others as they are)",
        ok="every numeric threshold of the SOP has rows on both sides", fields=unreachable)
    return [spread, reach]


def _correlations(rows: list[dict[str, Any]], schema: DataSchema) -> CheckResult:
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
    return check(
        "dataset.realism.correlations", not weak,
        f"correlations the schema declares do not show over all rows so far: {'; '.join(weak)}; make the values "
        "move together as declared", ok="declared correlations show in the rows", fields=weak)
