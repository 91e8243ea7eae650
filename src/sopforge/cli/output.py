"""Terminal output shared by the commands: one-line errors, JSON, and stage progress."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import typer
from rich.console import Console

from sopforge.errors import SopforgeError

out = Console(highlight=False)
if not out.is_terminal:  # piped or captured: rich would assume 80 columns and fold the tables
    out = Console(highlight=False, width=140)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True)
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
