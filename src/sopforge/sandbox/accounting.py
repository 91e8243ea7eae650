"""What the parent observes of a sandbox process from outside, and the cgroup that caps its tasks.

Everything here is read by the parent from the kernel (``/proc/<pid>/...``, the cgroup files),
never reported by the child, whose process user code shares: so user code cannot forge it.

* :class:`TaskGroup`: a cgroup v1 ``pids`` group per sandbox (where the host offers one to
  this process, i.e. sopforge runs as root with the controller mounted). The sandbox's
  processes *and threads* count against ``pids.max``; a refused ``fork``/``clone`` is counted
  in ``pids.events``, which the parent turns into a violation. The bubblewrap process is born
  inside it: the spawning thread joins the group for the instant of the ``fork`` (cgroup v1
  moves single threads) and leaves it at once, so there is no window in which the sandbox runs
  outside its cap.
* :func:`observe`: the child's credentials, capabilities, ``no_new_privs``, seccomp mode,
  namespaces and limits as the host kernel sees them, to confirm the boundary before user code
  is let run.
* :func:`usage`: peak resident memory (``VmHWM``) and CPU time of the child itself, not of
  bubblewrap (whose RSS at exec is a copy of this process's).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["BASE_TASKS", "Observed", "TaskGroup", "find_child", "observe", "usage"]

T = TypeVar("T")
# Tasks of a sandbox before user code: bubblewrap outside, its init inside, the interpreter.
BASE_TASKS = 3
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_counter = itertools.count()
_NAMESPACES = ("user", "pid", "mnt", "net", "ipc", "uts")


def _pids_mount() -> str | None:
    """Where the cgroup v1 ``pids`` hierarchy is mounted, or None."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(tail) >= 3 and tail[0] == "cgroup" and "pids" in tail[2].split(","):
                    return fields[4]
    except OSError:
        return None
    return None


def _own_group(mount: str) -> str | None:
    """This thread's current pids cgroup, as a path under ``mount``."""
    try:
        with open("/proc/thread-self/cgroup", encoding="utf-8") as handle:
            for line in handle:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3 and "pids" in parts[1].split(","):
                    return os.path.join(mount, parts[2].lstrip("/"))
    except OSError:
        return None
    return None


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


class TaskGroup:
    """One ``pids`` cgroup holding exactly one sandbox's processes and threads."""

    def __init__(self, path: str, home: str):
        self.path, self.home = path, home

    @classmethod
    def create(cls) -> TaskGroup | None:
        """A new group under this process's own, or None where the host offers none to us."""
        if os.geteuid() != 0:
            return None
        mount = _pids_mount()
        home = _own_group(mount) if mount else None
        if not home or not os.path.isfile(os.path.join(home, "tasks")):
            return None
        path = os.path.join(home, f"sopforge-sandbox-{os.getpid()}-{next(_counter)}")
        try:
            os.mkdir(path, 0o700)
            _write(os.path.join(path, "pids.max"), str(BASE_TASKS + 1))  # + the spawning thread
        except OSError:
            return None
        return cls(path, home)

    def spawn(self, start: Callable[[], T]) -> T:
        """Run ``start`` (which forks the sandbox) from inside the group, then leave it."""
        tid = str(threading.get_native_id())
        _write(os.path.join(self.path, "tasks"), tid)
        try:
            return start()
        finally:
            _write(os.path.join(self.home, "tasks"), tid)

    def cap(self, tasks: int) -> None:
        """Set ``pids.max``; tasks beyond it are refused by the kernel and counted."""
        _write(os.path.join(self.path, "pids.max"), str(tasks))

    def refused(self) -> int:
        """How many times a fork or clone was refused for exceeding the cap."""
        try:
            with open(os.path.join(self.path, "pids.events"), encoding="ascii") as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "max":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def close(self, timeout: float = 2.0) -> None:
        """Remove the group once its tasks are gone (they are killed with the sandbox)."""
        end = time.monotonic() + timeout
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= end:
                    return  # left behind empty-to-be; harmless, and named after this process
                time.sleep(0.02)


@dataclass
class Observed:
    """The child as the host kernel shows it."""

    pid: int
    uids: list[int] = field(default_factory=list)
    gids: list[int] = field(default_factory=list)
    caps: dict[str, int] = field(default_factory=dict)
    no_new_privs: bool = False
    seccomp: int = 0
    namespaces: dict[str, str | None] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)

    def problems(self, *, host_uid: int, parent_ns: dict[str, str | None], fresh: tuple[str, ...],
                 seccomp: bool) -> list[str]:
        """What makes this child short of the required boundary (empty when it is all there)."""
        out = []
        if not self.uids or set(self.uids) != {host_uid} or set(self.gids) != {host_uid} or host_uid == 0:
            out.append(f"host uid/gid {self.uids}/{self.gids}, expected {host_uid}")
        out += [f"{name} is {value:#x}" for name, value in sorted(self.caps.items()) if value]
        if len(self.caps) < 5:
            out.append("capabilities could not be read")
        if not self.no_new_privs:
            out.append("no_new_privs is not set")
        if seccomp and self.seccomp != 2:
            out.append("the seccomp filter is not loaded")
        out += [f"the {name} namespace is the parent's" for name in fresh
                if not self.namespaces.get(name) or self.namespaces.get(name) == parent_ns.get(name)]
        return out


def observe(pid: int) -> Observed | None:
    """Read the child's credentials, capabilities, seccomp, namespaces and limits; None if it is gone."""
    seen = Observed(pid=pid)
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                value = value.strip()
                if key == "Uid":
                    seen.uids = [int(v) for v in value.split()]
                elif key == "Gid":
                    seen.gids = [int(v) for v in value.split()]
                elif key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                    seen.caps[key] = int(value, 16)
                elif key == "NoNewPrivs":
                    seen.no_new_privs = value == "1"
                elif key == "Seccomp":
                    seen.seccomp = int(value)
        with open(f"/proc/{pid}/limits", encoding="ascii", errors="replace") as handle:
            for line in handle.readlines()[1:]:
                seen.limits[line[:26].strip()] = line[26:47].strip()
        for name in _NAMESPACES:
            try:
                seen.namespaces[name] = os.readlink(f"/proc/{pid}/ns/{name}")
            except OSError:
                seen.namespaces[name] = None
    except (OSError, ValueError):
        return None
    return seen


def usage(pid: int) -> tuple[int, float] | None:
    """(peak resident bytes, CPU seconds) of a live process, or None once it has exited."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            hwm = next((int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:")), None)
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime
    except (OSError, ValueError, IndexError):
        return None
    return (hwm, cpu) if hwm is not None else None


def find_child(init_pid: int) -> int | None:
    """The host pid of the process bubblewrap's init started (the interpreter), or None yet."""
    candidates = itertools.chain(range(init_pid + 1, init_pid + 8), _all_pids())
    for pid in candidates:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(init_pid):
            return pid
    return None


def _all_pids():
    try:
        return (int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return iter(())
