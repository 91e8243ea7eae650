"""Runtime guard for the sandbox child: a PEP 578 audit hook installed before user code.

Runs inside the child interpreter, so it imports nothing but the standard library. It is the
layer that *reports*: the OS boundary (``boundary.py``) is what contains, and it holds even
when this hook is blinded; the hook is what turns an attempt into a ``policy_violation``
instead of a quiet failure.

Threat model. User code runs in the same interpreter, after this hook, with the AST policy
possibly switched off. It can replace any module attribute (``os._exit``, ``json.dumps``,
``os.path.realpath``, ``builtins.isinstance``), swap ``sys.modules`` entries, write to any
file descriptor it can name and forge any record it likes. So:

* everything the hook calls is bound when :func:`install` runs, before user code is
  imported: ``posix._exit``, ``posix.write``, ``posix.lstat``, ``posix.readlink``,
  ``posix.getcwd``, ``_json``'s string encoder, ``type``; the path resolver is written out
  here rather than borrowed from ``os.path``;
* the hook only compares events and arguments of exact built-in types (``type(x) is str``);
  it never calls ``repr``/``str``/``__fspath__`` on an object user code made, which could
  run user code inside the hook;
* on a forbidden event it first writes the ``V`` frame, then ``_exit(EXIT_VIOLATION)``: it
  never raises (``try/except`` in user code would swallow it) and never returns. Forging can
  only *add* frames to the pipe; it cannot remove a ``V`` already written, and the parent
  treats a ``V`` record, exit status :data:`EXIT_VIOLATION` or a seccomp kill as a violation
  whatever else the stream says. If user code points the record fd elsewhere first, the
  exit status still says violation; a clean result also needs the ``E`` record, so a child
  that lost its channel is never reported clean.

What remains is native code, which PEP 578 says can bypass any hook: its entry points
(``ctypes.*``, ``import ctypes``, new processes) are events stopped here, and everything
past them is still inside the OS boundary.
"""

from __future__ import annotations

import posix
import sys
from collections.abc import Iterable

__all__ = ["BLOCKED_PREFIXES", "DENIED_IMPORTS", "EXIT_VIOLATION", "THREAD_EVENT", "install", "neutralize_fork_exec",
           "neutralize_threads"]

EXIT_VIOLATION = 86
# Raised by the stubs that replace thread creation (CPython 3.11 raises no event for a new thread).
THREAD_EVENT = "sopforge.sandbox.start_thread"

# Events that are never legitimate for tool code (prefix match).
BLOCKED_PREFIXES: tuple[str, ...] = (
    # network
    "socket.", "urllib.", "http.client.", "ftplib.", "smtplib.", "poplib.", "imaplib.",
    "nntplib.", "telnetlib.", "webbrowser.", "sqlite3.",
    # processes and signals to other processes
    "subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
    "os.kill", "os.killpg", "os.startfile", "signal.pthread_kill", "pty.", THREAD_EVENT,
    # native code and interpreter internals
    "ctypes.", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
    "sys.addaudithook", "sys.setprofile", "sys.settrace", "cpython.PyInterpreterState",
    "code.__new__", "function.__new__", "mmap.",
    # raising our own limits back up
    "resource.setrlimit", "resource.prlimit",
    # filesystem mutation
    "shutil.", "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
    "os.truncate", "os.chmod", "os.chown", "os.chflags", "os.lchflags", "os.lchmod", "os.utime",
    "os.setxattr", "os.removexattr", "os.putenv", "os.unsetenv", "os.chdir", "os.chroot",
    # interactive
    "builtins.input", "builtins.breakpoint", "pdb.",
)
# Modules whose first import at run time means user code wants a process, socket or FFI.
# (Already-imported modules raise no import event; their *operations* are blocked above.)
DENIED_IMPORTS: frozenset[str] = frozenset({
    "ctypes", "_ctypes", "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing",
    "socket", "_socket", "ssl", "_ssl", "pty", "mmap",
})
_LISTING_EVENTS = frozenset({"os.listdir", "os.scandir"})
_WRITE_FLAGS = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND
_S_IFMT, _S_IFLNK = 0o170000, 0o120000


def _make_resolver(lstat, readlink, getcwd, str_type, os_error=OSError, ifmt=_S_IFMT, iflnk=_S_IFLNK):
    """A ``realpath`` built only from functions bound now (``os.path`` can be patched later)."""

    def resolve(path: str) -> str | None:
        if not path.startswith("/"):
            path = getcwd() + "/" + path
        parts: list[str] = []
        pending = path.split("/")
        pending.reverse()
        hops = 0
        while pending:
            name = pending.pop()
            if name == "" or name == ".":
                continue
            if name == "..":
                if parts:
                    parts.pop()
                continue
            candidate = "/" + "/".join(parts) + ("/" if parts else "") + name
            try:
                mode = lstat(candidate)[0]
            except os_error:
                parts.append(name)  # does not exist (yet): keep it as written
                continue
            if mode & ifmt != iflnk:
                parts.append(name)
                continue
            hops += 1
            if hops > 40:
                return None
            target = readlink(candidate)
            if type(target) is not str_type:
                return None
            if target.startswith("/"):
                parts = []
            more = target.split("/")
            more.reverse()
            pending.extend(more)
        return "/" + "/".join(parts)

    return resolve


def install(*, read_roots: Iterable[str], record_fd: int) -> None:
    """Install the audit hook; after this, user code may be imported.

    Args:
        read_roots: folders whose files may be opened for reading (the sandbox folder, the
            interpreter's prefixes), so lazy imports keep working.
        record_fd: the record channel; a violation is written there as a ``V`` frame.
    """
    _exit, _write, _type = posix._exit, posix.write, type
    _str, _bytes, _int, _tuple, _len, exit_code = str, bytes, int, tuple, len, EXIT_VIOLATION
    _encode = _json_string_encoder()
    resolve = _make_resolver(posix.lstat, posix.readlink, posix.getcwd, _str)
    roots = tuple(sorted({(resolve(r) or r).rstrip("/") + "/" for r in read_roots if r}))
    tag, to_bytes = b"V", _int.to_bytes
    blocked, listing, denied, write_flags = BLOCKED_PREFIXES, _LISTING_EVENTS, DENIED_IMPORTS, _WRITE_FLAGS

    def violate(event: str, detail: str) -> None:
        try:
            body = ('{"event":' + _encode(event) + ',"detail":' + _encode(detail[:300]) + "}").encode("ascii")
            _write(record_fd, tag + to_bytes(_len(body), 4, "big") + body)
        finally:
            _exit(exit_code)

    def shown(value: object) -> str:
        kind = _type(value)  # the built-in types' own __repr__, never the object's
        if kind is _str:
            return _str.__repr__(value)
        if kind is _bytes:
            return _bytes.__repr__(value)
        if kind is _int:
            return "fd " + _int.__repr__(value)
        return "<object>"

    def readable(path: object) -> bool:
        kind = _type(path)
        if kind is _int:
            return True  # an already-open descriptor; writes through it are caught by mode
        if kind is _bytes:
            path = path.decode("utf-8", "surrogateescape")  # type: ignore[union-attr]
        elif kind is not _str:
            return False  # a PathLike could answer differently each time it is asked
        real = resolve(path)  # type: ignore[arg-type]
        return real is not None and (real.rstrip("/") + "/").startswith(roots)

    def hook(event: str, args: tuple) -> None:
        if _type(event) is not _str or _type(args) is not _tuple:
            return  # only user code's own sys.audit() calls look like this; C events never do
        n = _len(args)
        if event == "open":
            path = args[0] if n > 0 else None
            mode = args[1] if n > 1 else None
            flags = args[2] if n > 2 else None
            writes = (_type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) or (
                _type(flags) is _int and flags & write_flags)
            if writes:
                violate(event, "opening " + shown(path) + " for writing")
            elif not readable(path):
                violate(event, "reading " + shown(path) + " outside the sandbox folder")
        elif event in listing:
            target = args[0] if n else "."
            if not readable(target):
                violate(event, "listing " + shown(target) + " outside the sandbox folder")
        elif event == "import":
            name = args[0] if n else None
            if _type(name) is _str and name in denied:
                violate(event, "importing " + name)
        elif event.startswith(blocked):
            violate(event, event + "(" + (shown(args[0]) if n else "") + ")")

    sys.addaudithook(hook)


def _json_string_encoder():
    """The C JSON string encoder (ASCII output), or a small local one if it is missing."""
    try:
        from _json import encode_basestring_ascii
        return encode_basestring_ascii
    except ImportError:  # pragma: no cover - CPython always has _json
        def encode(text: str) -> str:
            out = ['"']
            for ch in text:
                out.append(ch if " " <= ch <= "~" and ch not in '"\\' else "\\u%04x" % ord(ch))
            out.append('"')
            return "".join(out)
        return encode


def neutralize_fork_exec() -> None:
    """Replace ``_posixsubprocess.fork_exec`` if a preloaded library imported it.

    It forks and execs without raising any audit event (checked on CPython 3.11), and pandas
    imports ``subprocess`` at import time. Call this *before* :func:`install`: the stub
    itself raises the ``subprocess.Popen`` event, which the hook turns into a violation, so
    no second reporting path exists. (A fresh copy of the extension module would still
    fork: the seccomp filter kills that.)
    """
    audit = sys.audit

    def blocked(*_args: object, **_kwargs: object) -> None:
        audit("subprocess.Popen", "_posixsubprocess.fork_exec", (), None, None)
        raise PermissionError("starting a process is not allowed in the sandbox")

    for name, attr in (("_posixsubprocess", "fork_exec"), ("subprocess", "_fork_exec")):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, attr):
            setattr(module, attr, blocked)


def neutralize_threads() -> None:
    """Replace thread creation with a stub that raises :data:`THREAD_EVENT` (a violation).

    Tool code may not start threads; the pids cgroup (or RLIMIT_NPROC) refuses them in the
    kernel anyway, and this makes an attempt a reported violation instead of a RuntimeError
    user code could swallow. Call it after the trusted libraries are preloaded and before
    :func:`install`.
    """
    audit = sys.audit

    def blocked(*_args: object, **_kwargs: object) -> None:
        audit(THREAD_EVENT)
        raise RuntimeError("starting a thread is not allowed in the sandbox")

    import _thread
    for module in (_thread, sys.modules.get("threading")):
        for attr in ("start_new_thread", "start_new", "_start_new_thread"):
            if module is not None and hasattr(module, attr):
                setattr(module, attr, blocked)
