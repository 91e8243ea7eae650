"""``sopforge show``: read the store (safe while a run writes); ``existing_store`` for every reading command."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from sopforge.cli.output import handle_errors, human_int, out, print_funnel, print_json, run_funnel
from sopforge.errors import UserError

if TYPE_CHECKING:  # the store (DuckDB) and the families load when a command runs, not for --help
    from sopforge.settings import Settings
    from sopforge.store import Store


def existing_store(home: Path | None, *, mark_interrupted: bool = True) -> tuple[Settings, Store]:
    """Settings and store of ``home``, for commands that only make sense once a run exists.

    A run whose process is gone is recorded as ``interrupted`` on the way (a write only when there
    is one), so plain SQL agrees with what the commands show from the first command after a kill on;
    ``mark_interrupted=False`` leaves that to the caller (one that verifies the file first).

    Raises:
        UserError: There is no database yet.
    """
    from sopforge.settings import load_settings
    from sopforge.store import Store

    settings = load_settings(home=home)
    if not settings.db_path.exists():
        raise UserError(f"no sopforge database at {settings.db_path}: run `make demo` or `sopforge generate` first, or set SOPFORGE_HOME")
    store = Store(settings.db_path)
    if mark_interrupted:
        try:
            store.mark_interrupted()
        except UserError:
            pass  # read-only or damaged: the command's own reads say so, or still show the run interrupted
    return settings, store


def _stage_detail(store: Store, run_id: str, stage: str) -> dict[str, Any]:
    artifact = store.artifact_for_stage(run_id, stage)
    if artifact is None:
        known = [s.stage for s in store.run_summary(run_id).stages]
        raise UserError(f"run {run_id} has no artifact for stage {stage!r}" + (f": it has {', '.join(known)}" if known else ""))
    parents = store.parents_of(artifact.id)
    return {
        "artifact": artifact.model_dump(mode="json"),
        "checks": [v.model_dump(mode="json") for v in store.validations_for(artifact.id)],
        "lineage": {"parents": [{"id": p.id, "stage": p.stage, "version": p.version, "run_id": p.run_id} for p in parents]},
        "llm_calls": [
            {k: c.get(k) for k in ("call_key", "attempt", "provider", "model", "input_tokens", "output_tokens",
                                    "cached_tokens", "cost_usd", "latency_ms", "transport_attempts", "batch_id",
                                    "error", "created_at")}
            for c in (call.model_dump(mode="json") for call in store.calls_for_run(artifact.run_id, stage=stage))
        ],
    }


def _print_stage(stage: str, detail: dict[str, Any]) -> None:
    from rich.markdown import Markdown

    from sopforge.families import declared_stage
    from sopforge.render import artifact_markdown

    art = detail["artifact"]
    out.rule(f"{stage} v{art['version']}  {art['id']}  ({art['status']}, run {art['run_id']}, model {art['model']})")
    spec = declared_stage(stage, art["family"])
    if spec is not None and spec.table is not None and spec.table.in_terminal:
        rows = spec.table.rows(art["content"])
        table = Table(show_lines=False)
        for col in rows[0].keys() if rows else []:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*(str(v) for v in row.values()))
        out.print(table)
    else:
        out.print(Markdown(artifact_markdown(stage, art["content"], art["family"])))
    checks = Table(title="checks (failures first)", title_justify="left")
    for col in ("passed", "severity", "check", "message"):
        checks.add_column(col, overflow="fold")
    for c in sorted(detail["checks"], key=lambda c: (c["passed"], c["severity"] != "error")):
        checks.add_row("yes" if c["passed"] else "[red]NO[/]", c["severity"], c["check_name"], c["message"])
    out.print(checks)
    parents = ", ".join(f"{p['stage']} v{p['version']} ({p['id']})" for p in detail["lineage"]["parents"]) or "none"
    out.print(f"lineage: built from {parents}")
    calls = Table(title="LLM calls", title_justify="left")
    for col in ("call key", "provider", "model", "tokens in/out", "cached", "cost", "latency ms", "error"):
        calls.add_column(col, overflow="fold")
    for c in detail["llm_calls"]:
        calls.add_row(c["call_key"], c["provider"], c["model"], f"{human_int(c['input_tokens'])} / {human_int(c['output_tokens'])}",
                      human_int(c["cached_tokens"]), f"${c['cost_usd'] or 0:.4f}", f"{c['latency_ms'] or 0:.0f}",
                      c["error"] or "")
    out.print(calls if detail["llm_calls"] else f"LLM calls: none by run {art['run_id']} for this stage")


@handle_errors
def show(
    run: str = typer.Argument(..., help="Run id (or a unique prefix of it)."),
    stage: Optional[str] = typer.Option(None, help="Stage whose artifact to print (context, schema, sop, ...)."),
    home: Optional[Path] = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show a run's stages, or one stage's artifact with its checks, lineage and LLM calls."""
    _, store = existing_store(home)
    summary = store.run_summary(store.get_run(run).id)
    run_id = summary.run.id
    if stage is not None:
        detail = _stage_detail(store, run_id, stage)
        if as_json:
            print_json({"run_id": run_id, "stage": stage, **detail})
        else:
            _print_stage(stage, detail)
        return
    if as_json:
        print_json(summary.model_dump(mode="json"))
        return
    r = summary.run
    out.print(f"run {r.id}  {r.status}  theme: {r.theme}" + (f"\nerror: {r.error}" if r.error else ""))
    table = Table(title_justify="left")
    for col in ("stage", "status", "artifact", "checks ok/failed", "LLM calls", "tokens in/out", "prompt cache",
                "cost", "error"):
        table.add_column(col, overflow="fold")
    for s in summary.stages:
        table.add_row(s.stage, s.status, f"{s.artifact_id or '-'} v{s.artifact_version or '-'}",
                      f"{s.checks_passed}/{s.checks_failed}", str(s.llm_calls),
                      f"{human_int(s.input_tokens)} / {human_int(s.output_tokens)}",
                      f"{s.prompt_cache_share:.0%}" if s.input_tokens else "-", f"${s.cost_usd:.4f}", s.error or "")
    out.print(table)
    out.print(f"totals: {summary.llm_calls} LLM calls, {human_int(summary.input_tokens)} tokens in, "
              f"{human_int(summary.output_tokens)} out, est. ${summary.cost_usd:.4f}")
    print_funnel(run_funnel(store, run_id))
    decisions = store.reviews_for_run(run_id)
    if decisions:
        out.print("review decisions: " + "; ".join(
            f"{r.stage} v{r.artifact_version} {r.decision} ({r.reviewer or r.source})" for r in decisions))
