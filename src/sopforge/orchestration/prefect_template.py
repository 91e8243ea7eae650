"""A migrated Prefect database to start a new home's server from, kept once per machine.

A Prefect server on a new home creates its SQLite database and runs every migration before it
answers: a third of its start-up (9 of 25 s on a loaded 2-core machine), paid by the first command
of every new home. The first server that comes up healthy on this machine saves a copy of its
database, still empty of runs, under ``~/.cache/sopforge`` (``XDG_CACHE_HOME``); a server on a new
home starts from that copy, and Prefect finds nothing left to migrate. The copy also holds the block
types that server registered at its start, so a server started from it skips that registration too
(``BLOCKS_REGISTERED``). Both depend on the Prefect version and on the Prefect collections installed
(they add block types), so the copy's name holds both: another set gets another copy.
A database configured elsewhere (``PREFECT_API_DATABASE_CONNECTION_URL``) is left alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from importlib.metadata import entry_points, version
from pathlib import Path

__all__ = ["BLOCKS_REGISTERED", "save_template", "seed_database"]

DATABASE = "prefect.db"  # Prefect's default SQLite file under PREFECT_HOME
# For a server whose database came from the template: its block types are registered already. Skipping
# their registration takes 0.9-1.2 s off a 6 s start on a new home (2026-11-28, medians of 3-4 alternating
# starts).
BLOCKS_REGISTERED = {"PREFECT_API_BLOCKS_REGISTER_ON_START": "false"}


def _template() -> Path | None:
    if os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL"):
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "sopforge" / f"prefect-{version('prefect')}{_collections_suffix()}.db"


def _collections_suffix() -> str:
    """``""`` without Prefect collections, else a digest of the installed ones and their versions."""
    installed = sorted(f"{ep.name}={ep.value}@{ep.dist.version if ep.dist else ''}"
                       for ep in entry_points(group="prefect.collections"))
    return "+" + hashlib.sha256("\n".join(installed).encode()).hexdigest()[:12] if installed else ""


def seed_database(prefect_home: Path) -> bool:
    """Start a new home's database from the template; True when it did."""
    template, database = _template(), prefect_home / DATABASE
    if template is None or database.exists() or not template.is_file():
        return False
    partial = database.with_name(f".{DATABASE}.{os.getpid()}")
    shutil.copyfile(template, partial)
    partial.replace(database)
    return True


def save_template(prefect_home: Path) -> None:
    """Keep a copy of a healthy server's freshly migrated database, if none is kept yet.

    Call only for a database this server created (no runs in it yet). SQLite's backup API copies
    it consistently while the server keeps writing; a failure only means no template this time.
    """
    template = _template()
    if template is None or template.exists() or not (prefect_home / DATABASE).is_file():
        return
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        partial = template.with_name(f".{template.name}.{os.getpid()}")
        with sqlite3.connect(prefect_home / DATABASE) as source, sqlite3.connect(partial) as copy:
            source.backup(copy)
        partial.replace(template)
    except (OSError, sqlite3.Error):
        return
