"""``sopforge runs``: list runs; ``runs delete`` and ``runs prune`` remove them with what they own.

Deleting a run removes its rows from every table (one transaction), then its export folder and its
dataset Parquet files. A run whose artifacts another run reused or was built from is refused (by
``delete``) or kept (by ``prune``), with the dependent run named, so no remaining run loses its
lineage. Prefect's own records of the flow runs are left to Prefect.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from sopforge.cli.inspect import existing_store
from sopforge.cli.output import handle_errors, out, print_json
from sopforge.errors import UserError
from sopforge.settings import Settings
from sopforge.store.deletion import RunDeletion

HOME = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts).")
PRUNABLE = ("failed", "interrupted", "cancelled", "needs_review", "succeeded")

runs_app = typer.Typer(help="List runs (newest first); delete or prune them.", invoke_without_command=True,
                       no_args_is_help=False)


@runs_app.callback()
@handle_errors
def runs(
    ctx: typer.Context,
    limit: int = typer.Option(50, help="How many recent runs to list."),
    home: Optional[Path] = HOME,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List runs, newest first (a run whose process is gone shows as interrupted)."""
    if ctx.invoked_subcommand is not None:
        return
    records = existing_store(home)[1].list_runs(limit=limit)
    if as_json:
        print_json([r.model_dump(mode="json") for r in records])
        return
    table = Table(title="runs", title_justify="left")
    for col in ("run", "slug", "status", "created", "theme"):
        table.add_column(col)
    for r in records:
        table.add_row(r.id, r.theme_slug, r.status, r.created_at.strftime("%Y-%m-%d %H:%M:%S"), r.theme[:60])
    out.print(table)


def _remove_files(settings: Settings, deletion: RunDeletion) -> list[Path]:
    """The export folders and dataset files of deleted runs (after the database commit)."""
    paths = [settings.exports_dir / r.id for r in deletion.runs]
    paths += [settings.home / "datasets" / f"{a}.parquet" for a in deletion.artifacts]
    removed = []
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        removed.append(path)
    return removed


def _report(settings: Settings, deletion: RunDeletion, *, dry_run: bool, as_json: bool) -> None:
    removed = [] if dry_run else _remove_files(settings, deletion)
    if as_json:
        print_json({"dry_run": dry_run, "runs": [r.id for r in deletion.runs], "rows": deletion.rows,
                    "files": [str(p) for p in removed], "kept": deletion.kept})
        return
    verb = "would delete" if dry_run else "deleted"
    if deletion.runs:
        rows = ", ".join(f"{n} {table}" for table, n in deletion.rows.items() if n)
        out.print(f"{verb} {len(deletion.runs)} run(s): {', '.join(r.id for r in deletion.runs)} ({rows})")
        if removed:
            out.print(f"removed {len(removed)} file(s) and folder(s): exports and datasets of those runs")
    else:
        out.print("no run to delete")
    for run_id, reason in deletion.kept.items():
        out.print(f"kept {run_id}: {reason}")


@runs_app.command("delete")
@handle_errors
def delete(
    run: list[str] = typer.Argument(..., help="Run ids (or unique prefixes) to delete."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted; delete nothing."),
    force: bool = typer.Option(False, help="Delete a run that still looks running (its process is known to be gone)."),
    home: Optional[Path] = HOME,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Delete runs with their rows in every table, their export folder and dataset files.

    Refused when another run reused or was built from their artifacts: name both runs to delete them together.
    """
    settings, store = existing_store(home)
    ids = list(dict.fromkeys(store.get_run(r).id for r in run))
    _report(settings, store.delete_runs(ids, dry_run=dry_run, force=force), dry_run=dry_run, as_json=as_json)


@runs_app.command("prune")
@handle_errors
def prune(
    status: list[str] = typer.Option(..., "--status", help=f"Delete runs with this status (repeatable): "
                                                           f"{', '.join(PRUNABLE)}."),
    older_than: Optional[float] = typer.Option(None, "--older-than", help="Only runs created more than this many days ago."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted; delete nothing."),
    home: Optional[Path] = HOME,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Delete every run with a status (e.g. --status failed), keeping those another run depends on.

    A failed run's context is often what its successful rerun reused: such a run is kept and named.
    """
    unknown = [s for s in status if s not in PRUNABLE]
    if unknown:
        raise UserError(f"--status {unknown[0]!r} cannot be pruned: choose from {', '.join(PRUNABLE)}")
    if older_than is not None and older_than < 0:
        raise UserError(f"--older-than {older_than:g} is negative: give a number of days such as 7")
    settings, store = existing_store(home)
    before = datetime.now(timezone.utc) - timedelta(days=older_than) if older_than is not None else None
    _report(settings, store.prune(status, before=before, dry_run=dry_run), dry_run=dry_run, as_json=as_json)
