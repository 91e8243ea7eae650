"""A seccomp-BPF filter for the sandbox child, assembled here so no libseccomp is needed.

bubblewrap loads it (``--seccomp FD``) right before it executes the interpreter, so it binds
the child and everything the child could start. It does not try to list what Python needs;
it *kills the process* on the few system calls that only an escape attempt makes, so such an
attempt is stopped and reported (the parent sees SIGSYS) rather than quietly failing inside a
``try``:

* creating processes: ``fork``, ``vfork``, and ``clone`` without ``CLONE_THREAD`` (threads stay
  allowed: pyarrow starts one at import). ``clone3`` keeps its flags in memory a filter cannot
  read, so it fails with ENOSYS and the C library falls back to ``clone``;
* sockets of every family but AF_UNIX, and ``execveat`` (``execve`` itself must stay: bubblewrap uses it to
  start the interpreter after loading the filter; without fork, the only way to reach it
  is replacing the interpreter, which the audit hook stops and which starts nothing new).
  An AF_UNIX ``socket`` or ``socketpair`` fails with EACCES instead of killing: the C library
  tries one for name-service lookups (``getpwuid``), and in a private network and mount
  namespace with no host socket mounted it reaches nothing;
* namespaces and mounts (``unshare``, ``setns``, ``mount`` and the new mount API, ...);
* other processes' memory (``ptrace``, ``process_vm_*``, ``pidfd_getfd``);
* kernel attack surface that tool code never needs (``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``io_uring_*``, keyrings, module loading, handle-based opens);
* per-user kernel objects that tool code never needs and that could run a user's quota dry
  (``inotify_init*``, ``fanotify_init``): an attempt is a reported kill, not a quiet EMFILE.

Other architectures than x86_64 and aarch64 get no filter (``filter_program`` returns None);
the namespaces, the unprivileged user and ``no_new_privs`` still hold there.
"""

from __future__ import annotations

import platform
import struct

__all__ = ["SIGSYS_EXIT", "filter_program", "supported"]

# bubblewrap's init exits with 128 + the signal that ended the command.
SIGSYS_EXIT = 128 + 31

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_KILL_PROCESS = 0x80000000
_ALLOW = 0x7FFF0000
_ERRNO_ENOSYS = 0x00050000 | 38
_ERRNO_EACCES = 0x00050000 | 13
_AF_UNIX = 1
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
# offsets in struct seccomp_data: nr, arch, then args[] of 8 bytes each (little-endian low word first)
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

_COMMON_KILL = (  # names shared by both tables below
    "connect", "bind", "listen", "accept", "accept4", "execveat",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "unshare", "setns",
    "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "bpf",
    "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "inotify_init1", "fanotify_init",
)

_ARCHES: dict[str, dict] = {
    "x86_64": {
        "audit_arch": 0xC000003E, "x32": True, "clone": 56, "clone3": 435,
        "numbers": {
            "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43,
            "accept4": 288, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
            "process_vm_writev": 311, "pidfd_getfd": 438, "unshare": 272, "setns": 308, "mount": 165,
            "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
            "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
            "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
            "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
            "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
            "delete_module": 176, "open_by_handle_at": 304, "name_to_handle_at": 303,
            "inotify_init1": 294, "fanotify_init": 300, "fork": 57, "vfork": 58, "inotify_init": 253,
        },
    },
    "aarch64": {
        "audit_arch": 0xC00000B7, "x32": False, "clone": 220, "clone3": 435,
        "numbers": {
            "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201, "accept": 202,
            "accept4": 242, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
            "process_vm_writev": 271, "pidfd_getfd": 438, "unshare": 97, "setns": 268, "mount": 40,
            "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429,
            "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
            "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
            "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
            "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
            "delete_module": 106, "open_by_handle_at": 265, "name_to_handle_at": 264,
            "inotify_init1": 26, "fanotify_init": 262,
        },
    },
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def supported(machine: str | None = None) -> bool:
    """Whether a filter exists for this machine's architecture."""
    return (machine or platform.machine()) in _ARCHES


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter as raw ``struct sock_filter`` records (what ``bwrap --seccomp`` reads).

    Args:
        machine: ``platform.machine()`` value; defaults to this machine.

    Returns:
        The program, or None for an architecture without a syscall table here.
    """
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    numbers = arch["numbers"]
    kill = sorted({numbers[name] for name in (*_COMMON_KILL, "fork", "vfork", "inotify_init") if name in numbers})
    prog = [
        _insn(_LD_W_ABS, 0, 0, _ARCH),
        _insn(_JEQ, 1, 0, arch["audit_arch"]),  # another ABI (e.g. i386 int 0x80): kill
        _insn(_RET, 0, 0, _KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _NR),
    ]
    if arch["x32"]:  # x32 system call numbers alias the x86_64 ones with bit 30 set
        prog += [_insn(_JGE, 0, 1, _X32_BIT), _insn(_RET, 0, 0, _KILL_PROCESS)]
    prog += [_insn(_JEQ, 0, 1, arch["clone3"]), _insn(_RET, 0, 0, _ERRNO_ENOSYS),
             _insn(_JEQ, 0, 1, numbers["socketpair"]), _insn(_RET, 0, 0, _ERRNO_EACCES),
             _insn(_JEQ, 0, 4, numbers["socket"]),  # not socket: skip its four instructions
             _insn(_LD_W_ABS, 0, 0, _ARG0_LOW),
             _insn(_JEQ, 0, 1, _AF_UNIX),
             _insn(_RET, 0, 0, _ERRNO_EACCES),
             _insn(_RET, 0, 0, _KILL_PROCESS)]
    for nr in kill:
        prog += [_insn(_JEQ, 0, 1, nr), _insn(_RET, 0, 0, _KILL_PROCESS)]
    prog += [
        _insn(_JEQ, 0, 3, arch["clone"]),  # not clone: skip to ALLOW
        _insn(_LD_W_ABS, 0, 0, _ARG0_LOW),
        _insn(_JSET, 1, 0, _CLONE_THREAD),  # a thread: skip the kill
        _insn(_RET, 0, 0, _KILL_PROCESS),
        _insn(_RET, 0, 0, _ALLOW),
    ]
    return b"".join(prog)
