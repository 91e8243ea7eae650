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
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["BASE_TASKS", "Observed", "TaskGroup", "observe", "usage"]

T = TypeVar("T")
# Tasks of a sandbox before user code: bubblewrap outside, the interpreter inside (--as-pid-1).
BASE_TASKS = 2
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_counter = itertools.count()
_MAX_GROUPS = 64  # per process; beyond, a group is reused before its last run's charge is gone
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


def _read_int(path: str, key: str | None = None) -> int:
    try:
        with open(path, encoding="ascii") as handle:
            for line in handle:
                name, _, value = line.strip().partition(" ")
                if key is None:
                    return int(name)
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


class _Spawner(threading.Thread):
    """A thread that lives in one pids cgroup and forks sandboxes from there.

    Moving a thread between cgroups takes the kernel's cgroup-wide thread-group lock, which on a
    busy machine waits for every fork in progress (milliseconds each time); a thread that joins
    its group once and forks every sandbox from inside it never moves again.
    """

    def __init__(self, path: str):
        super().__init__(name=f"sopforge-sandbox-spawner-{os.path.basename(path)}", daemon=True)
        self.path = path
        self.jobs: queue.Queue = queue.Queue()
        self.joined = threading.Event()
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            _write(os.path.join(self.path, "tasks"), str(threading.get_native_id()))
        except OSError as err:
            self.failed = err
            return
        finally:
            self.joined.set()
        while True:
            job, reply = self.jobs.get()
            try:
                reply.put((job(), None))
            except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
                reply.put((None, err))

    def call(self, job: Callable[[], T]) -> T:
        reply: queue.Queue = queue.Queue(maxsize=1)
        self.jobs.put((job, reply))
        value, err = reply.get()
        if err is not None:
            raise err
        return value


class _Pool:
    """This process's spawners, one per sandbox running at once, reused run after run."""

    def __init__(self):
        self.lock = threading.Lock()
        self.free: list[_Spawner] = []
        self.made = 0
        self.home: str | None = None
        self.ready = False

    def setup(self) -> str | None:
        """Where this process may create its groups (once), after clearing those of dead processes."""
        if not self.ready:
            self.ready = True
            mount = _pids_mount()
            home = _own_group(mount) if mount else None
            if home and os.path.isfile(os.path.join(home, "tasks")) and os.access(home, os.W_OK):
                self.home = home
                _remove_stale(home)
        return self.home

    def acquire(self) -> _Spawner | None:
        with self.lock:
            if os.geteuid() != 0 or self.setup() is None:
                return None
            # A group still charged for its last run's bubblewrap init (a zombie until the
            # host's pid 1 reaps it) would start the next run with a looser cap: prefer one that
            # holds its spawner alone, and make a new group while the pool is small.
            drained = [s for s in self.free if _read_int(os.path.join(s.path, "pids.current")) == 1]
            if drained:
                self.free.remove(drained[0])
                return drained[0]
            if self.free and self.made >= _MAX_GROUPS:
                return self.free.pop(0)
            self.made += 1
            path = os.path.join(self.home, f"sopforge-sandbox-{os.getpid()}-{next(_counter)}")
        try:
            os.mkdir(path, 0o700)
        except OSError:
            return None
        spawner = _Spawner(path)
        spawner.start()
        spawner.joined.wait()
        return spawner if spawner.failed is None else None

    def release(self, spawner: _Spawner) -> None:
        with self.lock:
            self.free.append(spawner)


def _remove_stale(home: str) -> None:
    """Remove the (empty) groups left by sopforge processes that have exited."""
    try:
        names = os.listdir(home)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) == 4 and name.startswith("sopforge-sandbox-") and parts[2].isdigit():
            if not os.path.exists(f"/proc/{parts[2]}"):
                try:
                    os.rmdir(os.path.join(home, name))
                except OSError:
                    pass


_pool = _Pool()


class TaskGroup:
    """The pids cgroup of one sandbox run: its spawner thread and the sandbox's tasks, nothing else."""

    def __init__(self, spawner: _Spawner):
        self.spawner, self.path = spawner, spawner.path
        self.refused_before = _read_int(os.path.join(self.path, "pids.events"), "max")
        # Besides its spawner, the group may still be charged for earlier runs' exited tasks.
        self.leftover = max(0, _read_int(os.path.join(self.path, "pids.current")) - 1)

    @classmethod
    def create(cls, max_processes: int = 0) -> TaskGroup | None:
        """A group capped at the sandbox's own tasks plus ``max_processes``, or None where the host
        offers none to this process (not root, no cgroup v1 ``pids`` controller)."""
        spawner = _pool.acquire()
        if spawner is None:
            return None
        group = cls(spawner)
        try:
            group.cap(BASE_TASKS + max_processes)
        except OSError:
            _pool.release(spawner)
            return None
        return group

    def spawn(self, start: Callable[[], T]) -> T:
        """Run ``start`` (which forks the sandbox) on the group's spawner thread, inside the group."""
        return self.spawner.call(start)

    def cap(self, tasks: int) -> None:
        """Allow ``tasks`` tasks of the sandbox (besides the spawner thread and any leftover charge)."""
        _write(os.path.join(self.path, "pids.max"), str(tasks + 1 + self.leftover))

    def refused(self) -> int:
        """How many times a fork or clone of this run was refused for exceeding the cap."""
        return _read_int(os.path.join(self.path, "pids.events"), "max") - self.refused_before

    def close(self) -> None:
        """Give the group back for a later run."""
        _pool.release(self.spawner)


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
