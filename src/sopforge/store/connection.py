"""Opening the DuckDB file: short-lived connections, lock retries and clear path errors.

DuckDB lets one process hold a file read-write, or any number of processes hold it
read-only, never both. sopforge therefore opens a connection per operation and closes it
at once, and a process that finds the file locked retries with backoff for a while before
telling the user which file is held. Within one process DuckDB refuses to open the same
file read-only and read-write at the same time, so operations on one file are serialised
by a per-process lock (flows may call the store from several threads).

Opening the file costs 15-30 ms, a read a fraction of a millisecond, and a reused stage or a
``sopforge show`` makes dozens of reads in a row. A process that calls :func:`linger_reads` (the
CLI does, at start) therefore keeps its last read-only connection open for ``LINGER_SECONDS``
after a read and hands it to the next read: a burst of reads opens the file once. A write closes
it first (DuckDB would refuse the read-write open), it is never kept longer than ``MAX_AGE_SECONDS``
after it was opened (another process waiting to write gets its turn), and it is closed when idle.
Processes that do not opt in (library use, tests that open the file themselves) are unchanged.

Every connection is also covered, from before DuckDB opens the file until after it has closed it, by
an advisory lock on ``<database>.lock`` (``flock``: shared for reading, exclusive for writing). DuckDB's own
lock alone lost commits: several processes opening and closing one file under load (one through a link
to its folder, as a deployment run with a ``home`` parameter does) found a commit DuckDB had acknowledged
missing from the file (``benchmarks/store_lost_writes.py``, DuckDB 2.0, 2 cores: plain DuckDB in 3 of 51
trials, and once a read past the end of the file; once in CI, a run's stage attempt). An explicit
``CHECKPOINT`` before each close did not stop it (1 of 90); with this lock around each connection no trial lost
anything (0 of 50, and 0 of 90 in the experiment the script grew from). A reader of a folder it cannot
write (a read-only copy) takes no lock: nothing can write there.

A connection is a cursor on the process's one DuckDB instance with the file attached (``instance.py``).
"""

from __future__ import annotations

import atexit
import fcntl
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
from sopforge.store.instance import attach as _attach
from sopforge.store.instance import detach_if_unused as _detach_if_unused

_FIX = "set SOPFORGE_HOME to a writable folder"

_process_locks: dict[str, threading.RLock] = {}
_process_locks_guard = threading.Lock()

LINGER_SECONDS = 0.25
MAX_AGE_SECONDS = 2.0
_lingering = False
# file key -> (idle read-only connection, when it was opened, when it was last released); guarded by
# the file's process lock. An idle connection keeps its file lock (below) until it is closed.
_idle: dict[str, tuple[duckdb.DuckDBPyConnection, float, float]] = {}
_closer: threading.Thread | None = None


def file_key(path: Path) -> str:
    """One name per database file, however it is reached (a link to its folder, ``..``, a relative path): the
    key of this process's lock, kept connection, write-behind queue and journal for that file."""
    return os.path.realpath(path)


def _process_lock(path: Path) -> threading.RLock:
    key = file_key(path)
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.RLock())


class _FileLock:
    """The advisory lock on ``<database>.lock`` held by this process (see the module doc).

    Waiting is fair: a process first takes ``<database>.queue`` exclusively and holds it only while it
    waits for the lock itself. A writer that closes and at once reopens (a run saving one artifact after
    another) therefore queues behind a reader that was already waiting, instead of taking the lock again
    before the reader's next try (a reader polling a plain lock starved for 20 s in a test).

    Used under the file's process lock only, so one thread at a time; a thread that opens a second
    connection while it holds one (or while a kept read connection holds it) shares the lock it has.
    """

    def __init__(self) -> None:
        self.fd: int | None = None
        self.holders = 0

    def acquire(self, path: Path, *, exclusive: bool, deadline: float, lock_timeout: float) -> None:
        if self.holders:
            self.holders += 1
            return
        try:
            queue = os.open(path.with_name(path.name + ".queue"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            # A folder this process cannot write (a read-only copy: no writer can be there either), or a
            # path DuckDB will refuse in a moment with the error its caller turns into the user's message.
            self.holders = 1
            return
        fd = None
        try:
            _flock(queue, fcntl.LOCK_EX, path, deadline, lock_timeout)
            fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, path, deadline, lock_timeout)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        finally:
            os.close(queue)  # the next waiter's turn
        self.fd, self.holders = fd, 1

    def release(self) -> None:
        self.holders -= 1
        if self.holders == 0 and self.fd is not None:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None


def _flock(fd: int, mode: int, path: Path, deadline: float, lock_timeout: float) -> None:
    """Take ``flock(fd, mode)``, retrying with backoff until ``deadline``."""
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            delay = _back_off(delay, 0.1, path, deadline, lock_timeout)


def _back_off(delay: float, most: float, path: Path, deadline: float, lock_timeout: float) -> float:
    """Sleep about ``delay`` (never past ``deadline``) and return the next, doubled up to ``most``.

    Raises:
        UserError: ``deadline`` has passed: the file is in use by another process.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _in_use(path, lock_timeout)
    # Jitter keeps two processes that collided from colliding again in step.
    time.sleep(min(remaining, delay * (0.5 + random.random())))
    return min(delay * 2, most)


_file_locks: dict[str, _FileLock] = {}  # file key -> this process's lock on it; guarded by the process lock


def _close(key: str, con: duckdb.DuckDBPyConnection) -> None:
    """Close a connection and detach its file when it was the last one on it, then give up the file lock."""
    try:
        con.close()
        _detach_if_unused(key)
    finally:
        _file_locks[key].release()


def _in_use(path: Path, lock_timeout: float) -> UserError:
    return UserError(f"{path} is in use by another sopforge process (waited {lock_timeout:g}s "
                     f"for its lock); wait for it to finish or stop it, then retry")


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
        reason = _obstacle(path.parent) or f"cannot create folder {path.parent} ({exc.strerror or exc})"
        raise unwritable(path, reason) from exc
    try:
        # A real file write: os.access() says yes to root on read-only mounts.
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".sopforge-probe-"):
            pass
    except OSError as exc:
        raise unwritable(path, f"folder {path.parent} is not writable ({exc.strerror or exc})") from exc
    if path.exists() and not os.access(path, os.W_OK):
        raise unwritable(path, "the file is read-only")


def _obstacle(folder: Path) -> str | None:
    # mkdir's own "File exists" does not say which part of the path is in the way: a file, or a
    # link to something that is gone (is_dir() is false for it, so mkdir tries to create it).
    for part in (folder, *folder.parents):
        if part.is_symlink() and not part.exists():
            return f"{part} is a link to {os.readlink(part)}, which does not exist"
        if part.exists() and not part.is_dir():
            return f"{part} is a file, not a folder"
    return None


@contextmanager
def open_connection(path: Path, *, read_only: bool, lock_timeout: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a connection to ``path`` and close it on exit, waiting out other processes' locks.

    Args:
        path: The DuckDB file.
        read_only: Open without taking the write lock (the file must exist).
        lock_timeout: Seconds to keep retrying while another process holds the file.

    Raises:
        UserError: The file stayed locked for ``lock_timeout`` seconds, or it cannot be opened
            for a reason the user must fix (a directory, a missing or unwritable folder).
    """
    key = file_key(path)
    with _process_lock(path):
        idle = _idle.pop(key, None)
        if idle is not None and not read_only:
            _close(key, idle[0])  # DuckDB does not open one file read-only and read-write in one process
            idle = None
        con, opened = idle[:2] if idle is not None else (None, time.monotonic())
        if con is None:
            deadline = time.monotonic() + max(lock_timeout, 0.0)
            lock = _file_locks.setdefault(key, _FileLock())
            lock.acquire(path, exclusive=not read_only, deadline=deadline, lock_timeout=lock_timeout)
            try:
                con = _connect_with_retry(key, path, read_only=read_only, deadline=deadline,
                                          lock_timeout=lock_timeout)
            except BaseException:
                lock.release()
                raise
        keep = False
        try:
            yield con
            keep = _lingering and read_only and time.monotonic() - opened < MAX_AGE_SECONDS
        except duckdb.Error as exc:
            # A damaged block is often found only when a query reads it, not when the file opens.
            friendly = corrupt_store(path, exc)
            if friendly is None:
                raise
            raise friendly from exc
        finally:
            if keep:
                _idle[key] = (con, opened, time.monotonic())
            else:
                _close(key, con)


def linger_reads(enabled: bool = True) -> None:
    """Let this process keep a read-only connection open between reads (see the module doc);
    ``enabled=False`` goes back to a connection per read and closes the kept ones."""
    global _lingering, _closer
    if not enabled:
        _lingering = False
        close_idle()
        return
    with _process_locks_guard:
        _lingering = True
        if _closer is None:
            _closer = threading.Thread(target=_close_idle_forever, name="sopforge-store-closer", daemon=True)
            _closer.start()
            # At exit: no connection is kept any more, and the kept ones are closed. A read made by a later exit
            # hook would otherwise leave one for the closer thread, which then closes it inside DuckDB while the
            # interpreter finalizes: the thread is unwound in C++ and the process aborts ("FATAL: exception not
            # rethrown", once in CI), and a connection left open is reported as a leak.
            atexit.register(linger_reads, False)


def close_idle(min_idle: float = 0.0) -> None:
    """Close every kept read-only connection idle for at least ``min_idle`` seconds (all by default):
    before the file is read another way, moved or deleted."""
    for key in list(_idle):
        with _process_lock(Path(key)):
            idle = _idle.get(key)
            if idle is not None and time.monotonic() - idle[2] >= min_idle:
                del _idle[key]
                _close(key, idle[0])


def _close_idle_forever() -> None:
    while True:
        time.sleep(LINGER_SECONDS / 2)
        close_idle(LINGER_SECONDS)


def read_every_block(con: duckdb.DuckDBPyConnection) -> None:
    """Read every value of every table once, so DuckDB checks the checksum of each block that holds data.

    DuckDB verifies a block only when a query reads it: a command that never reads the damaged table
    (a run that reuses its dataset, ``runs``) would otherwise report success on a damaged file, and a
    run would meet the damage only when a stage happens to read it. Hashing each column reads it all,
    and returns one row per table. Raises ``duckdb.Error`` (mapped by :func:`open_connection`).
    """
    tables = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                         "AND NOT internal ORDER BY table_name").fetchall()
    for (table,) in tables:
        quoted = '"' + table.replace('"', '""') + '"'
        con.execute(f"SELECT bit_xor(hash(COLUMNS(*))) FROM {quoted}").fetchall()


def _connect_with_retry(key: str, path: Path, *, read_only: bool, deadline: float,
                        lock_timeout: float) -> duckdb.DuckDBPyConnection:
    # Attached by its one name (file_key), so one process's connections through two paths are one DuckDB
    # database; `path`, as the user gave it, is what errors name. DuckDB's lock is still met when a
    # process that is not sopforge (the duckdb CLI) holds the file.
    delay = 0.02
    while True:
        try:
            return _attach(key, read_only=read_only)
        except duckdb.Error as exc:  # IOException for most; a failed checksum is a bare duckdb.Error
            if not is_lock_conflict(exc):
                friendly = _open_error(path, exc, read_only=read_only)
                if friendly is None:
                    raise
                raise friendly from exc
            delay = _back_off(delay, 0.5, path, deadline, lock_timeout)


# What DuckDB says about a damaged file, and what that means to a user.
_CORRUPTION = (
    ("not a valid DuckDB database file", "not a DuckDB file: its header is damaged or it was overwritten"),
    ("Corrupt database file", "a block fails its checksum"),
    ("does not match stored checksum", "a block fails its checksum"),
    ("Could not read enough bytes", "truncated: part of the file is missing"),
)


def corrupt_store(path: Path, exc: BaseException) -> UserError | None:
    """The one-line error for a database file DuckDB cannot read because it is damaged.

    Returns None when ``exc`` is not about a damaged file (a lock, a bad query...).
    """
    text = str(exc)
    for marker, reason in _CORRUPTION:
        if marker in text:
            aside = path.with_name(path.name + ".corrupt")
            return UserError(f"the sopforge database {path} is damaged ({reason}): restore it from a backup, "
                             f"or move it aside to start a new, empty store (mv {path} {aside})")
    return None


def _open_error(path: Path, exc: duckdb.Error, *, read_only: bool) -> UserError | None:
    corrupt = corrupt_store(path, exc)
    if corrupt is not None:
        return corrupt
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
