"""Opening the DuckDB file: short-lived connections, lock retries and clear path errors.

DuckDB lets one process hold a file read-write, or any number of processes hold it
read-only, never both. sopforge therefore holds a connection only briefly, and a process that
finds the file locked retries (every few tens of milliseconds) for a while before telling the
user which file is held. Within one process DuckDB refuses to open the same file read-only and
read-write at the same time, so operations on one file are serialised by a per-process lock
(flows may call the store from several threads).

Opening the file costs 30-40 ms (DuckDB loads its catalog and indexes), which a run with many
concurrent LLM calls would pay twice per call (cache lookup, ledger record). So a connection is
kept for the operations that follow within a short burst: closed once idle for ``IDLE_SECONDS``
and at the latest ``HOLD_SECONDS`` after it was opened, after which this process leaves the file
alone for ``YIELD_SECONDS`` so a CLI in another process gets its turn.
"""

from __future__ import annotations

import atexit
import os
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from sopforge.errors import UserError

_FIX = "set SOPFORGE_HOME to a writable folder"

_process_locks: dict[str, threading.RLock] = {}
_process_locks_guard = threading.Lock()

IDLE_SECONDS = 0.3
HOLD_SECONDS = 1.0
YIELD_SECONDS = 0.05
RETRY_DELAY_CAP = 0.05  # poll a held file often: the holder releases it within HOLD_SECONDS


class _Held:
    """A connection kept open for a burst of operations on one file."""

    def __init__(self, con: duckdb.DuckDBPyConnection, read_only: bool):
        self.con, self.read_only = con, read_only
        self.opened = self.used = time.monotonic()


_held: dict[str, _Held] = {}
_released_at: dict[str, float] = {}
_janitor: threading.Thread | None = None
_exiting = False


def _process_lock(path: Path) -> threading.RLock:
    key = os.path.abspath(path)
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.RLock())


def is_lock_conflict(exc: BaseException) -> bool:
    """True when DuckDB failed because another process holds the file's lock."""
    text = str(exc)
    return isinstance(exc, duckdb.IOException) and (
        "Could not set lock" in text or "Conflicting lock" in text)


def unwritable(path: Path, reason: str) -> UserError:
    """The one-line error for a database path that cannot be written."""
    return UserError(f"cannot write the sopforge database at {path}: {reason}; {_FIX}")


def ensure_writable_location(path: Path) -> None:
    """Create the parent folder and prove it accepts files, before DuckDB tries.

    DuckDB's own errors for these cases are accurate but do not say what to do, and a
    read-only folder may only fail later, when the write-ahead log is created.

    Raises:
        UserError: The parent cannot be created or written, or ``path`` is a directory.
    """
    if path.is_dir():
        raise unwritable(path, "it is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(path, f"cannot create folder {path.parent} ({exc.strerror or exc})") from exc
    try:
        # A real file write: os.access() says yes to root on read-only mounts.
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".sopforge-probe-"):
            pass
    except OSError as exc:
        raise unwritable(path, f"folder {path.parent} is not writable ({exc.strerror or exc})") from exc
    if path.exists() and not os.access(path, os.W_OK):
        raise unwritable(path, "the file is read-only")


@contextmanager
def open_connection(path: Path, *, read_only: bool, lock_timeout: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a connection to ``path``, waiting out other processes' locks.

    The connection may be one kept from an operation a moment ago (see the module docstring);
    a read-write one also serves reads.

    Args:
        path: The DuckDB file.
        read_only: Open without taking the write lock (the file must exist).
        lock_timeout: Seconds to keep retrying while another process holds the file.

    Raises:
        UserError: The file stayed locked for ``lock_timeout`` seconds, or it cannot be opened
            for a reason the user must fix (a directory, a missing or unwritable folder).
    """
    key = os.path.abspath(path)
    with _process_lock(path):
        held = _held.get(key)
        now = time.monotonic()
        if held is not None and (held.read_only and not read_only or now - held.opened > HOLD_SECONDS):
            _release(key)
            held = None
        if held is None:
            pause = _released_at.get(key, 0.0) + YIELD_SECONDS - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # another process waiting for the file gets it now
            held = _Held(_connect_with_retry(path, read_only=read_only, lock_timeout=lock_timeout), read_only)
            _held[key] = held
            _start_janitor()
        try:
            yield held.con
        except BaseException:
            _release(key)  # never hand a connection in an unknown state to the next operation
            raise
        held.used = time.monotonic()


def _release(key: str) -> None:
    held = _held.pop(key, None)
    if held is not None:
        try:
            held.con.close()
        finally:
            _released_at[key] = time.monotonic()


def release_all() -> None:
    """Close every kept connection now (tests that delete or move the file, and process exit)."""
    for key in list(_held):
        with _process_lock(Path(key)):  # waits for an operation (or the janitor) using it
            _release(key)


def _at_exit() -> None:
    # Daemon threads are frozen at interpreter shutdown; one frozen inside DuckDB aborts the
    # process. So the janitor stops first, then every connection is closed under its lock.
    global _exiting
    _exiting = True
    if _janitor is not None:
        _janitor.join(timeout=2)
    release_all()


def _start_janitor() -> None:
    global _janitor
    if _janitor is None or not _janitor.is_alive():
        _janitor = threading.Thread(target=_close_idle, name="sopforge-duckdb-janitor", daemon=True)
        _janitor.start()


def _close_idle() -> None:
    while _held and not _exiting:
        time.sleep(IDLE_SECONDS / 2)
        for key, held in list(_held.items()):
            now = time.monotonic()
            if now - held.used > IDLE_SECONDS or now - held.opened > HOLD_SECONDS:
                lock = _process_locks.get(key)
                if lock is not None and lock.acquire(blocking=False):
                    try:
                        if _held.get(key) is held:
                            _release(key)
                    finally:
                        lock.release()


atexit.register(_at_exit)


def _connect_with_retry(path: Path, *, read_only: bool, lock_timeout: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + max(lock_timeout, 0.0)
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if not is_lock_conflict(exc):
                friendly = _open_error(path, exc, read_only=read_only)
                if friendly is None:
                    raise
                raise friendly from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UserError(
                    f"{path} is in use by another sopforge process (waited {lock_timeout:g}s "
                    f"for its lock); wait for it to finish or stop it, then retry") from exc
            # Jitter keeps a reader and a writer that collided from colliding again in step.
            time.sleep(min(remaining, delay * (0.5 + random.random())))
            delay = min(delay * 2, RETRY_DELAY_CAP)


def _open_error(path: Path, exc: duckdb.IOException, *, read_only: bool) -> UserError | None:
    text = str(exc)
    if read_only and "does not exist" in text:
        return UserError(f"no sopforge database at {path}; run a generation first or {_FIX} "
                         f"pointing at an existing one")
    for marker, reason in (("Is a directory", "it is a directory"),
                           ("Not a directory", "a parent in the path is a file"),
                           ("Permission denied", "permission denied"),
                           ("Read-only file system", "the file system is read-only")):
        if marker in text:
            return unwritable(path, reason)
    return None
