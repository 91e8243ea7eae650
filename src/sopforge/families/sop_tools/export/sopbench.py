"""Write one benchmark as a SOP-Bench folder (``research/sopbench_format.md``), atomically,
and refuse it unless it re-audits clean.

The folder is assembled in a hidden temp sibling (``<dest>/.sopforge-export-*/<name>/``, so
the folder name already equals ``metadata.name`` while it is audited), checked, and moved
into place with one ``rename``. Any failure — a value pandas would misread, an audit error —
removes the temp folder: ``<dest>/<name>`` is either the complete, audited export or absent
(the harness ignores directories starting with ``.``, so even a killed process leaves
nothing it would load).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sopforge.errors import UserError, ValidationFailed
from sopforge.checks import as_report
from sopforge.families.sop_tools.export.cells import roundtrip_problems, to_cell, write_csv
from sopforge.families.sop_tools.export.metadata import benchmark_stats
from sopforge.families.sop_tools.models.api_graph import APIGraph

__all__ = ["CONDITIONAL_KEY", "EXPORT_BLOCKING_WARNINGS", "RESERVED_METADATA_KEYS", "column_order",
           "write_sopbench_folder"]

NAME_RE = re.compile(r"^[a-z0-9_]+$")
RESERVED_METADATA_KEYS = frozenset({
    "name", "domain", "description", "input_columns", "output_columns", "num_tasks", "num_tools",
    "intermediate_columns", "hidden_columns", "stats", "generator", "conditional_columns",
})
# Audit warnings (§9 [warn]) that our own exports must not have: the schema and api_graph
# stages already forbid them upstream (distinct decision labels, no tool returning a decision).
EXPORT_BLOCKING_WARNINGS = frozenset({
    "outputs.labels_distinct", "outputs.scalar", "outputs.label_length", "leakage.tool_returns_output",
    "csv.values_survive_pandas", "metadata.name_matches_folder", "metadata.name_format",
    "toolspecs.type_object", "toolspecs.name_format", "tools.manager_unique",
})
AUDIT_FILE = "audit.json"
WAIVABLE_CELLS = "export.cells"
# metadata.json key: shown columns whose empty cell means the case has no such value, with its condition.
# The audit reads it under the same name (sopforge.audit.checks_data.CONDITIONAL_KEY; importing that
# package here would cost the commands that only export a second).
CONDITIONAL_KEY = "conditional_columns"


def _generator() -> str:
    try:
        return f"sopforge {version('sopforge')}"
    except PackageNotFoundError:
        return "sopforge"


def column_order(rows: list[dict[str, Any]], input_columns: list[str], intermediate_columns: list[str],
                 output_columns: list[str]) -> list[str]:
    """Inputs, then hidden columns (other existing fields in row order, then intermediates), then outputs.

    Raises:
        UserError: the column lists are empty, overlap, or do not match the rows' keys.
    """
    if not input_columns or not output_columns:
        raise UserError("input_columns and output_columns must both be non-empty")
    lists = {"input": input_columns, "intermediate": intermediate_columns, "output": output_columns}
    for label, cols in lists.items():
        if len(set(cols)) != len(cols):
            raise UserError(f"{label}_columns repeats a column: {cols}")
    seen: dict[str, str] = {}
    for label, cols in lists.items():
        for col in cols:
            if col in seen:
                raise UserError(f"column {col!r} is both {seen[col]} and {label}")
            seen[col] = label
    if not rows:
        raise UserError("no rows to export: a benchmark needs at least one task")
    keys = list(rows[0])
    for i, row in enumerate(rows):
        if set(row) != set(keys):
            diff = sorted(set(row) ^ set(keys))
            raise UserError(f"row {i} has different columns from row 0: {diff}")
    missing = [c for c in seen if c not in keys]
    if missing:
        raise UserError(f"columns listed but absent from the rows: {missing}")
    other = [k for k in keys if k not in seen]
    return [*input_columns, *other, *intermediate_columns, *output_columns]


def _cells(rows: list[dict[str, Any]], columns: list[str], may_be_empty: set[str], outputs: set[str],
           waivers: dict[str, str]) -> list[list[str]]:
    """The CSV text of every cell; ``None`` is the empty cell only where no value is a fact of the case.

    Hidden columns (an intermediate an early exit never computed) and conditional fields (``may_be_empty``)
    write ``None`` as the empty cell, which pandas reads back as the missing value it is; a present value
    that pandas would read as missing (``"None"``, ``""``) is still refused by the round trip. Anywhere
    else ``None`` is refused (unless the run waived ``export.cells``), one message per column.
    """
    table, bad, missing = [], [], {}
    for i, row in enumerate(rows):
        line = []
        for col in columns:
            if row[col] is None and (col in may_be_empty or WAIVABLE_CELLS in waivers):
                line.append("")
                continue
            if row[col] is None:
                missing.setdefault(col, []).append(i)
                line.append("")
                continue
            try:
                line.append(to_cell(row[col]))
            except ValueError as exc:
                bad.append(f"row {i} column {col!r}: {exc}")
                line.append("")
        table.append(line)
    bad = [_missing_message(col, ids, col in outputs) for col, ids in missing.items()] + bad
    if bad:
        raise ValidationFailed(f"values that cannot be written to the CSV: {'; '.join(bad[:3])}"
                               + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""),
                               report=[{"name": WAIVABLE_CELLS, "message": m, "severity": "error"} for m in bad])
    return table


def _missing_message(column: str, row_ids: list[int], output: bool) -> str:
    shown = ", ".join(map(str, row_ids[:5])) + (f" and {len(row_ids) - 5} more" if len(row_ids) > 5 else "")
    if output:
        return (f"decision column {column!r} has no label (None) on rows {shown}: every task needs one "
                "(rerun --from reference)")
    return (f"column {column!r} has no value (None) on rows {shown}, but the schema does not mark it conditional, "
            "so pandas would read its empty cell as a missing value: regenerate the rows (rerun --from dataset), "
            "or mark the field [present_if: other_field = value] in the schema (rerun --from schema)")


def _write_csv(path: Path, columns: list[str], table: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        write_csv(f, columns, table)


def write_sopbench_folder(dest: Path, *, name: str, domain: str, description: str, sop_text: str,
                          toolspecs: list, tools_source: str, rows: list[dict[str, Any]], input_columns: list[str],
                          intermediate_columns: list[str], output_columns: list[str],
                          extra_metadata: dict[str, Any] | None = None, reference_source: str | None = None,
                          api_graph: APIGraph | None = None, tasks: list[dict[str, Any]] | None = None,
                          overwrite: bool = False, audit: bool = True, limits: Any = None,
                          waivers: dict[str, str] | None = None,
                          conditional_columns: dict[str, str] | None = None) -> Path:
    """Write ``<dest>/<name>/`` in SOP-Bench layout and verify it with the audit.

    Args:
        dest: the data root that holds benchmark folders (created if missing).
        name: benchmark key and folder name, ``[a-z0-9_]+``.
        domain: shown by ``sop-bench list``.
        description: one line for the listing.
        sop_text: the SOP given to the agent (``sop.txt``).
        toolspecs: toolspec elements (``{"toolSpec": {name, description, inputSchema: {json}}}``).
        tools_source: ``tools.py``; it must read ``test_set_with_outputs.csv`` next to itself.
        rows: one dict per task holding every column (inputs, other existing fields, intermediate
            values, decisions) as Python values: str, int, float, bool, date, list/dict.
        input_columns: columns shown to the agent, in this order first in the CSV.
        intermediate_columns: to-be-obtained values the tools return (hidden columns, after the
            other hidden existing fields).
        output_columns: the decision columns (ground truth), last in the CSV.
        extra_metadata: our own metadata keys (provenance, ...); must not reuse a reserved key.
        reference_source: ``reference_procedure.py`` (``run_procedure(manager, case)``); when
            given, the audit checks every label against it.
        api_graph: the ground-truth API graph, for the TELLER Table 4 figures in ``stats``.
        tasks: task dicts with ``expected_calls``, for ``stats.mean_expected_calls`` (the run-level
            ``metadata.json`` reports the same figure from the same tasks).
        overwrite: replace an existing ``<dest>/<name>`` (atomically swapped).
        audit: re-validate the written folder (default; switch off only for benchmarks).
        limits: ``SandboxLimits`` for the audit's sandbox runs.
        waivers: checks the run overruled (check name -> reason); the export's audit and its cell
            check (``export.cells``) let them through.
        conditional_columns: fields that have no value on some rows (the schema's ``[present_if]``),
            each with its condition as text: ``None`` there is written as an empty cell, and the shown
            ones are listed under ``metadata.json``'s ``conditional_columns`` so the audit (and a reader)
            knows the empty cell means "no such fact for this case", not a lost value.

    Returns:
        The folder path ``<dest>/<name>``.

    Raises:
        UserError: bad name or column lists, or the folder exists and ``overwrite`` is False.
        ValidationFailed: a value cannot be written so pandas reads it back unchanged, or the
            audit of the written folder reports errors (``report`` lists the failed checks).
    """
    if not NAME_RE.match(name):
        raise UserError(f"benchmark name {name!r} must match [a-z0-9_]+ (it is the folder name and a module name)")
    clash = sorted(RESERVED_METADATA_KEYS & set(extra_metadata or {}))
    if clash:
        raise UserError(f"extra_metadata may not set reserved keys: {', '.join(clash)}")
    if not sop_text.strip():
        raise UserError("sop_text is empty")
    dest = Path(dest)
    final = dest / name
    if final.exists() and not overwrite:
        raise UserError(f"{final} already exists; pass overwrite=True to replace it")
    columns = column_order(rows, input_columns, intermediate_columns, output_columns)
    n_out = len(output_columns)
    hidden = [c for c in columns if c not in input_columns and c not in output_columns]
    conditional = {c: why for c, why in (conditional_columns or {}).items() if c in columns and c not in output_columns}
    table = _cells(rows, columns, set(hidden) | set(conditional), set(output_columns), waivers or {})
    stats = benchmark_stats(sop_text=sop_text, toolspecs=toolspecs, rows=rows, input_columns=input_columns,
                            output_columns=output_columns, api_graph=api_graph, tasks=tasks)
    metadata = {
        "name": name, "domain": domain, "description": description,
        "input_columns": list(input_columns), "output_columns": list(output_columns),
        "num_tasks": len(rows), "num_tools": len(toolspecs),
        "intermediate_columns": list(intermediate_columns), "hidden_columns": hidden,
        "stats": stats.model_dump(mode="json"), "generator": _generator(),
        **({CONDITIONAL_KEY: {c: conditional[c] for c in input_columns if c in conditional}}
           if any(c in conditional for c in input_columns) else {}),
        **(extra_metadata or {}),
    }
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".sopforge-export-", dir=dest))
    try:
        work = staging / name
        work.mkdir()
        (work / "sop.txt").write_text(sop_text if sop_text.endswith("\n") else sop_text + "\n", encoding="utf-8")
        (work / "toolspecs.json").write_text(json.dumps(toolspecs, indent=2, ensure_ascii=False) + "\n",
                                             encoding="utf-8")
        (work / "tools.py").write_text(tools_source, encoding="utf-8")
        if reference_source is not None:
            (work / "reference_procedure.py").write_text(reference_source, encoding="utf-8")
        _write_csv(work / "test_set_with_outputs.csv", columns, table)
        _write_csv(work / "test_set_without_outputs.csv", columns[:-n_out], [r[:-n_out] for r in table])
        (work / "metadata.json").write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
        problems = roundtrip_problems(work / "test_set_with_outputs.csv", columns, rows)
        if problems:
            raise ValidationFailed(f"the CSV does not read back unchanged with pandas: {problems[0]}",
                                   report=[{"name": "export.roundtrip", "message": p, "severity": "error"}
                                           for p in problems])
        if audit:
            _audit(work, final, limits, waivers or {})
        _move_into_place(work, final, staging, overwrite=overwrite)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def _audit(work: Path, final: Path, limits: Any, waivers: dict[str, str]) -> None:
    """The export's own audit; a check the run waived (its one-line way out names the audit check) passes."""
    from sopforge.audit import audit_folder

    report = audit_folder(work, limits=limits)
    report.folder = str(final)
    failed = [c for c in report.failed(promote=EXPORT_BLOCKING_WARNINGS) if c.name not in waivers]
    report.write_json(work / AUDIT_FILE)
    if failed:
        first = failed[0]
        raise ValidationFailed(
            f"the exported folder fails its audit ({len(failed)} check(s)): {first.name}: {first.message}",
            report=as_report(failed))


def _move_into_place(work: Path, final: Path, staging: Path, *, overwrite: bool) -> None:
    """rename(2) the finished folder to ``final``; an old folder is swapped out, then deleted."""
    old = None
    if final.exists():
        if not overwrite:
            raise UserError(f"{final} appeared while exporting; not replacing it")
        old = staging / f"{final.name}.old"
        final.rename(old)
    try:
        work.rename(final)
    except BaseException:
        if old is not None and not final.exists():
            old.rename(final)  # put the previous export back
        raise
