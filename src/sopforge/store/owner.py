"""Which process owns a run, and whether it is still alive.

A run is ``running`` (or ``awaiting_review``) only while some process executes it. When that
process is killed (SIGKILL, a crashed machine, a closed laptop) nothing is left to record the end,
so the run records its owner when it starts: host, pid and the process's start time (pids are
reused; the start time tells a new process with an old pid apart). The owner also refreshes a
heartbeat while it runs. A reader then decides:

- same host: the owner is alive when a process with that pid and start time exists and is not a
  zombie (checked in ``/proc``; the pid alone where there is no ``/proc``);
- another host (workers sharing ``SOPFORGE_HOME``): alive while its heartbeat is recent.

A run whose owner is gone is shown as ``interrupted`` and can be resumed without ``--force``.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

__all__ = ["HEARTBEAT_SECONDS", "STALE_AFTER", "Heartbeat", "Owner", "process_alive"]

HEARTBEAT_SECONDS = 30.0
# Three missed beats: a heartbeat write may wait out another process's lock for a while.
STALE_AFTER = timedelta(seconds=3 * HEARTBEAT_SECONDS + 30)


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of ``/proc/<pid>/stat``)."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


@dataclass(frozen=True)
class Owner:
    """A process that executes a run.

    Attributes:
        host: ``socket.gethostname()`` of the process.
        pid: Its process id.
        started: Its start time as the OS reports it (None where there is no ``/proc``).
    """

    host: str
    pid: int
    started: str | None

    @classmethod
    def current(cls) -> "Owner":
        """This process."""
        return cls(socket.gethostname(), os.getpid(), _start_time(os.getpid()))

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"

    def alive(self, heartbeat_at: datetime | None, *, now: datetime | None = None) -> bool:
        """Whether the owner still runs (see the module docstring for how it is decided)."""
        if self.host == socket.gethostname():
            return process_alive(self.pid, self.started)
        if heartbeat_at is None:
            return True  # no way to tell: never call another machine's run dead on a guess
        now = now or datetime.now(timezone.utc)
        return now - heartbeat_at <= STALE_AFTER


def process_alive(pid: int, started: str | None) -> bool:
    """A process with this pid (and, when known, this start time) exists and has not exited."""
    fields = _stat_fields(pid)
    if fields is None:
        if Path("/proc/self/stat").exists():
            return False  # /proc works here, and this pid is not in it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by someone else
        return True
    if fields[0] in ("Z", "X"):  # exited; only its parent has not collected it yet
        return False
    return started is None or (len(fields) > 19 and fields[19] == started)


class Heartbeat:
    """Refresh a run's heartbeat every ``interval`` seconds from a daemon thread until stopped.

    Args:
        beat: Called once per interval (``Store.heartbeat`` bound to the run); its errors are
            ignored, since a missed beat is harmless and the run must not fail for it.
        interval: Seconds between beats.
    """

    def __init__(self, beat, interval: float = HEARTBEAT_SECONDS):
        self._beat = beat
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sopforge-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._beat()
            except Exception:  # noqa: BLE001 - see the class docstring
                pass
