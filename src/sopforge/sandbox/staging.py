"""The one way the host copies an untrusted folder: as data, regular files only.

A folder downloaded from the internet (or written by a model) is read by this process before
any sandbox exists: to check its code against the policy, to load its CSV, to copy it for the
container. Reading it naively is an attack surface of its own: ``notes.txt`` linked to
``/proc/self/environ`` becomes a copy of the parent's API keys, ``helper.py`` linked to
``/dev/zero`` exhausts memory, a FIFO named ``helper.py`` hangs the reader, a 4 GiB sparse file
fills ``/tmp``. So every place that stages a folder (the sandbox runner, ``sopforge audit``, the
replay driver, the ground-truth harness) goes through :func:`stage_folder`, which

* walks the tree through directory file descriptors and opens every entry with ``O_NOFOLLOW``
  (a symbolic link is refused, never followed, at any depth, even if it is swapped in while the
  walk runs) and ``O_NONBLOCK`` (a FIFO swapped in for a file cannot block the open);
* copies regular files only: FIFOs, sockets and device nodes are refused, and so is a regular
  file with hard links outside the folder (its other name could be any file of the host);
* refuses native extension modules (``.so``, ``.pyd``, ...): Python would import one in
  preference to the ``.py`` of the same name, and compiled code is beyond every static check;
* caps the size of each file, of the whole folder, the number of entries and the depth, judged
  from ``fstat`` *before* reading and enforced again while reading (a file that grows is refused);
* writes the copy with fixed modes (0644 files, 0755 folders) so the unprivileged sandbox user
  can read it whatever the source's modes were.

Refused entries are not copied and are listed in :attr:`StagedFolder.refused`; the caller
decides what a refusal means (the runner does not run the folder, the audit fails it).
"""

from __future__ import annotations

import errno
import fnmatch
import importlib.machinery
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sopforge.errors import UserError

__all__ = ["DEFAULT_SKIP", "Refusal", "StagedFolder", "StagingLimits", "read_regular_file", "stage_folder"]

MIB = 1024 ** 2
# Never copied and never reported: caches a sandbox run must not trust (a stale .pyc would be
# imported instead of its source) and version-control metadata no tool reads.
DEFAULT_SKIP: tuple[str, ...] = ("__pycache__", "*.pyc", "*.pyo", ".git")
_NATIVE_SUFFIXES = tuple(sorted({*importlib.machinery.EXTENSION_SUFFIXES, ".so", ".pyd", ".dylib", ".dll"}))
_SHOWN_REFUSALS = 200
_CHUNK = MIB
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass(frozen=True)
class StagingLimits:
    """How much of a folder the host is willing to copy."""

    max_file_bytes: int = 64 * MIB
    max_total_bytes: int = 512 * MIB
    max_entries: int = 20_000
    max_depth: int = 32


@dataclass(frozen=True)
class Refusal:
    """One entry that was not copied, and why."""

    path: str
    reason: str

    @property
    def message(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class StagedFolder:
    """What :func:`stage_folder` copied and what it refused."""

    root: Path
    files: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    refused_count: int = 0
    bytes: int = 0

    @property
    def ok(self) -> bool:
        return not self.refused_count

    def summary(self, limit: int = 3) -> str:
        """The first refusals as one line (with how many more there are)."""
        shown = "; ".join(r.message for r in self.refused[:limit])
        more = self.refused_count - min(limit, len(self.refused))
        return shown + (f"; and {more} more" if more > 0 else "")


def _is_native(name: str) -> bool:
    lowered = name.lower()
    return lowered.endswith(_NATIVE_SUFFIXES) or ".so." in lowered


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    return "not a regular file"


class _Walk:
    """One staging walk; ``refuse`` records, the rest copies."""

    def __init__(self, dest: Path, skip: tuple[str, ...], limits: StagingLimits):
        self.dest, self.skip, self.limits = dest, skip, limits
        self.result = StagedFolder(root=dest)
        self.entries = 0
        self.full = False  # the entry cap was reached: nothing more is copied
        self.links: dict[tuple[int, int], tuple[int, list[str]]] = {}  # (dev, ino) -> (st_nlink, names)

    def refuse(self, rel: str, reason: str) -> None:
        self.result.refused_count += 1
        if len(self.result.refused) < _SHOWN_REFUSALS:
            self.result.refused.append(Refusal(rel, reason))

    def skipped(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.skip)

    def directory(self, dir_fd: int, rel: str, depth: int) -> None:
        names: list[str] = []
        with os.scandir(dir_fd) as listing:
            for entry in listing:  # a folder of a million names is not listed whole
                names.append(entry.name)
                if len(names) > self.limits.max_entries:
                    break
        names.sort()
        for name in names:
            child = f"{rel}/{name}" if rel else name
            if self.full or self.skipped(name):
                continue
            self.entries += 1
            if self.entries > self.limits.max_entries:
                self.refuse(child, f"the folder has more than {self.limits.max_entries} entries; the rest is not copied")
                self.full = True
                return
            try:
                self.entry(dir_fd, name, child, depth)
            except OSError as err:
                self.refuse(child, f"cannot be read ({os.strerror(err.errno) if err.errno else err})")

    def entry(self, dir_fd: int, name: str, rel: str, depth: int) -> None:
        seen = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(seen.st_mode):
            if depth >= self.limits.max_depth:
                self.refuse(rel, f"nested deeper than {self.limits.max_depth} folders")
                return
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                if not _same(os.fstat(fd), seen):
                    self.refuse(rel, "changed while it was being copied")
                    return
                os.mkdir(self.dest / rel, 0o755)
                os.chmod(self.dest / rel, 0o755)
                self.directory(fd, rel, depth + 1)
            finally:
                os.close(fd)
            return
        if not stat.S_ISREG(seen.st_mode):
            target = ""
            if stat.S_ISLNK(seen.st_mode):
                try:
                    target = f" to {os.readlink(name, dir_fd=dir_fd)[:120]!r}"
                except OSError:
                    pass
            self.refuse(rel, f"is {_kind(seen.st_mode)}{target}; the host copies regular files only")
            return
        if _is_native(name):
            self.refuse(rel, "is a native extension module; compiled code is never copied or run")
            return
        self.regular(dir_fd, name, rel, seen)

    def regular(self, dir_fd: int, name: str, rel: str, seen: os.stat_result) -> None:
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as err:
            if err.errno == errno.ELOOP:  # swapped for a symlink after the stat
                self.refuse(rel, "is a symbolic link; the host copies regular files only")
                return
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _same(st, seen):
                self.refuse(rel, f"is {_kind(st.st_mode)} (swapped while being copied); the host copies regular files only")
                return
            if st.st_size > self.limits.max_file_bytes:
                self.refuse(rel, f"is {st.st_size} bytes; files over {self.limits.max_file_bytes} bytes are not copied")
                return
            if self.result.bytes + st.st_size > self.limits.max_total_bytes:
                self.refuse(rel, f"the folder exceeds {self.limits.max_total_bytes} bytes; the rest is not copied")
                return
            copied = self.copy(fd, rel, min(st.st_size, self.limits.max_file_bytes))
        finally:
            os.close(fd)
        if copied is None:
            self.refuse(rel, "grew while it was being copied")
            (self.dest / rel).unlink(missing_ok=True)
            return
        self.result.bytes += copied
        self.result.files.append(rel)
        if st.st_nlink > 1:
            _, names = self.links.setdefault((st.st_dev, st.st_ino), (st.st_nlink, []))
            names.append(rel)

    def copy(self, fd: int, rel: str, expected: int) -> int | None:
        """Copy at most ``expected`` bytes; None when the file holds more than fstat said."""
        out = os.open(self.dest / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.fchmod(out, 0o644)
            done = 0
            while True:
                chunk = os.read(fd, min(_CHUNK, expected - done + 1))
                if not chunk:
                    return done
                done += len(chunk)
                if done > expected:
                    return None
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
        finally:
            os.close(out)

    def outside_links(self) -> None:
        """Refuse every file whose link count says another name exists outside the folder."""
        for nlink, names in self.links.values():
            if len(names) < nlink:
                for rel in names:
                    self.refuse(rel, f"is hard-linked ({nlink} names) to a file outside the folder; copy it instead")
                    (self.dest / rel).unlink(missing_ok=True)
                    self.result.files.remove(rel)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def stage_folder(source: Path, dest: Path, *, skip: tuple[str, ...] = (),
                 limits: StagingLimits | None = None) -> StagedFolder:
    """Copy the regular files of ``source`` into the new folder ``dest``, refusing everything else.

    Args:
        source: the folder to copy. The path itself may be a symlink (the user named it);
            nothing inside it is followed.
        dest: a path that does not exist yet; created with mode 0755.
        skip: extra file-name patterns (``fnmatch``) to leave out silently, besides
            :data:`DEFAULT_SKIP`.
        limits: size, entry and depth caps (default ``StagingLimits()``).

    Returns:
        What was copied and what was refused (refused entries are absent from ``dest``).

    Raises:
        UserError: ``source`` is not a readable folder.
    """
    limits = limits or StagingLimits()
    try:
        root_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise UserError(f"cannot read the folder {source}: {os.strerror(err.errno) if err.errno else err}") from None
    walk = _Walk(Path(dest), (*DEFAULT_SKIP, *skip), limits)
    try:
        os.mkdir(dest, 0o755)
        os.chmod(dest, 0o755)
        walk.directory(root_fd, "", 0)
    finally:
        os.close(root_fd)
    walk.outside_links()
    return walk.result


def read_regular_file(path: Path, *, max_bytes: int = 64 * MIB, follow: bool = False) -> bytes:
    """Read one file as data: a regular file of at most ``max_bytes``, never a FIFO or device.

    Args:
        path: the file.
        max_bytes: larger files are refused before anything is read.
        follow: follow a symlink at ``path`` itself (a file the user named on the command line);
            by default a symlink is refused.

    Raises:
        UserError: the file is missing, not a regular file, or too large.
    """
    flags = _FILE_FLAGS if not follow else _FILE_FLAGS & ~os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as err:
        why = "is a symbolic link" if err.errno == errno.ELOOP else os.strerror(err.errno or errno.EIO).lower()
        raise UserError(f"cannot read {path}: {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"cannot read {path}: it is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise UserError(f"cannot read {path}: it is {st.st_size} bytes (at most {max_bytes})")
        chunks, total = [], 0
        while chunk := os.read(fd, min(_CHUNK, max_bytes - total + 1)):
            total += len(chunk)
            if total > max_bytes:
                raise UserError(f"cannot read {path}: it grew beyond {max_bytes} bytes while being read")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
