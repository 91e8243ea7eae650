"""Connection handling shared by every ``Store`` method.

Every public method of ``Store`` opens a connection, does its work and closes it, so a CLI in
another process can read while a run writes (DuckDB allows one writing process per file).
Reads use read-only connections once the file exists; the first write of a ``Store`` applies
pending migrations, and a reader that finds an outdated schema migrates it once.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import duckdb

from .connection import ensure_writable_location, open_connection
from .migrate import apply_migrations, is_current

DEFAULT_LOCK_TIMEOUT = 30.0


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Run the block as one transaction: commit on success, roll back on any exception."""
    con.begin()
    try:
        yield
    except BaseException:
        con.rollback()
        raise
    con.commit()


def require(value: str, allowed: Any, what: str) -> None:
    """Reject a status outside a ``Literal`` vocabulary (SQL has no CHECK, see migration 001)."""
    if value not in typing.get_args(allowed):
        raise ValueError(f"{what} must be one of {typing.get_args(allowed)}, not {value!r}")


class StoreBase:
    """Opening, migrating and checking the DuckDB file behind a ``Store``.

    Args:
        path: The DuckDB file (usually ``settings.db_path``); created with its folder on
            first write, and migrated automatically.
        lock_timeout: Seconds to wait for another sopforge process that holds the file
            before raising ``UserError``.
    """

    def __init__(self, path: Path, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT):
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self._schema_ok = False  # migrations checked by this instance; saves a query per call
        self._location_ok = False

    @classmethod
    def from_settings(cls, settings: Any, **kwargs: Any) -> Self:
        """A store at ``settings.db_path`` (under ``SOPFORGE_HOME``)."""
        return cls(settings.db_path, **kwargs)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # --- connections ------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection, creating the folder and migrating the schema when needed."""
        if not self._location_ok or not self.path.parent.is_dir():
            ensure_writable_location(self.path)
            self._location_ok = True
        existed = self.path.exists()  # a deleted database must be re-created with its schema
        with open_connection(self.path, read_only=False, lock_timeout=self.lock_timeout) as con:
            if not self._schema_ok or not existed:
                apply_migrations(con, db_label=str(self.path))
                self._schema_ok = True
            yield con

    @contextmanager
    def _read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection, so readers never take the write lock.

        A missing file is created (read-only DuckDB cannot open it), and an outdated schema
        is migrated once, so queries never meet missing tables.
        """
        if not self.path.exists():
            with self._write() as con:
                yield con
            return
        if not self._schema_ok:
            with open_connection(self.path, read_only=True, lock_timeout=self.lock_timeout) as con:
                current = is_current(con)
            if not current:
                with self._write():
                    pass
            self._schema_ok = True
        with open_connection(self.path, read_only=True, lock_timeout=self.lock_timeout) as con:
            yield con

    def check_writable(self) -> None:
        """Fail fast, before a run starts, when the database cannot be written.

        Creates the folder and the database (with its schema) if needed.

        Raises:
            UserError: The path cannot be written (names the path and the fix), or another
                sopforge process held the file for longer than ``lock_timeout``.
        """
        ensure_writable_location(self.path)
        self._location_ok = True
        with self._write() as con:
            con.execute("CHECKPOINT")
