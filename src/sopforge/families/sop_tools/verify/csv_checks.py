"""The export's CSV rule, checked where the model can still fix what breaks it.

SOP-Bench's harness loads ``test_set_with_outputs.csv`` with ``pandas.read_csv`` defaults, so a
string column of digits (``0125481932``), of ``true``/``false`` words or of NA tokens reaches the
agent as a number, a boolean or ``nan``, and the tools no longer find the row. The package stage
refuses such a folder (``export.cells``), but only after every LLM stage was paid for. The same
rule (:func:`~sopforge.families.sop_tools.export.cells.table_problems`, not a copy) runs earlier:

- ``schema.values_survive_csv``: the choices and the example of every text field, before the SOP
  and the data are written in that shape;
- ``dataset.values_survive_csv``: every dataset batch, re-asked with the offending values quoted;
- ``ground_truth.values_survive_csv``: every column of the computed rows (tool results included),
  before the distractors and manipulations stages spend their calls.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.export.cells import table_problems
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.labels import NA_TOKENS

__all__ = ["WHY", "schema_values_check", "values_check"]

WHY = ("SOP-Bench's harness reads the CSV with pandas defaults, so such a value reaches the agent changed "
       "(e.g. '0125481932' becomes the number 125481932) and the tools no longer find the row")


def values_check(name: str, rows: list[dict[str, Any]], columns: list[str], *, fix: str,
                 may_be_missing: Collection[str] = ()) -> CheckResult:
    """``name`` passes when every value of ``rows`` would be written and read back unchanged.

    Args:
        name: The check id.
        rows: Typed rows, as the exporter will receive them.
        columns: The columns to check, in CSV order.
        fix: What the model should change, appended to the failure message.
        may_be_missing: Conditional fields, whose ``None`` is written as the empty cell it means.
    """
    problems = table_problems(rows, columns, may_be_missing=may_be_missing)
    return check(name, not problems,
                 f"values the exported CSV would not keep: {'; '.join(problems[:3])}. {WHY}; {fix}",
                 ok=f"all {len(rows)} rows read back unchanged from the exported CSV", problems=problems)


def _unquoted(example: str) -> str:
    text = example.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text


def schema_values_check(schema: DataSchema) -> CheckResult:
    """``schema.values_survive_csv``: the choices (else the example) of every text field, as a CSV column."""
    problems = []
    for f in schema.fields:
        if f.type not in ("string", "enum"):
            continue
        values = list(f.choices) if f.choices else [_unquoted(f.example)]
        values = [v for v in values if v.strip().lower() not in NA_TOKENS]  # schema.labels_not_na names those
        if values:
            problems += table_problems([{f.name: v} for v in values], [f.name])
    return check("schema.values_survive_csv", not problems,
                 f"text fields whose values the exported CSV would not keep: {'; '.join(problems[:3])}. {WHY}; "
                 "give every value of such a field a non-digit part (e.g. a letter prefix such as 'AC-0125481932'), "
                 "or declare a real number as integer or float",
                 ok="the examples and choices of every text field read back unchanged from a CSV", problems=problems)
