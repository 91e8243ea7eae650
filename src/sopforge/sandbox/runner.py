"""Run LLM-written tool code in a separate, resource-limited Python process.

Layers, outermost first: the AST policy (``policy.py``) rejects the code before anything
runs; the child (``child.py``) gets a fresh temp copy of the folder as cwd, an explicit
minimal environment (no proxies, no API keys, ``PYTHONHASHSEED=0``), rlimits on CPU, address
space, file size, open files, processes and core dumps, and a PEP 578 audit hook
(``guard.py``) that stops network, process, FFI and out-of-sandbox file events; when
``unshare --net`` works here, the child also runs in a fresh network namespace with no
interfaces up. The parent enforces wall-clock time by killing the process group. The result
reports which layers were confirmed active, not which were merely requested.

Calls are batched: one process handles many groups of tool calls (or many function calls),
streaming one framed record per group, so thousands of rows cost one interpreter start.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from sopforge.errors import UserError
from sopforge.checks import CheckResult
from sopforge.sandbox.models import SandboxLimits, SandboxResult
from sopforge.sandbox.outcome import ChildReport, classify
from sopforge.sandbox.policy import DEFAULT_ALLOWED, check_code, imported_modules

__all__ = ["CHILD_SCRIPT", "network_namespace_prefix", "run_in_sandbox"]

CHILD_SCRIPT = Path(__file__).with_name("child.py")
_OPS = {"call_tools": "groups", "run_function": "calls"}
_LAYER_ORDER = ["ast_policy", "network_namespace", "rlimits", "audit_hook", "wall_clock"]
_PRELOAD = ("pandas", "numpy")  # heavy trusted libraries imported before the audit hook
_SAFE_ENV = {
    "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
    "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
    # One BLAS/OpenMP thread: threads would each reserve address space under RLIMIT_AS and
    # would need RLIMIT_NPROC headroom; two malloc arenas keep the address space small too.
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "NUMEXPR_MAX_THREADS": "1", "MALLOC_ARENA_MAX": "2",
}


def _own_netns() -> str | None:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def network_namespace_prefix() -> tuple[str, ...] | None:
    """The ``unshare`` command prefix that gives a child a fresh network namespace, if any.

    Probed once per process: plain ``unshare --net`` (needs CAP_SYS_ADMIN, e.g. root), then
    an unprivileged user namespace mapping the caller to root. A prefix counts only if the
    probe really lands in a different namespace.
    """
    unshare = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin")
    own = _own_netns()
    if not unshare or own is None:
        return None
    probe = [sys.executable, "-S", "-c", "import os; print(os.readlink('/proc/self/ns/net'))"]
    for prefix in ((unshare, "--net", "--"), (unshare, "--user", "--map-root-user", "--net", "--")):
        try:
            done = subprocess.run([*prefix, *probe], capture_output=True, text=True, timeout=15,
                                  env={"PATH": _SAFE_ENV["PATH"]}, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0 and done.stdout.strip() not in ("", own):
            return prefix
    return None


def _policy_checks(folder: Path, allowed: frozenset[str]) -> list[CheckResult]:
    """Check every .py file of the folder; sibling modules may import each other."""
    files = sorted(folder.rglob("*.py"))
    allowed = allowed | {p.stem for p in files}
    checks = []
    for path in files:
        rel = path.relative_to(folder).as_posix()
        for result in check_code(path.read_text(encoding="utf-8", errors="replace"), allowed_imports=allowed):
            result.message = f"{rel}: {result.message}"
            result.details["file"] = rel
            checks.append(result)
    return checks


def _validate(folder: Path, entry: str, payload: dict) -> None:
    if not folder.is_dir():
        raise UserError(f"sandbox folder {folder} does not exist")
    for name in (entry, payload.get("tools_entry")):
        if name is None:
            continue
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or not (folder / rel).is_file():
            raise UserError(f"sandbox entry {name!r} must be a file inside {folder}")
    op = payload.get("op")
    if op not in _OPS or not isinstance(payload.get(_OPS[op]), list):
        raise UserError(f"sandbox payload needs op in {sorted(_OPS)} with a list under "
                        f"{_OPS.get(op, 'groups/calls')!r}")
    if op == "run_function" and not isinstance(payload.get("function"), str):
        raise UserError("sandbox payload for run_function needs 'function'")
    if op == "call_tools" and payload.get("instance", "shared") not in ("shared", "per_group"):
        raise UserError("sandbox payload 'instance' must be 'shared' or 'per_group'")
    # A malformed call is the caller's bug: say so here rather than as a child crash.
    for index, item in enumerate(payload[_OPS[op]]):
        if op == "call_tools":
            ok = isinstance(item, list) and all(
                isinstance(c, dict) and isinstance(c.get("tool"), str) and isinstance(c.get("input", {}), dict)
                for c in item)
            shape = 'a list of {"tool": str, "input": dict}'
        else:
            ok = isinstance(item, dict) and isinstance(item.get("args", []), list) and isinstance(
                item.get("kwargs", {}), dict)
            shape = '{"args": list, "kwargs": dict}'
        if not ok:
            raise UserError(f"sandbox payload {_OPS[op]}[{index}] must be {shape}")


def run_in_sandbox(folder: Path, entry: str, payload: dict[str, Any], *, limits: SandboxLimits | None = None,
                   skip_policy: bool = False, allowed_imports: frozenset[str] = DEFAULT_ALLOWED) -> SandboxResult:
    """Run user code from ``folder`` in a sandboxed child process.

    Args:
        folder: benchmark folder (tools.py, its CSV, ...); the child works on a temp copy.
        entry: module file inside ``folder`` to import, e.g. ``"tools.py"``.
        payload: ``{"op": "call_tools", "groups": [[{"tool": name, "input": {...}}, ...], ...],
            "instance": "shared" | "per_group"}`` or ``{"op": "run_function", "function": name,
            "calls": [{"args": [...], "kwargs": {...}}, ...], "tools_entry": "tools.py"}``
            (with ``tools_entry``, the Manager is passed first, wrapped to record tool calls).
        limits: resource limits; defaults to ``SandboxLimits()``.
        skip_policy: do not run the AST policy first (tests of the runtime layers only).
        allowed_imports: the AST policy's allow-list (sibling module names are added).

    Returns:
        A SandboxResult; user-code failures are reported in it, never raised.

    Raises:
        UserError: bad arguments (missing folder/entry, malformed payload, or
            ``network_namespace="require"`` where namespaces are unavailable).
    """
    limits = limits or SandboxLimits()
    folder = Path(folder)
    _validate(folder, entry, payload)
    checks: list[CheckResult] = []
    if not skip_policy:
        checks = _policy_checks(folder, allowed_imports)
        failed = [c for c in checks if not c.passed]
        if failed:
            return SandboxResult(ok=False, op=payload["op"], error_kind="policy_violation", checks=checks,
                                 error_message=failed[0].message, layers=["ast_policy"])
    prefix: tuple[str, ...] = ()
    if limits.network_namespace != "off":
        prefix = network_namespace_prefix() or ()
        if not prefix and limits.network_namespace == "require":
            raise UserError("network_namespace='require' but unshare --net is not available here")
    imports = set().union(*(imported_modules(p.read_text(encoding="utf-8", errors="replace"))
                            for p in folder.rglob("*.py")))
    preload = [m for m in _PRELOAD if any(i == m or i.startswith(m + ".") for i in imports)]
    tmp = Path(tempfile.mkdtemp(prefix="sopforge-sandbox-"))
    try:
        work, home = tmp / "work", tmp / "home"
        shutil.copytree(folder, work, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        home.mkdir()
        nonce = secrets.token_hex(16)
        child_payload = {**payload, "nonce": nonce, "entry": entry, "sandbox_dir": str(work.resolve()),
                         "preload": preload, "max_result_bytes": limits.max_result_bytes,
                         "limits": limits.model_dump(include={"cpu_seconds", "memory_bytes", "file_size_bytes",
                                                              "open_files", "max_processes"})}
        env = {**_SAFE_ENV, "HOME": str(home), "TMPDIR": str(home)}
        # Not -I: it implies -E, which would drop PYTHONHASHSEED=0 (set ordering must be stable).
        # The environment is built from scratch instead, so -E has nothing left to protect
        # against; -s skips user site-packages, -P keeps the script's folder off sys.path,
        # -B stops bytecode writes (which the guard would report as a violation).
        cmd = [*prefix, sys.executable, "-s", "-P", "-B", str(CHILD_SCRIPT)]
        report = _supervise(cmd, work, env, json.dumps(child_payload).encode(), nonce, limits)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = classify(report, op=payload["op"], expected=len(payload[_OPS[payload["op"]]]), limits=limits,
                      own_netns=_own_netns())
    if not skip_policy:
        result.layers = sorted({"ast_policy", *result.layers}, key=_LAYER_ORDER.index)
    result.checks = checks
    return result


def _supervise(cmd: list[str], cwd: Path, env: dict[str, str], stdin: bytes, nonce: str,
               limits: SandboxLimits) -> ChildReport:
    """Start the child, feed it, collect its records and stderr tail, enforce wall time."""
    report = ChildReport()
    prefix = nonce.encode() + b" "
    stderr_tail: deque[bytes] = deque()
    tail_size = [0]
    overflow = threading.Event()

    def feed(pipe) -> None:
        try:
            pipe.write(stdin)
            pipe.close()
        except OSError:
            pass  # the child died before reading everything; its exit status says why

    def read_records(pipe) -> None:
        total = 0
        for line in pipe:
            total += len(line)
            if total > limits.max_output_bytes:
                overflow.set()
                break
            if line.startswith(prefix):
                report.records.append((line[len(prefix):len(prefix) + 1].decode(), line[len(prefix) + 2:]))

    def read_stderr(pipe) -> None:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            stderr_tail.append(chunk)
            tail_size[0] += len(chunk)
            while tail_size[0] - len(stderr_tail[0]) >= limits.stderr_tail_bytes and len(stderr_tail) > 1:
                tail_size[0] -= len(stderr_tail.popleft())

    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=env, start_new_session=True, close_fds=True)
    threads = [threading.Thread(target=fn, args=(pipe,), daemon=True)
               for fn, pipe in ((feed, proc.stdin), (read_records, proc.stdout), (read_stderr, proc.stderr))]
    for thread in threads:
        thread.start()
    deadline = started + limits.wall_seconds
    waiter = _ExitWaiter(proc.pid)
    try:
        while not waiter.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if overflow.is_set() or time.monotonic() >= deadline:
                report.timed_out = not overflow.is_set()
                report.overflow = overflow.is_set()
                break
    finally:
        waiter.close()
    # Kill the whole group even after a normal exit, so nothing the child left behind survives;
    # the exited-but-unreaped leader keeps the group id from being reused meanwhile.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits on the reaped pid
    report.wall_seconds = time.monotonic() - started
    report.exit_code = proc.returncode
    report.cpu_seconds = usage.ru_utime + usage.ru_stime
    report.peak_rss_bytes = usage.ru_maxrss * 1024  # Linux reports KiB
    for thread in threads:
        thread.join(timeout=5)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        try:
            pipe.close()
        except OSError:
            pass
    text = b"".join(stderr_tail).decode("utf-8", errors="replace")
    report.stderr_tail = text[-limits.stderr_tail_bytes:] if limits.stderr_tail_bytes else ""
    return report


class _ExitWaiter:
    """Waits for a child to exit *without reaping it* (pidfd, else waitid polling)."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def wait(self, timeout: float) -> bool:
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], timeout)[0])
        end = time.monotonic() + timeout
        while True:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None or time.monotonic() >= end:
                return info is not None
            time.sleep(0.01)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)

