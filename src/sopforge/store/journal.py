"""The ledger's files beside the database: a write-ahead journal of paid calls, and in-flight claims.

Both live in ``<database>.ledger/`` (``sopforge.duckdb.ledger/``):

- ``journal-<pid>-<start>-<host>.jsonl``: every call this process recorded, one JSON line each, appended
  before the call is queued for the database (``sopforge.store.base`` writes calls behind, batched, within
  half a second). A SIGKILL in that half second used to lose the record of calls already paid for: the
  resumed run asked them again and ``llm_calls`` and ``--max-cost`` never saw the first payment. A line
  appended with one ``write`` is in the kernel's page cache at once and survives the process; the journal
  is emptied once its calls are committed, removed when the process exits, and a journal whose process is
  gone is *folded* into ``llm_calls`` (idempotently: call ids are primary keys) by the next process that
  opens the store.
- ``claim-<request hash>``: a call in flight. Created exclusively before a call is sent and removed when it
  ends, so a second process asking the same prompt (a resumed run, a concurrent run of the same theme)
  waits for the first one's answer instead of paying for it again. A claim whose process is gone, or that
  is older than the caller's longest possible call, is taken over.
- ``answered.log``: the request hash of every answer any process recorded, one line each, appended before
  the call's claim is released. A process reads the set of answered hashes once; a concurrent run of the
  same theme that answered a prompt *after* that read, and released its claim before this process asked,
  was invisible to it, so this process paid again (issue 21: 40 of 190 calls of a concurrent pair). Before
  sending, a process reads the log past where it last stopped (a new reader starts 64 KiB before the end).
  It grows by one 65-byte line per answer and is never rewritten (100,000 answers: 6.5 MB, of which each
  process reads only what is new).
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from sopforge.llm.types import LLMCallRecord

from .owner import STALE_AFTER, Owner, process_alive

__all__ = ["AnsweredLog", "Journal", "announce_answer", "claim_file", "fold_journals", "has_orphans",
           "journaled_answer", "ledger_dir", "remove_folded"]

_JOURNAL_RE = re.compile(r"^journal-(\d+)-(\d+)-(.*)\.jsonl$")
_POLL_SECONDS = (0.02, 0.05, 0.1, 0.2)


def ledger_dir(db_path: Path) -> Path:
    """The folder of journals and claims that belongs to the database file ``db_path``."""
    return db_path.with_name(db_path.name + ".ledger")


def _owner_name(owner: Owner) -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "_", owner.host)
    return f"{owner.pid}-{owner.started or 0}-{host}"


def _gone(pid: int, started: str | None, host: str, mtime: float) -> bool:
    """Whether the process that wrote a journal or a claim has ended (another host: no sign of life
    for ``STALE_AFTER``, since its pid cannot be checked from here)."""
    if host == re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()):
        return not process_alive(pid, None if started in (None, "0") else started)
    return time.time() - mtime > STALE_AFTER.total_seconds()


class Journal:
    """This process's journal for one database (one instance per database file and process).

    Appends happen under the caller's lock (the write-behind queue's), together with queueing the
    call, so :meth:`clear` (called under the same lock once the queue is empty) never drops a line
    whose call is not committed yet.
    """

    def __init__(self, db_path: Path):
        self.folder = ledger_dir(db_path)
        self.path: Path | None = None
        self._fd: int | None = None
        self._pid = os.getpid()
        self._dirty = False
        self._kept = False

    def append(self, record: LLMCallRecord) -> None:
        """Write one call as one line, with one ``write`` (whole, or not at all, for other readers)."""
        if self._fd is None or self._pid != os.getpid():  # first call, or a forked child: its own file
            self.folder.mkdir(parents=True, exist_ok=True)
            self.path = self.folder / f"journal-{_owner_name(Owner.current())}.jsonl"
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        os.write(self._fd, (record.model_dump_json() + "\n").encode("utf-8"))
        self._dirty = True

    def keep(self) -> None:
        """A write of journaled calls failed: keep every line from now on, for the next process to fold."""
        self._kept = True

    def clear(self) -> None:
        """Every journaled call is committed: start the journal afresh."""
        if self._fd is not None and self._dirty and not self._kept:
            os.ftruncate(self._fd, 0)
            self._dirty = False

    def close(self) -> None:
        """Remove the journal (at exit, after the last flush committed everything)."""
        if self._fd is None:
            return
        dirty, self._dirty = self._dirty or self._kept, False
        os.close(self._fd)
        self._fd = None
        if not dirty and self.path is not None:
            self.path.unlink(missing_ok=True)


def _records(path: Path) -> Iterator[LLMCallRecord]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return
    for line in text.splitlines():
        try:
            yield LLMCallRecord.model_validate_json(line)
        except ValueError:
            continue  # a line cut short by a machine crash: the call was never acknowledged either


def _orphans(folder: Path) -> list[Path]:
    """Journals whose process is gone."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        match = _JOURNAL_RE.match(name)
        if match is None:
            continue
        path = folder / name
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if _gone(int(match[1]), match[2], match[3], mtime):
            found.append(path)
    return found


def has_orphans(db_path: Path) -> bool:
    """Whether a journal of a process that is gone waits to be folded into the database."""
    return bool(_orphans(ledger_dir(db_path)))


def fold_journals(con: duckdb.DuckDBPyConnection, db_path: Path,
                  insert: Callable[[duckdb.DuckDBPyConnection, LLMCallRecord], None]) -> list[Path]:
    """Insert the calls of every orphaned journal into ``llm_calls`` (``insert(con, record)``) and return
    those journals, for :func:`remove_folded` once the caller has committed.

    A crash before the files are removed only folds them again: inserting a call id that is already
    stored keeps the stored row.
    """
    orphans = _orphans(ledger_dir(db_path))
    for path in orphans:
        for record in _records(path):
            insert(con, record)
    return orphans


def remove_folded(paths: list[Path]) -> None:
    """Remove folded journals, and the claims that processes which are gone left behind."""
    for path in paths:
        path.unlink(missing_ok=True)
    if paths:
        _remove_dead_claims(paths[0].parent)


def journaled_answer(db_path: Path, request_hash: str) -> LLMCallRecord | None:
    """The newest successful call with this hash in any process's journal (answered, not committed yet)."""
    folder = ledger_dir(db_path)
    try:
        names = [n for n in os.listdir(folder) if _JOURNAL_RE.match(n)]
    except OSError:
        return None
    best: LLMCallRecord | None = None
    for name in names:
        for record in _records(folder / name):
            if record.request_hash == request_hash and record.error is None and record.response is not None \
                    and (best is None or record.created_at > best.created_at):
                best = record
    return best


# --- claims on calls in flight ------------------------------------------------------------------

_held: set[Path] = set()
_held_lock = threading.Lock()


_UNWRITTEN_CLAIM_SECONDS = 5.0  # a claim still empty after this long: its process died between create and write


def _read_claim(path: Path) -> tuple[dict, float] | None:
    try:
        text, mtime = path.read_text(encoding="utf-8"), path.stat().st_mtime
    except OSError:
        return None
    if not text:
        # Created, its owner not written yet: read as "no owner" it was taken over, and both processes paid
        # (a concurrent pair of runs, issue 21). Only an old empty claim is abandoned.
        return ({}, mtime) if time.time() - mtime > _UNWRITTEN_CLAIM_SECONDS else None
    try:
        return json.loads(text), mtime
    except ValueError:
        return None


def _claim_gone(path: Path, max_age: float) -> bool:
    """The claim's process ended, or the claim outlived the longest call its process could make."""
    found = _read_claim(path)
    if found is None:
        return False  # being written or just removed: look again
    owner, mtime = found
    if time.time() - mtime > max_age:
        return True
    pid, host = owner.get("pid"), owner.get("host")
    if not isinstance(pid, int) or not isinstance(host, str):
        return True
    return _gone(pid, owner.get("started"), re.sub(r"[^A-Za-z0-9._-]", "_", host), mtime)


def _remove_dead_claims(folder: Path) -> None:
    try:
        names = [n for n in os.listdir(folder) if n.startswith("claim-")]
    except OSError:
        return
    for name in names:
        path = folder / name
        if path not in _held and _claim_gone(path, max_age=float("inf")):
            path.unlink(missing_ok=True)


@contextmanager
def claim_file(db_path: Path, request_hash: str, *, max_wait: float) -> Iterator[bool]:
    """Hold the claim on ``request_hash`` for the block; yield whether another holder was waited for.

    Waits while another live process (or another thread of this one) holds it, at most ``max_wait``
    seconds, after which the claim counts as abandoned and is taken over.
    """
    folder = ledger_dir(db_path)
    path = folder / f"claim-{request_hash}"
    owner = Owner.current()
    body = json.dumps({"host": owner.host, "pid": owner.pid, "started": owner.started,
                       "at": datetime.now(timezone.utc).isoformat()})
    waited = False
    deadline = time.monotonic() + max_wait
    polls = 0
    while True:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            waited = True
            if time.monotonic() > deadline or _claim_gone(path, max_age=max_wait):
                path.unlink(missing_ok=True)  # taken over: its holder is gone or stuck
                continue
            time.sleep(_POLL_SECONDS[min(polls, len(_POLL_SECONDS) - 1)])
            polls += 1
            continue
        except OSError:
            yield False  # the folder cannot be written: no claim, as before claims existed
            return
        try:
            os.write(fd, body.encode("utf-8"))
        finally:
            os.close(fd)
        break
    with _held_lock:
        _held.add(path)
    try:
        yield waited
    finally:
        with _held_lock:
            _held.discard(path)
        path.unlink(missing_ok=True)


# --- answers other processes recorded ------------------------------------------------------------

def _answered_log_path(db_path: Path) -> Path:
    return ledger_dir(db_path) / "answered.log"


def announce_answer(db_path: Path, request_hash: str) -> None:
    """Tell every other process that ``request_hash`` has an answer now (one line, one ``write``)."""
    path = _answered_log_path(db_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return  # a read-only home: no other process can record answers in it either
    try:
        os.write(fd, (request_hash + "\n").encode("ascii"))
    finally:
        os.close(fd)


ANSWERED_LOOKBACK_BYTES = 65536


class AnsweredLog:
    """What one process has read of ``answered.log``.

    Created just before the process reads the answered hashes from the database (each ``Store`` does, and a run
    makes several), so every answer recorded after that read, or announced shortly before it and not committed
    yet, is seen by :meth:`announced`.
    """

    def __init__(self, db_path: Path):
        self.path = _answered_log_path(db_path)
        self._file, size = self._stat()
        # Reading starts a little before the end: an answer announced a moment ago may not be committed yet (the
        # write-behind), so the database read that follows would miss it too. 64 KiB is the last ~1,000 answers.
        self._offset = max(0, size - ANSWERED_LOOKBACK_BYTES - 1)  # one byte early: the first whole line is read
        self._mid_line = self._offset > 0
        self._seen: set[str] = set()

    def _stat(self) -> tuple[tuple[int, int] | None, int]:
        try:
            found = self.path.stat()
        except OSError:
            return None, 0
        return (found.st_dev, found.st_ino), found.st_size

    def announced(self, request_hash: str) -> bool:
        """Whether an answer to ``request_hash`` was announced since shortly before this log was created."""
        self._read_new()
        return request_hash in self._seen

    def _read_new(self) -> None:
        file, size = self._stat()
        if file != self._file or size < self._offset:
            self._file, self._offset, self._mid_line = file, 0, False  # removed and begun again
        if size == self._offset:
            return
        try:
            with open(self.path, "rb") as log:
                log.seek(self._offset)
                chunk = log.read(size - self._offset)
        except OSError:
            return
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a line being written is read next time
        self._offset += len(whole)
        lines = whole.decode("ascii", "replace").split("\n")
        if self._mid_line and whole:
            lines, self._mid_line = lines[1:], False  # up to the first line break: the lookback began inside a line
        self._seen.update(line for line in lines if line)
