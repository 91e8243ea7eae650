"""Run LLM-written tool code in a separate, resource-limited, contained Python process.

Layers, outermost first: the host copies the folder as data (``staging.py``: regular files
only, no links, FIFOs, devices or native modules, capped) and reads only that copy; the AST
policy (``policy.py``) rejects the code before anything runs; the child (``child.py``) runs inside the bubblewrap container of ``boundary.py`` (its
own user, PID, mount, network, IPC and UTS namespaces, uid 65534, no capabilities,
``no_new_privs``, a seccomp filter, read-only mounts of only the interpreter and a fresh copy
of the folder, a clean environment); inside, rlimits on CPU, address space, file size, open
files and processes, and a PEP 578 audit hook (``guard.py``) that reports network, process,
FFI and out-of-folder file events as violations. The parent enforces wall-clock time by
killing the process group. The result reports which layers the child confirmed from inside,
not which were merely requested.

The boundary is required: where it cannot be set up, :class:`SandboxUnavailable` is raised
and nothing runs. ``skip_policy`` and ``skip_guard`` switch off the Python layers only, for
the tests that show the OS boundary holds on its own.

Calls are batched: one process handles many groups of tool calls (or many function calls),
streaming one framed record per group, so thousands of rows cost one interpreter start.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, get_args

from sopforge.errors import UserError
from sopforge.checks import CheckResult, check
from sopforge.sandbox import boundary
from sopforge.sandbox.launch import run_processes
from sopforge.sandbox.models import Layer, SandboxLimits, SandboxResult
from sopforge.sandbox.policy import DEFAULT_ALLOWED, PUBLISHED_ALLOWED, PolicyMode, check_code, imported_modules
from sopforge.sandbox.staging import StagedFolder, stage_folder

__all__ = ["CALLS_SCRIPT", "CHILD_SCRIPT", "GUARD_SCRIPT", "child_command", "run_in_sandbox"]

CHILD_SCRIPT = Path(__file__).with_name("child.py")
GUARD_SCRIPT = Path(__file__).with_name("guard.py")
CALLS_SCRIPT = Path(__file__).with_name("calls.py")
_OPS = {"call_tools": "groups", "run_function": "calls"}
_LAYER_ORDER = list(get_args(Layer))
_PRELOAD = ("pandas", "numpy")  # heavy trusted libraries imported before the audit hook
_SAFE_ENV = {
    "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
    "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
    "HOME": "/tmp", "TMPDIR": "/tmp",
    # One BLAS/OpenMP thread: threads would each reserve address space under RLIMIT_AS and
    # would need RLIMIT_NPROC headroom; two malloc arenas keep the address space small too.
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "NUMEXPR_MAX_THREADS": "1", "MALLOC_ARENA_MAX": "2",
    # pyarrow's jemalloc (pulled in by pandas) starts a background thread at import, which the
    # run's task cap (max_processes, default 0) would refuse and count as a violation.
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}


def child_command(folder: Path, seccomp_fd: int | None, info_fd: int | None = None) -> list[str]:
    """The bwrap command that runs ``child.py`` on ``folder`` (mounted at boundary.FOLDER)."""
    # Not -I: it implies -E, which would drop PYTHONHASHSEED=0 (set ordering must be stable).
    # The environment is built from scratch instead, so -E has nothing left to protect
    # against; -s skips user site-packages, -P keeps the script's folder off sys.path,
    # -B stops bytecode writes (which the guard would report as a violation).
    argv = [sys.executable, "-s", "-P", "-B", f"{boundary.RUNTIME}/{CHILD_SCRIPT.name}"]
    return boundary.bwrap_command(folder=folder, runtime_files=[CHILD_SCRIPT, GUARD_SCRIPT, CALLS_SCRIPT],
                                  env=dict(_SAFE_ENV),
                                  argv=argv, seccomp_fd=seccomp_fd, info_fd=info_fd)


def _policy_checks(folder: Path, allowed: frozenset[str], exempt: str | None = None,
                   mode: PolicyMode = "generated") -> list[CheckResult]:
    """Check every .py file of the folder but ``exempt``; sibling modules may import each other."""
    files = sorted(folder.rglob("*.py"))
    allowed = allowed | {p.stem for p in files}
    checks = []
    for path in files:
        rel = path.relative_to(folder).as_posix()
        if rel == exempt:
            continue
        for result in check_code(path.read_text(encoding="utf-8", errors="replace"), allowed_imports=allowed,
                                 mode=mode):
            result.message = f"{rel}: {result.message}"
            result.details["file"] = rel
            checks.append(result)
    return checks


def _validate(folder: Path, entry: str, payload: dict, extra_files: dict[str, str]) -> None:
    """Check the arguments' shape; nothing of the folder is read here (see ``_check_entries``)."""
    if not folder.is_dir():
        raise UserError(f"sandbox folder {folder} does not exist")
    for name in (entry, payload.get("tools_entry"), *extra_files):
        if name is None:
            continue
        rel = Path(name)
        if not name or rel.is_absolute() or ".." in rel.parts:
            raise UserError(f"sandbox entry {name!r} must be a file inside {folder}")
    for name in extra_files:
        if len(Path(name).parts) != 1:
            raise UserError(f"sandbox extra file {name!r} must be a plain file name")
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


def _check_entries(work: Path, folder: Path, entry: str, payload: dict) -> None:
    """The entry modules exist in the staged copy (so they are regular files of the folder)."""
    for name in (entry, payload.get("tools_entry")):
        if name is not None and not (work / name).is_file():
            raise UserError(f"sandbox entry {name!r} must be a file inside {folder}")


def _refused(op: str, staged: StagedFolder) -> SandboxResult:
    message = f"the folder cannot be staged as data: {staged.summary()}"
    refusals = [{"file": r.path, "reason": r.reason} for r in staged.refused]
    return SandboxResult(ok=False, op=op, error_kind="policy_violation", error_message=message, layers=["staging"],
                         checks=[check("tools.policy.files", False, message, refused=refusals,
                                       refused_count=staged.refused_count)])


def run_in_sandbox(folder: Path, entry: str, payload: dict[str, Any], *, limits: SandboxLimits | None = None,
                   skip_policy: bool = False, allowed_imports: frozenset[str] = DEFAULT_ALLOWED,
                   skip_guard: bool = False, driver_source: str | None = None,
                   extra_files: dict[str, str] | None = None, exclude: tuple[str, ...] = (),
                   policy_mode: PolicyMode = "generated") -> SandboxResult:
    """Run user code from ``folder`` in a sandboxed child process.

    Args:
        folder: benchmark folder (tools.py, its CSV, ...); the child works on a read-only copy made by
            ``staging.stage_folder`` (regular files only; a folder holding links, FIFOs, devices,
            native modules or oversized files is refused with a ``policy_violation``).
        entry: module file inside ``folder`` to import, e.g. ``"tools.py"``.
        payload: ``{"op": "call_tools", "groups": [[{"tool": name, "input": {...}}, ...], ...],
            "instance": "shared" | "per_group"}`` or ``{"op": "run_function", "function": name,
            "calls": [{"args": [...], "kwargs": {...}}, ...], "tools_entry": "tools.py"}``
            (with ``tools_entry``, the Manager is passed first, wrapped to record tool calls).
        limits: resource limits; defaults to ``SandboxLimits()``.
        skip_policy: do not run the AST policy first (tests of the runtime layers only).
        allowed_imports: the AST policy's allow-list (sibling module names are added).
        skip_guard: do not install the audit hook (tests of the OS boundary alone only).
        driver_source: ``entry`` is sopforge's own driver with exactly this text (it finds the
            Manager by name, which the policy forbids tool code): the AST policy skips that one
            file, and only while its text is this one; the boundary and the guard still hold.
        extra_files: files (plain name -> text) written into the staged copy, e.g. sopforge's own
            driver; a file of the folder with the same name is left out.
        exclude: file-name patterns of the folder to leave out of the copy.
        policy_mode: ``published`` for folders written by people (``sopforge audit``): the AST policy
            accepts any read and defers randomness and clock (see ``policy.py``); with it, the
            allow-list defaults to ``PUBLISHED_ALLOWED``.

    Returns:
        A SandboxResult; user-code failures are reported in it, never raised.

    Raises:
        UserError: bad arguments (missing folder/entry, malformed payload), an unreadable folder.
        SandboxUnavailable: the OS boundary cannot be set up here; nothing was run.
    """
    limits = limits or SandboxLimits()
    folder = Path(folder)
    extra_files = extra_files or {}
    _validate(folder, entry, payload, extra_files)
    tmp = Path(tempfile.mkdtemp(prefix="sopforge-sandbox-"))
    os.chmod(tmp, boundary.staging_mode())
    try:
        work = tmp / "work"
        # The one copy of the folder, made as data (regular files only, no links, capped): every
        # read below, and the container, see this copy and never the original.
        staged = stage_folder(folder, work, skip=(*exclude, *extra_files))
        if not staged.ok:
            return _refused(payload["op"], staged)
        for name, text in extra_files.items():
            (work / name).write_text(text, encoding="utf-8")
            os.chmod(work / name, 0o644)
        _check_entries(work, folder, entry, payload)
        if driver_source is not None and (work / entry).read_text(encoding="utf-8") != driver_source:
            raise UserError(f"sandbox entry {entry!r} is not the driver it was declared to be")
        checks: list[CheckResult] = []
        if not skip_policy:
            if policy_mode == "published" and allowed_imports is DEFAULT_ALLOWED:
                allowed_imports = PUBLISHED_ALLOWED
            checks = _policy_checks(work, allowed_imports, exempt=entry if driver_source is not None else None,
                                    mode=policy_mode)
            failed = [c for c in checks if not c.passed]
            if failed:
                return SandboxResult(ok=False, op=payload["op"], error_kind="policy_violation", checks=checks,
                                     error_message=failed[0].message, layers=["staging", "ast_policy"])
        boundary.ensure_available()
        imports = set().union(*(imported_modules(p.read_text(encoding="utf-8", errors="replace"))
                                for p in work.rglob("*.py")))
        preload = [m for m in _PRELOAD if any(i == m or i.startswith(m + ".") for i in imports)]
        program = boundary.seccomp_program()
        child_payload = {**payload, "entry": entry, "sandbox_dir": boundary.FOLDER, "preload": preload,
                         "max_result_bytes": limits.max_result_bytes}
        result = run_processes(work, child_payload, limits, expected=len(payload[_OPS[payload["op"]]]),
                               program=program, guard=not skip_guard, command=child_command)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    layers = {"staging", *result.layers} | (set() if skip_policy else {"ast_policy"})
    result.layers = sorted(layers, key=_LAYER_ORDER.index)
    result.checks = checks
    return result
