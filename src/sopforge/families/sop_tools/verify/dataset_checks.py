"""Row checks of a dataset batch, beside its GX suite (DESIGN, chain row 'dataset')."""

from __future__ import annotations

from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema, FieldSpec
from sopforge.families.sop_tools.models.dataset import (
    LIST_ITEM_TYPES, MAX_QUOTED, item_problem, number_problem, offenders, quote_value, row_label,
)
from sopforge.families.sop_tools.verify.csv_checks import values_check
from sopforge.labels import NA_TOKENS

__all__ = ["conditional_checks", "placeholder_problem", "row_checks"]


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
