"""The sandbox child process: runs LLM-written modules and reports framed JSON records.

Started by ``runner.py`` as ``python -s -P -B child.py`` inside the bubblewrap container of
``boundary.py``, with cwd = a read-only copy of the benchmark folder. Standard library only,
and it never imports sopforge, so the interpreter holds nothing but the user's code and pandas;
what it does with the user's module (the ops, the tools channel) is in ``calls.py``.

Before any user code, the child checks from the inside that the boundary is really there
(uid, capabilities, ``no_new_privs``, seccomp, and every namespace different from the
parent's, whose ids come with the payload) and refuses to go on if it is not.

Protocol. Stdin is the parent's control pipe: an 8-byte length and the JSON payload, later one
byte ``G`` (go) once the parent has checked the boundary from outside, and EOF once the parent
has taken its last look at the child (peak memory, CPU time). Records go to the *original*
stdout as frames (``channel.py``): a tag byte, a 4-byte length, a JSON body, with tag H (hello:
limits and the boundary as seen from inside), R (one finished group or call, streamed so a kill
still leaves the completed prefix), V (guard violation), F (fatal: load error, memory limit,
crash, no boundary) or E (end). Before user code runs, fd 1 is pointed at stderr, so ``print``
(and C-level writes) from user code land in stderr and cannot corrupt the stream. User code
can still write frames (it shares the process); the parent therefore judges the run from what
it observes itself and lets records only make a run worse (see ``outcome.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import posix
import resource
import signal
import sys
import traceback

EXIT_FATAL = 87
_RESERVE_BYTES = 4 * 1024 * 1024
_SIGPENDING = 64


class Emitter:
    """Writes framed records (tag, 4-byte big-endian length, body) to a private duplicate of stdout.

    ``posix.write`` is bound at creation: user code replacing ``os.write`` later changes nothing.
    """

    def __init__(self, fd: int):
        self.fd, self._write = fd, posix.write

    def __call__(self, tag: str, body: str) -> None:
        data = body.encode("utf-8")
        view = memoryview(tag.encode("ascii") + len(data).to_bytes(4, "big") + data)
        while view:
            view = view[self._write(self.fd, view):]


def apply_limits(limits: dict) -> dict:
    """Set the rlimits; hard limits are lowered too so user code cannot raise them back."""
    wanted = {
        resource.RLIMIT_CPU: (limits["cpu_seconds"], limits["cpu_seconds"] + 1),
        resource.RLIMIT_AS: (limits["memory_bytes"],) * 2,
        resource.RLIMIT_FSIZE: (limits["file_size_bytes"],) * 2,
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_NOFILE: (limits["open_files"],) * 2,
        # Per-user counters of the kernel (queued signals, POSIX message queues, locked memory):
        # tool code needs none, and with them at zero it cannot run its user's dry.
        resource.RLIMIT_SIGPENDING: (_SIGPENDING,) * 2,
        resource.RLIMIT_MSGQUEUE: (0, 0),
        resource.RLIMIT_MEMLOCK: (0, 0),
    }
    applied = {res: _set_limit(res, soft, hard) for res, (soft, hard) in wanted.items()}
    # An oversized write should raise OSError(EFBIG) in user code rather than kill us silently.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return {"cpu_seconds": applied[resource.RLIMIT_CPU], "memory_bytes": applied[resource.RLIMIT_AS]}


def limit_processes(limits: dict) -> None:
    """RLIMIT_NPROC (every process and thread of the sandbox's unprivileged uid), applied after
    preloading; the parent chose the value (the task cap itself is the pids cgroup, where there
    is one)."""
    _set_limit(resource.RLIMIT_NPROC, limits["nproc"], limits["nproc"])


def _set_limit(res: int, soft: int, hard: int) -> int:
    _, cur_hard = resource.getrlimit(res)
    if cur_hard != resource.RLIM_INFINITY:  # an unprivileged process cannot raise its hard limit
        soft, hard = min(soft, cur_hard), min(hard, cur_hard)
    resource.setrlimit(res, (soft, hard))
    return soft


def preload(names: list[str]) -> None:
    """Import trusted heavy libraries before the audit hook (numpy's import loads ctypes)."""
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue  # importing the user module will report it
        if name == "pandas" and hasattr(module, "set_option"):
            try:
                # pandas >= 3 reads CSVs with worker threads sized from /sys/fs/cgroup; one
                # thread keeps results deterministic and the guard's read roots small.
                module.set_option("mode.max_threads", 1)
            except Exception:  # noqa: BLE001 - option absent in older pandas
                pass


def read_roots(payload: dict) -> list[str]:
    """Folders the guard lets the child read: its sandbox, the interpreter, sys.path."""
    roots = [payload["sandbox_dir"], sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             "/usr/share/zoneinfo", *payload.get("extra_read_roots", [])]
    roots += [p for p in sys.path if p and os.path.exists(p)]
    return roots


_NAMESPACES = ("user", "pid", "mnt", "net", "ipc", "uts")
_CAPS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def _outside_uid(uid: int) -> int | None:
    """The host uid this uid maps to, from /proc/self/uid_map."""
    with open("/proc/self/uid_map", encoding="ascii") as handle:
        for line in handle:
            inside, outside, count = (int(v) for v in line.split())
            if inside <= uid < inside + count:
                return outside + uid - inside
    return None


def inspect_boundary(payload: dict) -> dict:
    """What the OS boundary looks like from inside, and whether it is the one required.

    The parent checks the same from outside before it lets user code run; this check is the
    child's own refusal to go on unconfined."""
    status = {}
    with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    namespaces = {}
    for name in _NAMESPACES:
        try:
            namespaces[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            namespaces[name] = None
    parent = payload.get("parent_namespaces", {})
    fresh = {name: bool(namespaces[name]) and namespaces[name] != parent.get(name) for name in payload["fresh"]}
    seen = {
        "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(), "groups": os.getgroups(),
        "host_uid": _outside_uid(os.getuid()), **{cap: status.get(cap) for cap in _CAPS},
        "no_new_privs": status.get("NoNewPrivs") == "1", "seccomp": status.get("Seccomp") == "2",
        "fresh_namespaces": fresh, "pid": os.getpid(),
    }
    want_uid = payload.get("sandbox_uid")
    problems = []
    if seen["uid"] != want_uid or seen["euid"] != want_uid or seen["gid"] != want_uid:
        problems.append(f"uid/euid/gid {seen['uid']}/{seen['euid']}/{seen['gid']} is not {want_uid}")
    if seen["host_uid"] in (None, 0):
        problems.append(f"the host sees this process as uid {seen['host_uid']}")
    problems += [f"{cap} is {seen[cap]}" for cap in _CAPS if seen[cap] is None or int(seen[cap], 16) != 0]
    problems += ["no_new_privs is not set"] if not seen["no_new_privs"] else []
    problems += [f"the {name} namespace is the parent's" for name, ok in fresh.items() if not ok]
    if payload.get("seccomp") and not seen["seccomp"]:
        problems.append("the seccomp filter is not loaded")
    seen["confined"] = not problems
    seen["problems"] = problems
    return seen


def load_runtime(name: str):
    """One of the runtime files mounted next to this one (guard.py, calls.py), loaded by path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_sopforge_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_exact(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = posix.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the parent closed the control pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _release(control: int) -> None:
    """Wait until the parent closes the control pipe: it reads our peak memory meanwhile."""
    try:
        while posix.read(control, 4096):
            pass
    except OSError:
        pass  # user code closed it: the parent keeps its last sample


def main() -> None:
    _exit = posix._exit  # bound before user code, like everything the guard uses
    control = os.dup(0)
    payload = json.loads(_read_exact(control, int.from_bytes(_read_exact(control, 8), "big")))
    record_fd = os.dup(1)
    emit = Emitter(record_fd)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    read_end, write_end = os.pipe()  # stdin: an empty pipe (there is no /dev in the sandbox)
    os.close(write_end)
    os.dup2(read_end, 0)
    os.close(read_end)
    reserve = bytearray(_RESERVE_BYTES)  # freed on MemoryError so the report itself can allocate
    calls = load_runtime("calls")
    try:
        boundary = inspect_boundary(payload)
        if not boundary["confined"]:
            emit("F", json.dumps({"kind": "sandbox_unavailable", "message": "; ".join(boundary["problems"])}))
            _exit(EXIT_FATAL)
        limits = apply_limits(payload["limits"])
        preload(payload.get("preload", []))
        limit_processes(payload["limits"])
        guarded = payload.get("guard", True)
        if guarded:
            guard = load_runtime("guard")
            guard.neutralize_fork_exec()
            if not payload["limits"].get("threads"):
                guard.neutralize_threads()
            guard.install(read_roots=read_roots(payload), record_fd=record_fd)
        emit("H", json.dumps({"limits": limits, "boundary": boundary, "audit_hook": guarded}))
        if posix.read(control, 1) != b"G":  # the parent found the boundary short of what it requires
            _exit(EXIT_FATAL)
        sys.path.append(payload["sandbox_dir"])  # siblings (import tools) resolve after the stdlib
        calls.keep_tools_out(payload)
        module = calls.load_module(payload["sandbox_dir"], payload["entry"])
        done = calls.OPS[payload["op"]](payload, module, emit)
        emit("E", json.dumps({"completed": done}))
        code = 0
    except MemoryError:
        del reserve
        emit("F", '{"kind":"memory_limit","message":"MemoryError: the address-space limit was reached"}')
        code = EXIT_FATAL
    except calls.LoadError as exc:
        emit("F", json.dumps({"kind": "load_error", "message": str(exc)}))
        code = EXIT_FATAL
    except BaseException as exc:  # noqa: BLE001 - report anything else as a crash, with its traceback
        sys.stderr.write(traceback.format_exc())
        emit("F", json.dumps({"kind": "crash", "message": f"{type(exc).__name__}: {exc}"[:2000]}))
        code = EXIT_FATAL
    sys.stderr.flush()
    _release(control)
    _exit(code)  # skip interpreter teardown: user finalizers must not run after the report


if __name__ == "__main__":
    main()
