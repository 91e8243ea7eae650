"""Turn what the parent observed of a child process into a SandboxResult.

Kept apart from the process handling in ``runner.py`` so the classification rules (which
failure wins when several signals are present) read in one place.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field

from pydantic import ValidationError

from sopforge.sandbox.models import CallOutcome, SandboxLimits, SandboxResult

__all__ = ["ChildReport", "classify"]

_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory",
                   "failed to map segment")  # the last: dlopen of an extension under RLIMIT_AS


@dataclass
class ChildReport:
    """Raw observations of one child run."""

    records: list[tuple[str, bytes]] = field(default_factory=list)
    timed_out: bool = False
    overflow: bool = False
    exit_code: int | None = None
    wall_seconds: float = 0.0
    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None
    stderr_tail: str = ""


@dataclass
class _Parsed:
    results: list = field(default_factory=list)
    hello: dict | None = None
    violation: dict | None = None
    fatal: dict | None = None
    end: dict | None = None
    problem: str | None = None


def _parse(records: list[tuple[str, bytes]], op: str) -> _Parsed:
    parsed = _Parsed()
    for tag, body in records:
        try:
            data = json.loads(body)
            if tag == "R":
                if data.get("i") != len(parsed.results):
                    raise ValueError(f"record {data.get('i')} arrived out of order")
                parsed.results.append([CallOutcome.model_validate(c) for c in data["calls"]] if op == "call_tools"
                                      else CallOutcome.model_validate(data["outcome"]))
            elif tag in ("H", "V", "F", "E"):
                setattr(parsed, {"H": "hello", "V": "violation", "F": "fatal", "E": "end"}[tag], data)
        except (ValueError, KeyError, TypeError, ValidationError) as err:
            parsed.problem = parsed.problem or f"malformed {tag} record: {str(err)[:200]}"
    return parsed


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(report: ChildReport, *, op: str, expected: int, limits: SandboxLimits,
             own_netns: str | None) -> SandboxResult:
    """Decide the outcome of a run; the first matching rule below wins."""
    parsed = _parse(report.records, op)
    code = report.exit_code if report.exit_code is not None else -1
    sig = -code if code < 0 else None
    cpu = report.cpu_seconds or 0.0
    kind, message = None, ""
    if report.timed_out:
        kind, message = "timeout", f"wall-clock limit of {limits.wall_seconds:g} s exceeded; process group killed"
    elif report.overflow:
        kind, message = "bad_output", f"child wrote more than {limits.max_output_bytes} bytes of results"
    elif parsed.violation:
        v = parsed.violation
        kind, message = "policy_violation", f"runtime guard stopped '{v.get('event')}': {v.get('detail')}"
    elif parsed.fatal:
        kind, message = parsed.fatal.get("kind", "crash"), parsed.fatal.get("message", "")
        if kind in ("load_error", "crash") and any(marker in message for marker in _MEMORY_MARKERS):
            kind = "memory_limit"  # e.g. pandas' extensions cannot be mapped under RLIMIT_AS
    elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_seconds):
        kind, message = "cpu_limit", f"CPU limit of {limits.cpu_seconds} s exceeded ({cpu:.1f} s used)"
    elif code != 0:
        if any(marker in report.stderr_tail for marker in _MEMORY_MARKERS):
            kind, message = "memory_limit", "the child ran out of address space"
        else:
            how = _signal_name(sig) if sig else f"status {code}"
            kind, message = "crash", f"child exited with {how}"
    elif parsed.problem:
        kind, message = "bad_output", parsed.problem
    elif parsed.end is None or parsed.end.get("completed") != expected or len(parsed.results) != expected:
        kind, message = "bad_output", f"child finished {len(parsed.results)} of {expected} without a complete report"
    layers, notes = [], []
    if parsed.hello:
        netns = parsed.hello.get("netns")
        if netns and own_netns and netns != own_netns:
            layers.append("network_namespace")
        layers += ["rlimits", "audit_hook"]
        if not parsed.hello.get("limits", {}).get("nproc_enforced", True):
            notes.append("RLIMIT_NPROC is not enforced for root; the audit hook is what stops new processes")
    if "network_namespace" not in layers:
        notes.append("no network namespace: only the AST policy and the audit hook block the network")
    layers.append("wall_clock")
    return SandboxResult(
        ok=kind is None, op=op, results=parsed.results, completed=len(parsed.results), error_kind=kind,
        error_message=message, stderr_tail=report.stderr_tail, wall_seconds=round(report.wall_seconds, 3),
        cpu_seconds=report.cpu_seconds, peak_rss_bytes=report.peak_rss_bytes, exit_code=report.exit_code,
        layers=layers, notes=notes,
    )
