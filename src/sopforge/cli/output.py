"""Terminal output shared by the commands: one-line errors, JSON, and stage progress."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sopforge.errors import SopforgeError
from sopforge.store.redact import redact_text

out = Console(highlight=False)
if not out.is_terminal:  # piped or captured: rich would assume 80 columns and fold the tables
    out = Console(highlight=False, width=140)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    # Escaped: messages quote user text such as "[choices: a | b]", which rich would take for markup.
    err.print(f"[bold red]error:[/] {escape(redact_text(message))}", markup=True)
    raise typer.Exit(code)


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn sopforge errors into one clear line and a non-zero exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except SopforgeError as error:
            fail(str(error).splitlines()[0] if str(error) else error.__class__.__name__, error.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", 130)

    return wrapper


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str, ensure_ascii=False) + "\n")


def human_int(n: int | float | None) -> str:
    return f"{int(n or 0):,}"


def run_funnel(store: Any, run_id: str) -> list[dict[str, Any]]:
    """Funnel rows of every artifact the run produced or reused, in the order of its plan's stages."""
    order = _plan_order(store, run_id)
    stages = dict.fromkeys(s.stage for s in store.stage_runs_for(run_id))
    rows = []
    for stage in sorted(stages, key=lambda s: order.index(s) if s in order else len(order)):
        record = store.artifact_for_stage(run_id, stage)
        if record is not None:
            rows += [r.model_dump() for r in store.funnel_for(record.id)]
    return rows


def _plan_order(store: Any, run_id: str) -> list[str]:
    """Stage names in the run's plan order (independent stages may have run in any order)."""
    config = store.get_run(run_id).config
    if config.get("plan"):  # recorded at creation: no need to load the families (seconds) to order a table
        return list(config["plan"])
    from sopforge.theme import build_spec

    spec = config.get("spec")
    try:
        return build_spec(spec, source=f"run {run_id}").plan().names
    except Exception:  # noqa: BLE001 - an old or foreign config still shows its funnel, unordered
        return []


def print_funnel(rows: list[dict[str, Any]]) -> None:
    """The funnel as a table: generated → verified → kept per component and type."""
    if not rows:
        return
    table = Table(title="verification funnel, all families (every item checked; dropped items are never exported)", title_justify="left")
    columns = ("component", "item_type", "generated", "verified", "retried", "dropped", "kept")
    for col in columns:
        table.add_column(col.replace("item_type", "type"), justify="left" if col in columns[:2] else "right")
    for r in rows:
        table.add_row(*(str(r[c]) for c in columns))
    out.print(table)
