"""Does the data let each read tool be a function of its inputs? Checked before any tool code is asked for.

A read API that takes, say, ``settlement_date`` and returns ``sdr_eur_rate`` answers every case with that date
the same rate: it sees its arguments, not the case. When the data gives two cases with one date two rates, no
tool can return both, and ``tools.runtime.matches_data`` fails on every answer the model writes (an independent
answerer's baggage claims did exactly that, issue 19: three paid ``tools.py`` asks, each correct, each failed,
then a stop that pointed at the tools). The cause is in the data, so this check runs when the tools stage starts,
before it asks anything, and sends the user to ``rerun --from dataset`` with the rows to fix.

Only APIs whose inputs are all existing fields of the record are judged: an input computed along the chain
(a to-be-obtained field) or a decision is not in the data, so the data cannot contradict it. An input that
identifies the record (the identifier itself) makes every group one row, so it never fails.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema

__all__ = ["CHECK", "one_value_per_input"]

CHECK = "tools.data.one_value_per_input"
MAX_SHOWN = 3  # conflicts quoted in the message (all are in the details)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def one_value_per_input(rows: list[dict[str, Any]], schema: DataSchema, graph: APIGraph,
                        id_field: str | None) -> CheckResult:
    """``tools.data.one_value_per_input``: rows with the same inputs of a read API hold the same values of its
    record outputs.

    Args:
        rows: The dataset's rows.
        schema: The data schema (which fields are existing, i.e. in the rows).
        graph: The API graph (each API's inputs and outputs).
        id_field: The record identifier, named in the message so the user can find the rows.

    Returns:
        An error naming, per conflict, the API, its input values, the output field and two rows that disagree;
        ``details.conflicts`` lists them all, ``details.rerun_from`` is ``dataset`` (where they can be fixed)
        and ``details.feedback`` what to tell the dataset's model there.
    """
    existing = {f.name for f in schema.existing}
    conflicts: list[dict[str, Any]] = []
    for api in graph.read_apis:
        inputs = api.input_names
        outputs = [n for n in api.output_names if n in existing and n not in inputs]
        if not inputs or not outputs or not set(inputs) <= existing:
            continue
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            values = [row.get(n) for n in inputs]
            if None not in values:
                groups[_key(values)].append(row)
        for members in groups.values():
            for field in outputs:
                held: dict[str, dict[str, Any]] = {}
                for row in members:
                    if row.get(field) is not None:
                        held.setdefault(_key(row[field]), row)
                if len(held) > 1:
                    first, second = list(held.values())[:2]
                    conflicts.append({
                        "api": api.api_name, "inputs": {n: first.get(n) for n in inputs}, "field": field,
                        "values": [first[field], second[field]],
                        "rows": [first.get(id_field), second.get(id_field)] if id_field else []})
    shown = "; ".join(_describe(c, id_field) for c in conflicts[:MAX_SHOWN])
    more = f" (and {len(conflicts) - MAX_SHOWN} more)" if len(conflicts) > MAX_SHOWN else ""
    feedback = f"rows with the same {_inputs_text(conflicts)} must hold the same {_fields_text(conflicts)}"
    return check(
        CHECK, not conflicts,
        f"the data gives the same inputs of a read tool different values, and a tool cannot return both: "
        f"{shown}{more}; the data must change, not the tools ({feedback})",
        ok=f"every read tool whose inputs are record fields gets one value per input ({len(rows)} rows)",
        conflicts=conflicts, **({"rerun_from": "dataset", "feedback": feedback} if conflicts else {}))


def _describe(conflict: dict[str, Any], id_field: str | None) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in conflict["inputs"].items())
    a, b = conflict["values"]
    where = f" ({id_field} {conflict['rows'][0]!r} and {conflict['rows'][1]!r})" if conflict["rows"] else ""
    return f"{conflict['api']}({args}): {conflict['field']} {a!r} and {b!r}{where}"


def _inputs_text(conflicts: list[dict[str, Any]]) -> str:
    return " and ".join(dict.fromkeys(n for c in conflicts for n in c["inputs"])) or "inputs"


def _fields_text(conflicts: list[dict[str, Any]]) -> str:
    return " and ".join(dict.fromkeys(c["field"] for c in conflicts)) or "values"
