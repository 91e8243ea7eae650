"""The OS boundary around untrusted code: one bubblewrap container per sandbox process.

It must hold on its own, with every Python layer (AST policy, audit hook) defeated. The child
runs under bubblewrap with:

* fresh PID, mount, network, IPC, UTS (and, where possible, cgroup) namespaces, a new session
  (no terminal to inject keystrokes into), death with its parent, every capability dropped
  (permitted, effective, inheritable, ambient and bounding sets) and ``no_new_privs``;
* **an unprivileged host user**, so the kernel's per-user accounting (processes and threads,
  inotify instances, queued signals, pipe buffers, ...) charges the sandbox and never root,
  and root-only files stay unreadable. Three cases (:func:`identity`):

  - sopforge is not root: bubblewrap runs unprivileged, in a fresh user namespace with
    ``--disable-userns``, uid 65534 inside, which the kernel maps to the caller's own uid;
  - sopforge is root with ``CAP_SYS_ADMIN`` (a host, a privileged container): bubblewrap sets
    up the container as root *without* a user namespace (one created by root is owned by root,
    and the kernel charges what happens inside it to root's counters), and ``setpriv`` drops
    to the dedicated :data:`HOST_ID` before the interpreter starts;
  - sopforge is root without ``CAP_SYS_ADMIN`` (Docker's default): ``setpriv`` drops to
    :data:`HOST_ID` first, and bubblewrap runs unprivileged as that user, as in the first case.
    The interpreter and its site-packages must then be readable by :data:`HOST_ID`;

* a filesystem holding only what the child needs, all read-only: the C libraries, the
  interpreter (the files of ``sys.executable``, the standard library, the site-packages),
  the folder copy at :data:`FOLDER` (its cwd), the two runtime files at :data:`RUNTIME`, a
  private size-capped tmpfs on ``/tmp``, and its own ``/proc`` (it sees only its own
  processes; the parent, and the API keys in the parent's environment, are not there). There
  is no ``/dev``. Every folder on the way to a mount is created world-traversable (0755) and
  empty, so the unprivileged user reaches what is mounted and nothing more;
* the seccomp filter of :mod:`sopforge.sandbox.seccomp` (process creation, non-local sockets,
  namespaces, mounts, ptrace, inotify, ... kill the process);
* a clean environment for *every* process inside: bubblewrap itself is started with an empty
  environment, because the PID-namespace init it leaves running keeps the environment it was
  started with, and the child's variables are set with ``--setenv`` (nothing secret is ever
  on that command line, which the sandbox can read at ``/proc/1/cmdline``).

Where the container cannot be created (bwrap or setpriv missing, user namespaces disabled, a
container runtime's seccomp profile, an interpreter the unprivileged user cannot read)
untrusted code does not run at all: :func:`ensure_available` raises
:class:`SandboxUnavailable` with one line naming the fix. There is no weaker fallback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sopforge.errors import UserError
from sopforge.sandbox import seccomp

__all__ = ["BWRAP_PATH", "FOLDER", "HOST_ID", "RUNTIME", "SANDBOX_UID", "SETPRIV_PATH", "Identity",
           "SandboxUnavailable", "bwrap_command", "ensure_available", "has_sys_admin", "identity",
           "interpreter_mounts", "staging_mode"]

# Module constants rather than settings: tests point BWRAP_PATH at a missing file to check
# that nothing runs without the boundary.
BWRAP_PATH = "/usr/bin/bwrap"
SETPRIV_PATH = "/usr/bin/setpriv"  # util-linux; used only when sopforge runs as root
SANDBOX_UID = 65534  # "nobody" inside the sandbox's own user namespace (unprivileged callers)
# The host uid and gid of the sandbox when sopforge runs as root: an id no account uses, so
# nothing else on the host shares its kernel counters or owns files it could read.
HOST_ID = 2_000_000_000
FOLDER = "/bench"  # where the folder copy is mounted (the child's cwd)
RUNTIME = "/opt/sopforge-sandbox"  # child.py and guard.py
TMPFS_BYTES = 16 * 1024 * 1024
# System library locations, bound read-only when they exist (or re-created as the same symlink).
_SYSTEM_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32")
_SYSTEM_FILES = ("/etc/ld.so.cache",)
_OPTIONAL_DIRS = ("/usr/share/zoneinfo",)
_FIX = ("install bubblewrap and util-linux (apt-get install bubblewrap util-linux) and allow user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1; in Docker run with --security-opt seccomp=unconfined "
        "--security-opt apparmor=unconfined); untrusted code never runs without it")


class SandboxUnavailable(UserError):
    """The OS boundary cannot be set up here, so untrusted code is not run at all."""


@dataclass(frozen=True)
class Identity:
    """Who the sandboxed process is, to itself and to the host kernel."""

    uid: int  # what the child sees for itself (getuid), also its gid
    host_uid: int  # what the host kernel accounts it to; never 0
    userns: bool  # in a fresh user namespace, or in the host's
    drop: Literal["none", "inside", "outside"]  # where setpriv drops root to HOST_ID: not at all, or around bwrap


_CAP_SYS_ADMIN = 21


def has_sys_admin() -> bool:
    """This process holds CAP_SYS_ADMIN (root on a host, not root in Docker's default container)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            caps = next(int(line.split()[1], 16) for line in handle if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return False
    return bool(caps >> _CAP_SYS_ADMIN & 1)


def identity() -> Identity:
    """The sandbox's identity for this caller (see the module docstring)."""
    if os.geteuid() != 0:
        return Identity(uid=SANDBOX_UID, host_uid=os.getuid(), userns=True, drop="none")
    if has_sys_admin():
        return Identity(uid=HOST_ID, host_uid=HOST_ID, userns=False, drop="inside")
    return Identity(uid=SANDBOX_UID, host_uid=HOST_ID, userns=True, drop="outside")


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


_MOUNT_OPS = {"--ro-bind": 2, "--bind": 2, "--symlink": 2, "--tmpfs": 1, "--proc": 1, "--dir": 1}
_BINDS = ("--ro-bind", "--bind")


def _with_parents(mounts: list[str], mounted: tuple[str, ...] = ()) -> list[str]:
    """``mounts`` preceded by ``--perms 0755 --dir`` for every folder leading to a destination.

    bubblewrap would create them itself, with mode 0700 when it runs as root, which the
    unprivileged sandbox user could not traverse. ``mounted`` are destinations set up before.
    """
    destinations, binds, i = list(mounted), [], 0
    while i < len(mounts):
        arity = _MOUNT_OPS.get(mounts[i])
        if arity is None:  # an option with one argument that applies to the next one (--size, --perms)
            i += 2
            continue
        destinations.append(mounts[i + arity])
        if mounts[i] in _BINDS:
            binds.append(mounts[i + arity])
        i += arity + 1
    parents: set[str] = set()
    for dest in destinations:
        parent = os.path.dirname(dest)
        while parent not in ("/", ""):
            parents.add(parent)
            parent = os.path.dirname(parent)
    made = sorted((p for p in parents - set(destinations) if not _covered(p, binds)),
                  key=lambda p: (p.count("/"), p))
    out: list[str] = []
    for path in made:
        out += ["--perms", "0755", "--dir", path]
    return out + mounts


def bwrap_command(*, folder: Path, runtime_files: list[Path], env: dict[str, str], argv: list[str],
                  seccomp_fd: int | None, info_fd: int | None = None) -> list[str]:
    """The full bwrap command line for one sandbox process.

    Args:
        folder: the folder copy, mounted read-only at :data:`FOLDER` and used as cwd.
        runtime_files: files mounted read-only under :data:`RUNTIME` (the child and guard).
        env: the child's complete environment (bwrap itself gets none).
        argv: the command to run inside, e.g. ``[sys.executable, "-s", ..., RUNTIME + "/child.py"]``;
            under root it runs through ``setpriv`` as :data:`HOST_ID`.
        seccomp_fd: a readable fd holding the filter program, or None for no filter.
        info_fd: a writable fd where bwrap writes, as JSON, the host pid of the sandboxed process.
    """
    who = identity()
    setpriv = [SETPRIV_PATH, f"--reuid={HOST_ID}", f"--regid={HOST_ID}", "--clear-groups",
               "--inh-caps=-all", "--bounding-set=-all", "--"]
    drop: list[str] = []
    if who.userns:
        cmd = [BWRAP_PATH, "--unshare-all", "--unshare-user", "--disable-userns",
               "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
        if who.drop == "outside":  # bwrap itself runs as HOST_ID, so the user namespace is HOST_ID's
            cmd = [*setpriv, *cmd]
    else:
        # No user namespace: one created by root is owned by root, and the kernel charges what
        # happens inside it to root's counters. setpriv needs these three capabilities to drop
        # to HOST_ID and to clear the inheritable and bounding sets; after it, none is left.
        cmd = [BWRAP_PATH, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--cap-drop", "ALL",
               "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        drop = setpriv
    # --as-pid-1: the sandboxed process is the namespace's init and bwrap's own child, so bwrap
    # reaps it; with bwrap's init in between, that init was left to the host's pid 1 as a zombie
    # still charged to the run's pids cgroup. (As init, it ignores signals it has no handler for
    # unless the kernel forces them: SIGKILL, SIGSYS and SIGSEGV are.)
    cmd += ["--as-pid-1", "--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    if info_fd is not None:
        cmd += ["--info-fd", str(info_fd)]
    # The private /tmp first: bwrap mounts in order, so an interpreter or venv that lives under /tmp
    # (a CI checkout in /tmp) is bound on top of it instead of being hidden by it.
    cmd += ["--perms", "01777", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp"]
    mounts = interpreter_mounts()
    if drop:
        mounts += ["--ro-bind", SETPRIV_PATH, SETPRIV_PATH]
    mounts += ["--ro-bind", str(folder), FOLDER]
    for path in runtime_files:
        mounts += ["--ro-bind", str(path), f"{RUNTIME}/{path.name}"]
    mounts += ["--proc", "/proc"]
    cmd += _with_parents(mounts, mounted=("/tmp",)) + ["--remount-ro", "/", "--chdir", FOLDER]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return [*cmd, "--", *drop, *argv]


def staging_mode() -> int:
    """Mode for the folder holding a run's staged copy: 0711 when bwrap itself runs as HOST_ID and
    must reach the copy through it (the copy's name is random; the folder cannot be listed)."""
    return 0o711 if identity().drop == "outside" else 0o700


_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}  # bwrap path -> None (works) or the reason it does not


def _probe(bwrap: str) -> str | None:
    who = identity()
    for tool in (bwrap, *([] if who.drop == "none" else [SETPRIV_PATH])):
        if not os.path.isfile(tool) or not os.access(tool, os.X_OK):
            return f"{tool} is missing"
    # As the sandbox user: the folder, the standard library (with a compiled module) and the
    # site-packages must be readable by it, not only by the caller.
    purelib = sysconfig.get_paths().get("purelib", "")
    probe = (f"import os, decimal; os.listdir({FOLDER!r}); os.listdir({purelib!r}); "
             "print(os.getuid(), os.getgid())")
    cmd = bwrap_command(folder=Path(purelib), runtime_files=[], env={"LANG": "C.UTF-8"},
                        argv=[sys.executable, "-S", "-c", probe], seccomp_fd=None)
    try:
        done = subprocess.run(cmd, env={}, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return f"bubblewrap could not be started ({err})"
    if done.returncode != 0 or done.stdout.split() != [str(who.uid)] * 2:
        lines = (done.stderr.strip() or f"exit status {done.returncode}").splitlines()
        return (f"bubblewrap cannot create the sandbox here as uid {who.host_uid} ({lines[-1][:200]}; the "
                "interpreter and its site-packages must be readable by that user)")
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
