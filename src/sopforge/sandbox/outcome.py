"""Turn what the parent observed of a child process into a SandboxResult.

Kept apart from the process handling in ``runner.py`` so the classification rules (which
failure wins when several signals are present) read in one place.

The child's records are untrusted (user code shares its process and can write frames), so
the verdict rests on what the parent observed itself: the exit status and signal, the wall
clock, the cgroup's count of refused tasks, the boundary read from ``/proc`` before user code
ran, and whether the record stream stayed within its frame, byte, value and depth limits.
Records only make a run *worse*: a ``V`` record is a violation whatever else arrived, and a
clean result needs all of: exit status 0, the boundary confirmed from outside, the end
record, and every result record. The layers reported are the ones the parent saw in place.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from sopforge.sandbox.accounting import Observed
from sopforge.sandbox.channel import Malformed
from sopforge.sandbox.models import CallOutcome, SandboxLimits, SandboxResult

__all__ = ["EXIT_FATAL", "EXIT_VIOLATION", "ChildReport", "classify", "confirmed_layers", "unavailable_reason"]

EXIT_VIOLATION = 86  # guard.EXIT_VIOLATION (the child-side modules are not imported here)
EXIT_FATAL = 87  # child.EXIT_FATAL
_SIGNAL_EXIT = 128  # bubblewrap's init exits with 128 + the signal that ended the child

_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory",
                   "failed to map segment")  # the last: dlopen of an extension under RLIMIT_AS


@dataclass
class ChildReport:
    """Raw observations of one child run."""

    records: list[tuple[str, Any]] = field(default_factory=list)  # (tag, parsed JSON or Malformed)
    timed_out: bool = False
    overflow: bool = False
    channel_problem: str | None = None  # the record stream broke its framing or limits
    exit_code: int | None = None
    wall_seconds: float = 0.0
    cpu_seconds: float | None = None  # the child's own, read from /proc
    peak_rss_bytes: int | None = None  # the child's own VmHWM, read from /proc
    stderr_tail: str = ""
    observed: Observed | None = None  # the boundary as the host kernel showed it before user code ran
    unconfined: str | None = None  # why the parent refused to let user code run
    cgroup: bool = False
    task_refusals: int = 0


@dataclass
class _Parsed:
    results: list = field(default_factory=list)
    hello: dict | None = None
    violation: dict | None = None
    fatal: dict | None = None
    end: dict | None = None
    problem: str | None = None


def _parse(records: list[tuple[str, Any]], op: str) -> _Parsed:
    parsed = _Parsed()
    for tag, data in records:
        try:
            if isinstance(data, Malformed):
                raise ValueError(data.reason)
            if not isinstance(data, dict):
                raise TypeError("the record is not a JSON object")
            if tag == "R":
                if data.get("i") != len(parsed.results):
                    raise ValueError(f"record {str(data.get('i'))[:20]} arrived out of order")
                parsed.results.append([CallOutcome.model_validate(c) for c in data["calls"]] if op == "call_tools"
                                      else CallOutcome.model_validate(data["outcome"]))
            elif tag == "H":
                # The first hello is the child's own, written before user code ran; a later
                # one can only be forged.
                parsed.hello = parsed.hello or data
            elif tag in ("V", "F", "E"):
                setattr(parsed, {"V": "violation", "F": "fatal", "E": "end"}[tag], data)
        except (ValueError, KeyError, TypeError, ValidationError) as err:
            parsed.problem = parsed.problem or f"malformed {tag} record: {str(err)[:200]}"
    return parsed


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _exit_signal(report: ChildReport) -> int | None:
    """The signal that ended the child: the parent's own kill (negative status) or, through
    bubblewrap's init, status 128 + signal."""
    code = report.exit_code
    if code is None:
        return None
    if code < 0:
        return -code
    if _SIGNAL_EXIT < code < _SIGNAL_EXIT + 65:
        return code - _SIGNAL_EXIT
    return None


def _failure(report: ChildReport, parsed: _Parsed, limits: SandboxLimits, expected: int | None) -> tuple[str | None, str]:
    code = report.exit_code if report.exit_code is not None else -1
    sig = _exit_signal(report)
    cpu = report.cpu_seconds or 0.0  # bwrap does not pass the child's CPU time up: mostly 0
    if report.timed_out:
        return "timeout", f"wall-clock limit of {limits.wall_seconds:g} s exceeded; process group killed"
    if report.overflow:
        return "bad_output", (f"child wrote more than {limits.max_output_bytes} bytes or {limits.max_output_values} "
                              "JSON values of records; the parent stopped reading and killed it")
    if parsed.violation:
        v = parsed.violation
        return "policy_violation", f"runtime guard stopped '{str(v.get('event'))[:100]}': {str(v.get('detail'))[:300]}"
    if code == EXIT_VIOLATION:
        return "policy_violation", "runtime guard stopped the child (its report did not reach the parent)"
    if sig == signal.SIGSYS:
        return "policy_violation", "the seccomp filter killed the child for a forbidden system call"
    if report.task_refusals:
        return "policy_violation", (f"the tool code tried to start more processes or threads than allowed "
                                    f"({limits.max_processes}); the kernel refused {report.task_refusals} of them")
    if report.channel_problem:
        return "bad_output", f"the parent stopped reading the child's records: {report.channel_problem}"
    if parsed.fatal:
        kind, message = str(parsed.fatal.get("kind", "crash")), str(parsed.fatal.get("message", ""))[:2000]
        if kind not in ("load_error", "crash", "memory_limit"):
            kind = "crash"
        if kind in ("load_error", "crash") and any(marker in message for marker in _MEMORY_MARKERS):
            kind = "memory_limit"  # e.g. pandas' extensions cannot be mapped under RLIMIT_AS
        return kind, message
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_seconds):
        return "cpu_limit", f"CPU limit of {limits.cpu_seconds} s exceeded"
    if sig == signal.SIGKILL and code > 0:
        # Through bubblewrap's init, so not the parent's kill: only the kernel sends it there
        # (the guard stops os.kill, and the seccomp filter stops new processes).
        return "cpu_limit", (f"the kernel killed the child: its CPU limit of {limits.cpu_seconds} s was reached "
                             "with SIGXCPU ignored (or memory ran out)")
    if code != 0:
        if any(marker in report.stderr_tail for marker in _MEMORY_MARKERS):
            return "memory_limit", "the child ran out of address space"
        how = _signal_name(sig) if sig else f"status {code}"
        return "crash", f"child exited with {how}"
    if parsed.problem:
        return "bad_output", parsed.problem
    if report.observed is None:
        return "bad_output", "child finished without the parent confirming its sandbox boundary"
    if expected is None:  # the tools' process serves calls until the function's closes the channel
        return (None, "") if parsed.end is not None else ("bad_output", "the tools process ended without a report")
    if parsed.end is None or parsed.end.get("completed") != expected or len(parsed.results) != expected:
        return "bad_output", f"child finished {len(parsed.results)} of {expected} without a complete report"
    return None, ""


def confirmed_layers(report: ChildReport, hello: dict | None, limits: SandboxLimits) -> tuple[list[str], list[str]]:
    """The layers the parent saw in place (from ``/proc``, before user code ran), and caveats."""
    seen = report.observed
    if seen is None:
        return [], ["the parent never confirmed the sandbox (the child stopped before user code could run)"]
    layers, notes = ["bubblewrap", "unprivileged_uid"], []
    if seen.seccomp == 2:
        layers.append("seccomp")
    else:
        notes.append("no seccomp filter on this architecture: the namespaces and the audit hook stop "
                     "processes and sockets")
    if (seen.limits.get("Max address space") == str(limits.memory_bytes)
            and seen.limits.get("Max cpu time") == str(limits.cpu_seconds)):
        layers.append("rlimits")
    if report.cgroup:
        layers.append("pids_cgroup")
    if isinstance(hello, dict) and hello.get("audit_hook") is True:
        layers.append("audit_hook")
    return layers, notes


def unavailable_reason(report: ChildReport) -> str | None:
    """Why the boundary could not be set up (bwrap failed, the parent found the child short of
    it, or the child found itself unconfined and refused to run user code), or None."""
    if report.unconfined:
        return f"the sandbox child is not confined as required ({report.unconfined})"
    for tag, data in report.records:
        if tag == "H":
            return None
        if tag == "F":
            if isinstance(data, dict) and data.get("kind") == "sandbox_unavailable":
                return f"the sandbox child found itself unconfined: {str(data.get('message', ''))[:300]}"
            return None
    lines = [line for line in report.stderr_tail.splitlines() if line.startswith(("bwrap:", "setpriv:"))]
    return f"the sandbox could not be set up: {lines[-1].strip()[:200]}" if lines else None


def classify(report: ChildReport, *, op: str, expected: int | None, limits: SandboxLimits) -> SandboxResult:
    """Decide the outcome of a run; the first matching rule in ``_failure`` wins."""
    parsed = _parse(report.records, op)
    kind, message = _failure(report, parsed, limits, expected)
    layers, notes = confirmed_layers(report, parsed.hello, limits)
    layers.append("wall_clock")
    return SandboxResult(
        ok=kind is None, op=op, results=parsed.results, completed=len(parsed.results), error_kind=kind,
        error_message=message, stderr_tail=report.stderr_tail, wall_seconds=round(report.wall_seconds, 3),
        cpu_seconds=report.cpu_seconds, peak_rss_bytes=report.peak_rss_bytes, exit_code=report.exit_code,
        layers=layers, notes=notes,
    )
