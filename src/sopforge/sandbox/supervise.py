"""Start one sandbox child, talk to it, watch it from outside, and collect what it did.

The sequence, with the child's side in ``child.py``:

1. bubblewrap is forked from inside the run's pids cgroup (``accounting.TaskGroup``, where the
   host offers one) and sends the host pid of the sandboxed process through ``--info-fd``;
2. the parent writes the payload to the control pipe (the child's stdin);
3. the child sets up its limits, preloads pandas, installs the audit hook and writes its hello
   frame. Before any user code runs, the parent reads the child's credentials, capabilities,
   seccomp mode, namespaces and limits from ``/proc`` (:func:`accounting.observe`); only if
   they are what the boundary requires does it send ``G``. Otherwise it closes the pipe and the
   child exits without loading anything;
4. records stream in through :class:`channel.FrameReader`; the parent samples the child's peak
   memory and CPU time meanwhile, and once more when the end (or fatal) frame arrives, while
   the child waits for the control pipe to close;
5. the whole process group is killed (even after a normal exit), the leader reaped, the
   cgroup's refusal count read and the cgroup given back for a later run.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from sopforge.sandbox import boundary
from sopforge.sandbox.accounting import TaskGroup, observe, usage
from sopforge.sandbox.channel import FrameReader
from sopforge.sandbox.models import SandboxLimits
from sopforge.sandbox.outcome import ChildReport

__all__ = ["Expectation", "supervise"]

_POLL = 0.1


class Expectation:
    """What the parent requires to see of the child from outside before user code runs."""

    def __init__(self, *, parent_namespaces: dict[str, str | None], seccomp: bool):
        who = boundary.identity()
        self.host_uid = who.host_uid
        self.fresh = self.fresh_namespaces(who)
        self.parent_namespaces = parent_namespaces
        self.seccomp = seccomp

    @staticmethod
    def fresh_namespaces(who: boundary.Identity) -> tuple[str, ...]:
        """Namespaces the child must not share with the parent (no user namespace under root)."""
        return ("pid", "mnt", "net", "ipc", "uts") + (("user",) if who.userns else ())


class _Control:
    """The write end of the child's control pipe: payload, then ``G``, then close."""

    def __init__(self, fd: int):
        self.fd: int | None = fd
        self.lock = threading.Lock()

    def send(self, data: bytes) -> bool:
        with self.lock:
            if self.fd is None:
                return False
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self.fd, view):]
            except OSError:
                return False  # the child is gone; its exit status says why
            return True

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None


class _Watch:
    """State shared by the frame reader's callback and the main loop."""

    def __init__(self, report: ChildReport, control: _Control, info_fd: int, group: TaskGroup | None,
                 limits: SandboxLimits, expect: Expectation):
        self.report, self.control, self.info_fd, self.group = report, control, info_fd, group
        self.limits, self.expect = limits, expect
        self.child: int | None = None
        self.child_fd: int | None = None
        self.greeted = self.ended = False
        self.wake_r, self.wake_w = os.pipe()

    def sample(self) -> None:
        if self.child is None:
            return
        seen = usage(self.child)
        if seen is not None:
            hwm, cpu = seen
            self.report.peak_rss_bytes = max(self.report.peak_rss_bytes or 0, hwm)
            self.report.cpu_seconds = cpu

    def on_frame(self, tag: str, _data: Any) -> None:
        if tag == "H" and not self.greeted:
            self.greeted = True
            self.greet()
        elif tag in ("E", "F") and not self.ended:
            self.ended = True
            self.sample()
            self.control.close()  # lets the child exit
        else:
            return
        os.write(self.wake_w, b"x")

    def greet(self) -> None:
        """Confirm the boundary from outside; only then let user code run."""
        self.child = _read_info(self.info_fd)  # bwrap runs the sandboxed process as its direct child
        if self.child is not None:
            try:
                self.child_fd = os.pidfd_open(self.child)  # alive: it is waiting for our answer
            except OSError:
                self.child = None
        seen = observe(self.child) if self.child is not None else None
        problems = ["the sandboxed process could not be found from outside"] if seen is None else seen.problems(
            host_uid=self.expect.host_uid, parent_ns=self.expect.parent_namespaces, fresh=self.expect.fresh,
            seccomp=self.expect.seccomp)
        if problems:
            self.report.unconfined = "; ".join(problems)
            self.control.close()
            return
        self.report.observed = seen
        self.sample()
        self.control.send(b"G")


def _read_info(fd: int) -> int | None:
    """bubblewrap's ``--info-fd`` JSON: the host pid of the sandboxed process."""
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
        return int(json.loads(data)["child-pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def supervise(work: Path, program: bytes | None, payload: bytes, limits: SandboxLimits, expect: Expectation,
              group: TaskGroup | None, *, command: Callable[[int | None, int], list[str]],
              channel_fds: tuple[int, ...] = ()) -> ChildReport:
    """Run one child on ``work`` with ``payload``.

    Args:
        work: the staged folder (mounted by ``command``).
        program: the seccomp filter, or None.
        payload: the child's JSON payload.
        limits: the run's limits.
        expect: what the child must look like from outside before user code runs.
        group: the run's pids cgroup, or None; it is closed here.
        command: ``command(seccomp_fd, info_fd)`` gives the bwrap argv.
        channel_fds: pipe ends for the child alone (the tools channel); closed here once it has them.
    """
    report = ChildReport()
    report.cgroup = group is not None
    info_r, info_w = os.pipe()
    control_r, control_w = os.pipe()
    seccomp_fd = None
    if program is not None:  # the filter travels through a pipe (it is far below the pipe buffer)
        seccomp_fd, write_end = os.pipe()
        os.write(write_end, program)
        os.close(write_end)
    passed = (info_w, *channel_fds) if seccomp_fd is None else (info_w, seccomp_fd, *channel_fds)
    cmd = command(seccomp_fd, info_w)

    def start() -> subprocess.Popen:
        # env={}: bwrap and the PID-namespace init it leaves running keep the environment they
        # were started with, so they get none; the child's own comes from --setenv.
        return subprocess.Popen(cmd, stdin=control_r, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                                env={}, start_new_session=True, close_fds=True, pass_fds=passed)

    started = time.monotonic()
    try:
        proc = group.spawn(start) if group is not None else start()
    except BaseException:
        for fd in (info_r, info_w, control_r, control_w, *channel_fds,
                   *((seccomp_fd,) if seccomp_fd is not None else ())):
            os.close(fd)
        if group is not None:
            group.close()
        raise
    for fd in (info_w, control_r, *channel_fds, *((seccomp_fd,) if seccomp_fd is not None else ())):
        os.close(fd)
    control = _Control(control_w)
    watch = _Watch(report, control, info_r, group, limits, expect)
    reader = FrameReader(max_bytes=limits.max_output_bytes, max_values=limits.max_output_values,
                         on_frame=watch.on_frame)
    tail: deque[bytes] = deque()

    def read_records() -> None:
        reader.run(proc.stdout)
        os.write(watch.wake_w, b"x")

    def read_stderr() -> None:
        size = 0
        for chunk in iter(lambda: proc.stderr.read1(65536), b""):
            tail.append(chunk)
            size += len(chunk)
            while size - len(tail[0]) >= limits.stderr_tail_bytes and len(tail) > 1:
                size -= len(tail.popleft())

    threads = [threading.Thread(target=fn, daemon=True) for fn in (
        lambda: control.send(len(payload).to_bytes(8, "big") + payload), read_records, read_stderr)]
    for thread in threads:
        thread.start()
    deadline = started + limits.wall_seconds
    waiter = _ExitWaiter(proc.pid)
    try:
        while not waiter.wait(min(_POLL, max(0.0, deadline - time.monotonic())), watch.wake_r):
            _drain(watch.wake_r)
            watch.sample()
            if reader.problem or report.unconfined:
                break
            if time.monotonic() >= deadline:
                report.timed_out = True
                break
    finally:
        waiter.close()
    # Kill the child (its own session, so outside bwrap's group) and the whole group, even after a
    # normal exit, so nothing survives; the exited-but-unreaped leader keeps the ids from reuse.
    if watch.child_fd is not None:  # a pidfd: never a reused pid
        try:
            signal.pidfd_send_signal(watch.child_fd, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _, status, _usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits on the reaped pid
    report.wall_seconds = time.monotonic() - started
    report.exit_code = proc.returncode
    control.close()
    for thread in threads:
        thread.join(timeout=5)
    for pipe in (proc.stdout, proc.stderr):
        try:
            pipe.close()
        except OSError:
            pass
    for fd in (info_r, watch.wake_r, watch.wake_w, *((watch.child_fd,) if watch.child_fd is not None else ())):
        os.close(fd)
    if group is not None:
        report.task_refusals = group.refused()
        group.close()
    report.records = reader.records
    report.overflow = reader.overflow
    report.channel_problem = None if reader.overflow else reader.problem
    text = b"".join(tail).decode("utf-8", errors="replace")
    report.stderr_tail = text[-limits.stderr_tail_bytes:] if limits.stderr_tail_bytes else ""
    return report


def _drain(fd: int) -> None:
    try:
        while select.select([fd], [], [], 0)[0] and os.read(fd, 4096):
            pass
    except OSError:
        pass


class _ExitWaiter:
    """Waits for a child to exit *without reaping it* (pidfd, else waitid polling), or for a wake-up."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def wait(self, timeout: float, wake: int) -> bool:
        """True once the child has exited; returns early (False) when ``wake`` becomes readable."""
        if self.fd is not None:
            ready = select.select([self.fd, wake], [], [], timeout)[0]
            return self.fd in ready
        end = time.monotonic() + timeout
        while True:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                return True
            if time.monotonic() >= end or select.select([wake], [], [], 0.01)[0]:
                return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
