"""The reference bundle's files (docs/bundle.md): writing and loading them, and the input columns.

A bundle holds ``tools.py``, ``toolspecs.json``, ``test_set_with_outputs.csv`` (existing fields)
and ``reference_procedure.py``; :func:`sopforge.families.sop_tools.verify.ground_truth.compute_ground_truth`
first checks it here (``ground_truth.bundle``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.ground_truth import csv_cell

__all__ = [
    "CSV_FILE", "PROCEDURE_FILE", "PROCEDURE_FUNCTION", "TOOLS_FILE", "TOOLSPECS_FILE", "input_columns",
    "load_toolspecs", "write_bundle", "write_rows_csv",
]

TOOLS_FILE = "tools.py"
TOOLSPECS_FILE = "toolspecs.json"
PROCEDURE_FILE = "reference_procedure.py"
CSV_FILE = "test_set_with_outputs.csv"
PROCEDURE_FUNCTION = "run_procedure"


# --------------------------------------------------------------------------------------- bundle files

def input_columns(schema: DataSchema, graph: APIGraph) -> list[str]:
    """Existing fields that some API takes with ``source: user_input``, in schema order (docs/bundle.md).

    Args:
        schema: The data schema.
        graph: The API graph.

    Returns:
        The input column names shown to the agent.
    """
    wanted = {p.name for a in graph.apis for p in a.input_parameters if p.source == "user_input"}
    return [f.name for f in schema.existing if f.name in wanted]


def load_toolspecs(path: Path) -> dict[str, dict[str, Any]]:
    """Read ``toolspecs.json``: tool name -> its ``inputSchema.json`` (wrapped or flat elements).

    Raises:
        ValueError: Not JSON, not an array, or an element without a name.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError("toolspecs.json must be a JSON array")
    specs: dict[str, dict[str, Any]] = {}
    for i, element in enumerate(data):
        spec = element.get("toolSpec", element) if isinstance(element, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ValueError(f"toolspecs.json element {i} has no toolSpec name")
        schema = spec.get("inputSchema", {}).get("json", {}) if isinstance(spec.get("inputSchema"), dict) else {}
        specs[spec["name"]] = schema if isinstance(schema, dict) else {}
    return specs


def write_rows_csv(path: Path, rows: list[dict[str, Any]], schema: DataSchema) -> Path:
    """Write the existing fields of ``rows`` as ``test_set_with_outputs.csv`` (cells by :func:`csv_cell`)."""
    names = [f.name for f in schema.existing]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow([csv_cell(row.get(n)) for n in names])
    return Path(path)


def write_bundle(folder: Path, *, tool_code: str, toolspecs: list[dict[str, Any]], procedure_source: str,
                 rows: list[dict[str, Any]], schema: DataSchema) -> Path:
    """Write a bundle folder (docs/bundle.md) from its parts.

    Args:
        folder: Target folder, created if missing.
        tool_code: Source of tools.py.
        toolspecs: The toolSpec array (flat toolSpec objects are wrapped as ``{"toolSpec": ...}``).
        procedure_source: Source of reference_procedure.py.
        rows: Dataset rows (existing fields).
        schema: The data schema (column order).

    Returns:
        The folder.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TOOLS_FILE).write_text(tool_code, encoding="utf-8")
    wrapped = [e if isinstance(e, dict) and "toolSpec" in e else {"toolSpec": e} for e in toolspecs]
    (folder / TOOLSPECS_FILE).write_text(json.dumps(wrapped, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / PROCEDURE_FILE).write_text(procedure_source, encoding="utf-8")
    write_rows_csv(folder / CSV_FILE, rows, schema)
    return folder


_BundleReport = tuple[list[CheckResult], dict[str, dict[str, Any]], list[dict[str, str]]]


def _bundle_checks(folder: Path, schema: DataSchema, rows: list[dict[str, Any]]) -> _BundleReport:
    """``ground_truth.bundle``: files present, toolspecs readable, CSV cells == the rows; also the specs and cells."""
    missing = [n for n in (TOOLS_FILE, TOOLSPECS_FILE, PROCEDURE_FILE) if not (folder / n).is_file()]
    if missing:
        return [check("ground_truth.bundle", False, f"the bundle misses {', '.join(missing)}", missing=missing)], {}, []
    try:
        specs = load_toolspecs(folder / TOOLSPECS_FILE)
    except (ValueError, OSError) as exc:
        return [check("ground_truth.bundle", False, f"{TOOLSPECS_FILE} cannot be read: {exc}")], {}, []
    if not rows:
        return [check("ground_truth.bundle", False, "there are no dataset rows to run the procedure on")], specs, []
    if not (folder / CSV_FILE).is_file():
        write_rows_csv(folder / CSV_FILE, rows, schema)
    with open(folder / CSV_FILE, newline="", encoding="utf-8") as handle:
        csv_rows = list(csv.DictReader(handle))
    problems = []
    names = [f.name for f in schema.existing]
    missing_cols = [n for n in names if csv_rows and n not in csv_rows[0]]
    if missing_cols:
        problems.append(f"{CSV_FILE} lacks the column(s) {', '.join(missing_cols)}")
    elif len(csv_rows) != len(rows):
        problems.append(f"{CSV_FILE} has {len(csv_rows)} rows but the dataset has {len(rows)}")
    else:
        # The case handed to the procedure is read from the CSV; the tasks record the typed rows.
        # They are one and the same only if every cell is the row value spelled by csv_cell.
        for i, (cells, row) in enumerate(zip(csv_rows, rows, strict=True)):
            bad = next((n for n in names if cells.get(n) != csv_cell(row.get(n))), None)
            if bad is not None:
                problems.append(f"{CSV_FILE} row {i + 1} has {bad}={cells.get(bad)!r} where the dataset row "
                                f"has {row.get(bad)!r} (written as {csv_cell(row.get(bad))!r})")
                break
    if problems:
        return [check("ground_truth.bundle", False, "; ".join(problems))], specs, csv_rows
    done = check("ground_truth.bundle", True, f"bundle complete: {len(specs)} tools, {len(rows)} rows")
    return [done], specs, csv_rows
