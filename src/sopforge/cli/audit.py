"""``sopforge audit PATH``: check any SOP-Bench folder against the exporter spec (§9).

Exit codes: 0 no errors (warnings allowed unless ``--strict``), 1 the folder has errors,
2 unusable input (the path does not exist or is not a folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from sopforge.cli.output import handle_errors, out, print_json


@handle_errors
def audit(
    path: Path = typer.Argument(..., help="Benchmark folder in SOP-Bench layout (sop.txt, toolspecs.json, tools.py, ...)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    reference: Optional[Path] = typer.Option(
        None, "--reference", help="A reference procedure file (run_procedure(manager, case)) to check the labels "
                                  "with; default: the folder's reference_procedure.py."),
    strict: bool = typer.Option(False, "--strict", help="Fail on warnings too."),
    run: bool = typer.Option(True, "--run/--no-run", help="Run the tools in the sandbox (default) or only read the files."),
    show_passed: bool = typer.Option(False, "--all", help="List passed checks too."),
) -> None:
    """Audit a benchmark folder: files, metadata, CSV, labels, toolspecs, tools.py (sandboxed), labels vs reference."""
    from sopforge.audit import audit_folder  # heavy imports (pandas, jsonschema) only for this command

    report = audit_folder(path, run=run, reference=reference, strict=strict)
    if as_json:
        print_json(report.to_json())
    else:
        _print(report, show_passed=show_passed)
    if not report.ok:
        raise typer.Exit(1)


def _print(report, *, show_passed: bool) -> None:
    table = Table(title=f"audit of {report.folder} (failures first)", title_justify="left")
    for col in ("status", "severity", "check", "message"):
        table.add_column(col, overflow="fold")
    for c in report.ordered():
        if c.passed and not show_passed:
            continue
        status = "ok" if c.passed else ("[red]FAIL[/]" if c.severity == "error" else "[yellow]warn[/]")
        table.add_row(status, c.severity, c.name, escape(c.message))
    for s in report.skipped:
        table.add_row("skip", "", s.name, escape(s.reason))
    out.print(table)
    stats = report.stats
    if stats and "num_tasks" in stats:
        out.print(f"{stats['num_tasks']} tasks, {stats['num_tools']} tools, ~{stats['sop_tokens']} SOP tokens; "
                  f"labels: " + "; ".join(f"{col}: " + ", ".join(f"{k} {v}" for k, v in list(d.items())[:8])
                                          for col, d in stats.get("decision_distribution", {}).items()),
                  markup=False)
    passed = sum(c.passed for c in report.checks)
    verdict = "[green]PASSED[/]" if report.ok else "[bold red]FAILED[/]"
    out.print(f"{verdict}: {len(report.errors)} error(s), {len(report.warnings)} warning(s), {passed} passed, "
              f"{len(report.skipped)} skipped")
