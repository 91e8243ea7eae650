"""The OS boundary around untrusted code: one bubblewrap container per sandbox process.

It must hold on its own, with every Python layer (AST policy, audit hook) defeated. The child
runs under bubblewrap with:

* fresh user, PID, mount, network, IPC, UTS (and, where possible, cgroup) namespaces, and
  ``--disable-userns`` so it cannot nest another user namespace to regain capabilities;
* uid/gid 65534 inside its user namespace, every capability dropped, ``no_new_privs``, a new
  session (no terminal to inject keystrokes into) and death with its parent;
* a filesystem holding only what the child needs, all read-only: the C libraries, the
  interpreter (the files of ``sys.executable``, the standard library, the site-packages),
  the folder copy at :data:`FOLDER` (its cwd), the two runtime files at :data:`RUNTIME`, a
  private size-capped tmpfs on ``/tmp``, and its own ``/proc`` (it sees only its own
  processes; the parent, and the API keys in the parent's environment, are not there). There
  is no ``/dev``: a device node bound from the host could be chmod-ed through it, since the
  sandbox user maps to the caller's uid outside;
* the seccomp filter of :mod:`sopforge.sandbox.seccomp` (process creation, non-local sockets,
  namespaces, mounts, ptrace, ... kill the process);
* a clean environment for *every* process inside: bubblewrap itself is started with an empty
  environment, because the PID-namespace init it leaves running keeps the environment it was
  started with, and the child's variables are set with ``--setenv`` (nothing secret is ever
  on that command line, which the sandbox can read at ``/proc/1/cmdline``).

Where the container cannot be created (bwrap missing, user namespaces disabled, a container
runtime's seccomp profile) untrusted code does not run at all: :func:`ensure_available`
raises :class:`SandboxUnavailable` with one line naming the fix. There is no weaker fallback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

from sopforge.errors import UserError
from sopforge.sandbox import seccomp

__all__ = ["BWRAP_PATH", "FOLDER", "RUNTIME", "SANDBOX_UID", "SandboxUnavailable", "bwrap_command",
           "ensure_available", "interpreter_mounts"]

# Module constants rather than settings: tests point BWRAP_PATH at a missing file to check
# that nothing runs without the boundary.
BWRAP_PATH = "/usr/bin/bwrap"
SANDBOX_UID = 65534  # "nobody" inside the sandbox's own user namespace
FOLDER = "/bench"  # where the folder copy is mounted (the child's cwd)
RUNTIME = "/opt/sopforge-sandbox"  # child.py and guard.py
TMPFS_BYTES = 16 * 1024 * 1024
# System library locations, bound read-only when they exist (or re-created as the same symlink).
_SYSTEM_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32")
_SYSTEM_FILES = ("/etc/ld.so.cache",)
_OPTIONAL_DIRS = ("/usr/share/zoneinfo",)
_FIX = ("install bubblewrap (apt-get install bubblewrap) and allow user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1; in Docker run with --security-opt seccomp=unconfined "
        "--security-opt apparmor=unconfined); untrusted code never runs without it")


class SandboxUnavailable(UserError):
    """The OS boundary cannot be set up here, so untrusted code is not run at all."""


def _covered(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def interpreter_mounts() -> list[str]:
    """bwrap arguments that make this interpreter and its site-packages runnable, read-only.

    The paths are the same inside as outside, so ``sys.executable`` (a venv's symlink
    included) starts the same interpreter with the same ``sys.path``.
    """
    args: list[str] = []
    bound: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for path in (*_SYSTEM_FILES, *_OPTIONAL_DIRS):
        if os.path.exists(path) and not _covered(path, bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    exe = sys.executable
    links = []
    while os.path.islink(exe):  # a venv's bin/python -> the base interpreter, hop by hop
        target = os.readlink(exe)
        links.append((target, exe))
        exe = os.path.normpath(os.path.join(os.path.dirname(exe), target))
    paths = sysconfig.get_paths()
    wanted = [exe]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        wanted.append(sysconfig.get_config_var("LIBDIR") or "")
    wanted += [paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    # Not the parent's sys.path: it can hold the user's working directory (and its .env files).
    wanted.append(os.path.join(sys.prefix, "pyvenv.cfg"))
    for path in sorted({os.path.realpath(p) for p in wanted if p and os.path.exists(p)}, key=len):
        if not _covered(path, bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for target, link in links:
        if not _covered(link, bound):
            args += ["--symlink", target, link]
    return args


def bwrap_command(*, folder: Path, runtime_files: list[Path], env: dict[str, str], argv: list[str],
                  seccomp_fd: int | None) -> list[str]:
    """The full bwrap command line for one sandbox process.

    Args:
        folder: the folder copy, mounted read-only at :data:`FOLDER` and used as cwd.
        runtime_files: files mounted read-only under :data:`RUNTIME` (the child and guard).
        env: the child's complete environment (bwrap itself gets none).
        argv: the command to run inside, e.g. ``[sys.executable, "-s", ..., RUNTIME + "/child.py"]``.
        seccomp_fd: a readable fd holding the filter program, or None for no filter.
    """
    cmd = [BWRAP_PATH, "--unshare-all", "--unshare-user", "--disable-userns",
           "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
           "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    # The private /tmp first: bwrap mounts in order, so an interpreter or venv that lives under /tmp
    # (a CI checkout in /tmp) is bound on top of it instead of being hidden by it.
    cmd += ["--size", str(TMPFS_BYTES), "--tmpfs", "/tmp"]
    cmd += interpreter_mounts()
    cmd += ["--ro-bind", str(folder), FOLDER]
    for path in runtime_files:
        cmd += ["--ro-bind", str(path), f"{RUNTIME}/{path.name}"]
    cmd += ["--proc", "/proc", "--remount-ro", "/",
            "--chdir", FOLDER]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return [*cmd, "--", *argv]


_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}  # bwrap path -> None (works) or the reason it does not


def _probe(bwrap: str) -> str | None:
    if not os.path.isfile(bwrap) or not os.access(bwrap, os.X_OK):
        return f"{bwrap} is missing"
    probe = f"import os; os.listdir({FOLDER!r}); print(os.getuid())"
    cmd = bwrap_command(folder=Path(sys.prefix), runtime_files=[], env={"LANG": "C.UTF-8"},
                        argv=[sys.executable, "-S", "-c", probe], seccomp_fd=None)
    try:
        done = subprocess.run(cmd, env={}, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return f"bubblewrap could not be started ({err})"
    if done.returncode != 0 or done.stdout.strip() != str(SANDBOX_UID):
        lines = (done.stderr.strip() or f"exit status {done.returncode}").splitlines()
        return f"bubblewrap cannot create the sandbox here ({lines[-1][:200]})"
    return None


def ensure_available() -> None:
    """Check once per process (and bwrap path) that the boundary can be created.

    Raises:
        SandboxUnavailable: bubblewrap is missing or cannot create namespaces here.
    """
    bwrap = BWRAP_PATH
    with _probe_lock:
        if bwrap not in _probed:
            _probed[bwrap] = _probe(bwrap)
        reason = _probed[bwrap]
    if reason:
        raise SandboxUnavailable(f"the sandbox for untrusted code is unavailable: {reason}; {_FIX}")


def seccomp_program() -> bytes | None:
    """The filter for this machine (None where there is no syscall table for it)."""
    return seccomp.filter_program()
