"""``sopforge audit PATH``: check any SOP-Bench folder against the exporter spec (§9).

Exit codes: 0 no errors (warnings allowed unless ``--strict``), 1 the folder has errors,
2 unusable input (the path does not exist or is not a folder), 3 an exchange answer is pending
(``--derive-reference --provider exchange``: answer the request file and run it again).
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
    derive_reference: bool = typer.Option(
        False, "--derive-reference", help="Ask a model for reference procedures from sop.txt and the tools, run them "
                                          "on every row and report labels that contradict the SOP."),
    provider: Optional[str] = typer.Option(None, help="With --derive-reference: anthropic, openai, replay or exchange."),
    model: Optional[str] = typer.Option(None, help="With --derive-reference: the model (default: the provider's)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="With --derive-reference: an OpenAI-compatible "
                                                                     "or Anthropic-compatible server."),
    derivations: int = typer.Option(2, min=1, max=5, help="With --derive-reference: independent derivations; a "
                                                          "contradiction is an error only when two or more agree."),
) -> None:
    """Audit a benchmark folder: files, metadata, CSV, labels, toolspecs, tools.py (sandboxed), labels vs reference."""
    from sopforge.audit import audit_folder  # heavy imports (pandas, jsonschema) only for this command

    derive = _derivation(provider, model, base_url, derivations) if derive_reference else None
    report = audit_folder(path, run=run, reference=reference, strict=strict, derive=derive)
    if as_json:
        print_json(report.to_json())
    else:
        _print(report, show_passed=show_passed)
    if not report.ok:
        raise typer.Exit(1)


def _derivation(provider: str | None, model: str | None, base_url: str | None, count: int):
    """The gateway the derivations are asked through (every provider, exchange and replay included)."""
    from sopforge.audit.run import Derivation
    from sopforge.llm import build_gateway, default_model
    from sopforge.settings import load_settings

    settings = load_settings()
    name = provider or settings.provider
    if name == "replay" and settings.recordings_dir is None:
        # Recorded derivations live beside the demo's: examples/recordings/audit.
        settings = settings.model_copy(update={"recordings_dir": settings.resolved_recordings_dir / "audit"})
    llm = build_gateway(settings, provider=name, base_url=base_url)
    return Derivation(llm=llm, settings=settings, model=model or settings.model or default_model(name), count=count)


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
