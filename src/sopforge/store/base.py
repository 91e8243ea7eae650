"""Connection handling shared by every ``Store`` method.

Every public method of ``Store`` opens a connection, does its work and closes it, so a CLI in
another process can read while a run writes (DuckDB allows one writing process per file).
Reads use read-only connections once the file exists; the first write of a ``Store`` applies
pending migrations, and a reader that finds an outdated schema migrates it once.
"""

from __future__ import annotations

import atexit
import threading
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import duckdb

from sopforge.errors import UserError

from . import journal
from .connection import (_process_lock, close_idle, ensure_writable_location, file_key, open_connection,
                         read_every_block)
from .migrate import apply_migrations, is_current

DEFAULT_LOCK_TIMEOUT = 30.0
FLUSH_SECONDS = 0.5

# Write-behind for the LLM call ledger. Every DuckDB commit is an fsync (about 20 ms here), which a
# run with many concurrent calls would pay once per call. So ``Store.record_call`` queues the row
# and it is written within FLUSH_SECONDS, together with whatever else arrived meanwhile, in one
# transaction; and before any other operation on the file in this process, so every query (cache
# lookups included) sees every call recorded before it. A process killed in that window does not
# lose them: each call is appended to this process's journal first (``sopforge.store.journal``), and
# the next process that opens the file folds a dead process's journal into ``llm_calls``.
_pending: dict[str, list[tuple[Callable[[duckdb.DuckDBPyConnection], None], Any]]] = {}
_pending_lock = threading.Lock()
# Writes taken off the queue whose transaction has not committed yet: still "queued" to a reader,
# which would otherwise find them neither in the queue nor in the file for that moment.
_writing: dict[str, list[tuple[Callable[[duckdb.DuckDBPyConnection], None], Any]]] = {}
_flushers: dict[str, "StoreBase"] = {}
_journals: dict[str, journal.Journal] = {}  # this process's journal per database file
_verified: set[str] = set()  # database files this process has read whole (StoreBase.verify)
_exiting = False  # set by the exit hook: later writes are made at once, not by a timer thread


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
        self._answered: set[str] | None = None  # request hashes with a cached answer (Store.cached_response)
        self._answered_lock = threading.Lock()
        self._answered_log: journal.AnsweredLog | None = None  # answers other processes announced since
        self._folded = False  # journals of processes that are gone folded in by this instance

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
            if not self._folded:
                self._fold(con)
            _write_pending(self._key, con)
            yield con

    def _fold(self, con: duckdb.DuckDBPyConnection) -> None:
        """Fold the journals of processes that died into ``llm_calls`` (see ``sopforge.store.journal``)."""
        from .queries import insert_call

        self._folded = True
        if not journal.has_orphans(self.path):
            return
        with transaction(con):
            folded = journal.fold_journals(con, self.path, lambda c, record: insert_call(c, record, record.params))
        journal.remove_folded(folded)
        if folded:
            self._answered = None  # answers just folded in are not in a set read before

    @property
    def _key(self) -> str:
        return file_key(self.path)

    def _queue_write(self, write: Callable[[duckdb.DuckDBPyConnection], None], item: Any = None, *,
                     journaled: bool = False) -> None:
        """Run ``write(con)`` within FLUSH_SECONDS, batched with others (see the module's write-behind);
        ``item`` is what it writes, for :meth:`_queued`; ``journaled``: append ``item`` (an LLM call) to
        this process's journal first, so a crash before the write does not lose it."""
        with _pending_lock:
            if journaled:
                if self._key not in _journals:
                    _journals[self._key] = journal.Journal(self.path)
                _journals[self._key].append(item)
            queue = _pending.setdefault(self._key, [])
            queue.append((write, item))
            first = len(queue) == 1
            _flushers[self._key] = self
        if first and _exiting:
            self._flush()  # no timer thread once the process exits: it could be writing while the interpreter ends
        elif first:
            timer = threading.Timer(FLUSH_SECONDS, self._flush)
            timer.daemon = True
            timer.start()

    def _queued(self) -> list[Any]:
        """Items queued for writing and not written yet, oldest first."""
        with _pending_lock:
            return [item for _, item in (*_writing.get(self._key, []), *_pending.get(self._key, []))]

    def _flush(self) -> None:
        # Checked under the file's lock: another thread may have written the queue (and the
        # caller may have moved on, even deleted the folder) while this one waited for it.
        with _process_lock(self.path):
            if _pending.get(self._key):
                with self._write():
                    pass

    @contextmanager
    def _read(self, *, flush: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection, so readers never take the write lock.

        A missing file is created (read-only DuckDB cannot open it), and an outdated schema
        is migrated once, so queries never meet missing tables. Queued writes are written first
        unless ``flush`` is False (the caller looks at :meth:`_queued` itself).
        """
        if not self._folded and self.path.exists() and journal.has_orphans(self.path):
            try:
                with self._write():  # a dead process's calls join llm_calls before anyone reads them
                    pass
            except UserError:
                pass  # a read-only copy: readers see the file as it is; the next writer folds them in
        self._folded = True
        if not self.path.exists() or (flush and _pending.get(self._key)):
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

    def verify(self) -> None:
        """Read every stored value once, so a damaged block (overwritten bytes, a truncated file) is
        found now, in one line, rather than by whichever later query reads it (once per process).

        Raises:
            UserError: The file is damaged (names it, the damage and the way out), or another process
                held it for longer than ``lock_timeout``.
        """
        if self._key in _verified or not self.path.exists():
            return
        with open_connection(self.path, read_only=True, lock_timeout=self.lock_timeout) as con:
            read_every_block(con)
        _verified.add(self._key)

    def check_writable(self) -> None:
        """Fail fast, before a run starts, when the database cannot be written or is damaged.

        Creates the folder and the database (with its schema) if needed; an existing file is
        verified first (:meth:`verify`), so nothing is written to a damaged one.

        Raises:
            UserError: The path cannot be written (names the path and the fix), the file is damaged,
                or another sopforge process held the file for longer than ``lock_timeout``.
        """
        ensure_writable_location(self.path)
        self._location_ok = True
        self.verify()
        with self._write() as con:
            con.execute("CHECKPOINT")


def _write_pending(key: str, con: duckdb.DuckDBPyConnection) -> None:
    with _pending_lock:
        writes = _pending.pop(key, [])
        if writes:
            _writing.setdefault(key, []).extend(writes)
    if not writes:
        return
    committed = False
    try:
        with transaction(con):
            for write, _ in writes:
                write(con)
        committed = True
    finally:
        with _pending_lock:
            done = {id(w) for w in writes}
            left = [w for w in _writing.get(key, []) if id(w) not in done]
            if left:
                _writing[key] = left
            else:
                _writing.pop(key, None)
            if key in _journals:
                if not committed:
                    _journals[key].keep()  # these calls are not in the file: the next process folds them in
                elif not left and not _pending.get(key):
                    _journals[key].clear()  # every journaled call is in the file now


def _flush_all() -> None:
    for store in list(_flushers.values()):
        store._flush()


@atexit.register
def _at_exit() -> None:
    """Write every queued call, then remove the journals that hold nothing uncommitted (one whose last
    write failed stays, for the next process to fold in)."""
    global _exiting
    _exiting = True
    _flush_all()
    with _pending_lock:
        for key, open_journal in list(_journals.items()):
            if not _pending.get(key) and not _writing.get(key):
                open_journal.close()


def release_connections() -> None:
    """Write every queued call now and close kept read connections: before this process reads the
    file another way (plain ``duckdb.connect``), moves or deletes it."""
    _flush_all()
    close_idle()
