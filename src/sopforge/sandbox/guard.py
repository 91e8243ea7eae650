"""Runtime guard for the sandbox child: a PEP 578 audit hook installed before user code.

Runs inside the child interpreter, so it imports nothing but the standard library. It is the
second layer after the AST policy and catches what static analysis cannot see
(``getattr(__builtins__, 'op' + 'en')``, code run with the policy skipped). Audit hooks are
not a security boundary on their own (PEP 578 says so: native code can bypass them), which is
why the runner adds resource limits and, where available, a network namespace.

On the first forbidden event the guard reports it through the callback and the process exits
at once (``os._exit``): raising would let ``try/except Exception`` in user code swallow it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable

__all__ = ["EXIT_VIOLATION", "install", "neutralize_fork_exec"]

EXIT_VIOLATION = 86

# Events that are never legitimate for tool code (prefix match).
BLOCKED_PREFIXES: tuple[str, ...] = (
    # network
    "socket.", "urllib.", "http.client.", "ftplib.", "smtplib.", "poplib.", "imaplib.",
    "nntplib.", "telnetlib.", "webbrowser.", "sqlite3.",
    # processes and signals to other processes
    "subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.kill",
    "os.killpg", "os.startfile", "signal.pthread_kill", "pty.",
    # native code and interpreter internals
    "ctypes.", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
    # raising our own limits back up
    "resource.setrlimit", "resource.prlimit",
    # filesystem mutation
    "shutil.", "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
    "os.truncate", "os.chmod", "os.chown", "os.chflags", "os.lchflags", "os.lchmod", "os.utime",
    "os.setxattr", "os.removexattr", "os.putenv", "os.unsetenv",
    # interactive
    "builtins.input", "builtins.breakpoint", "pdb.",
)
# Modules whose first import at run time means user code wants a process, socket or FFI.
# (Already-imported modules raise no import event; their *operations* are blocked above.)
DENIED_IMPORTS: frozenset[str] = frozenset({
    "ctypes", "_ctypes", "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing",
    "socket", "_socket", "ssl", "_ssl", "pty",
})
_LISTING_EVENTS = frozenset({"os.listdir", "os.scandir"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

Report = Callable[[str, str], None]


def _writes(mode: object, flags: object) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def install(*, read_roots: Iterable[str], report: Report) -> None:
    """Install the audit hook.

    Args:
        read_roots: folders whose files may be opened for reading (the sandbox folder, the
            interpreter's prefixes and ``sys.path`` entries, so lazy imports keep working).
        report: called with (event, detail) on a violation; it must not return normally
            (the guard calls ``os._exit(EXIT_VIOLATION)`` after it in any case).
    """
    roots = tuple(sorted({os.path.join(os.path.realpath(r), "") for r in read_roots if r}))

    def readable(path: object) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor; writes through it are caught by mode
        try:
            real = os.path.realpath(os.fsdecode(path if path is not None else "."))
        except (TypeError, ValueError):
            return False
        return os.path.join(real, "").startswith(roots)

    def violate(event: str, detail: str) -> None:
        try:
            report(event, detail[:300])
        finally:
            os._exit(EXIT_VIOLATION)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if _writes(mode, flags):
                violate(event, f"opening {path!r} for writing")
            elif not readable(path):
                violate(event, f"reading {path!r} outside the sandbox folder")
        elif event in _LISTING_EVENTS:
            if not readable(args[0] if args else None):
                violate(event, f"listing {args[0]!r} outside the sandbox folder")
        elif event == "import":
            if args and args[0] in DENIED_IMPORTS:
                violate(event, f"importing {args[0]!r}")
        elif event.startswith(BLOCKED_PREFIXES):
            violate(event, repr(args))

    sys.addaudithook(hook)


def neutralize_fork_exec(report: Report) -> None:
    """Replace ``_posixsubprocess.fork_exec`` if a preloaded library imported it.

    It forks and execs without raising any audit event (checked on CPython 3.11), and pandas
    imports ``subprocess`` at import time, so without this a direct call would slip past.
    """
    def blocked(*_args: object, **_kwargs: object) -> None:
        try:
            report("_posixsubprocess.fork_exec", "starting a process")
        finally:
            os._exit(EXIT_VIOLATION)

    for name, attr in (("_posixsubprocess", "fork_exec"), ("subprocess", "_fork_exec")):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, attr):
            setattr(module, attr, blocked)
