"""Start the sandbox process(es) of one run and turn what the parent saw into one result.

Most runs are one process. A function that is handed the folder's tools (``run_function`` with
``tools_entry``: a reference procedure, the ground-truth harness) runs in *two*: the function in
one sandbox, the tools in another, joined by a pair of pipes through which each tool call and its
outcome pass as JSON (``calls.RemoteTools``/``calls.op_serve_tools``). The tools' code then never
shares a process with the function's: it cannot reach the function's results or its log of the
tool calls made, which are what the labels check and the ground truth are computed from. The
run fails if either process fails; a violation in either is the run's violation.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

from sopforge.sandbox import boundary
from sopforge.sandbox.accounting import TaskGroup
from sopforge.sandbox.models import SandboxLimits, SandboxResult
from sopforge.sandbox.outcome import ChildReport, classify, unavailable_reason
from sopforge.sandbox.supervise import Expectation, supervise

__all__ = ["run_processes"]

_NPROC_BACKSTOP = 1024  # tasks of the sandbox uid, all sandboxes together, where a cgroup caps each
_NAMESPACES = ("user", "pid", "mnt", "net", "ipc", "uts")
Command = Callable[[Path, int | None, int | None], list[str]]


def own_namespaces() -> dict[str, str | None]:
    """This process's namespace ids, which the child must find different from its own."""
    out: dict[str, str | None] = {}
    for name in _NAMESPACES:
        try:
            out[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            out[name] = None
    return out


def _launch(work: Path, payload: dict[str, Any], limits: SandboxLimits, *, program: bytes | None, guard: bool,
            command: Command, channel_fds: tuple[int, ...] = ()) -> ChildReport:
    who = boundary.identity()
    namespaces = own_namespaces()
    group = TaskGroup.create(limits.max_processes)
    # With a cgroup, it caps the sandbox's tasks (and counts refusals); RLIMIT_NPROC is then
    # only a backstop for the shared sandbox uid. Without one, RLIMIT_NPROC is the cap.
    nproc = _NPROC_BACKSTOP if group is not None else limits.max_processes
    child_payload = {**payload, "sandbox_uid": who.uid, "parent_namespaces": namespaces,
                     "fresh": list(Expectation.fresh_namespaces(who)), "seccomp": program is not None, "guard": guard,
                     "limits": {**limits.model_dump(include={"cpu_seconds", "memory_bytes", "file_size_bytes",
                                                             "open_files"}),
                                "nproc": nproc, "threads": limits.max_processes > 0}}
    expect = Expectation(parent_namespaces=namespaces, seccomp=program is not None)
    return supervise(work, program, json.dumps(child_payload).encode(), limits, expect, group,
                     command=lambda seccomp_fd, info_fd: command(work, seccomp_fd, info_fd), channel_fds=channel_fds)


def _judge(report: ChildReport, op: str, expected: int | None, limits: SandboxLimits) -> SandboxResult:
    reason = unavailable_reason(report)
    if reason:
        raise boundary.SandboxUnavailable(f"the sandbox for untrusted code could not be set up: {reason}; "
                                          "nothing was run")
    try:
        return classify(report, op=op, expected=expected, limits=limits)
    except Exception as err:  # noqa: BLE001 - the child's records are hostile input: a verdict, never a traceback
        return SandboxResult(ok=False, op=op, error_kind="bad_output",
                             error_message=f"the child's report could not be read: {type(err).__name__}: "
                                           f"{str(err)[:200]}", exit_code=report.exit_code,
                             wall_seconds=round(report.wall_seconds, 3))


def run_processes(work: Path, payload: dict[str, Any], limits: SandboxLimits, *, expected: int,
                  program: bytes | None, guard: bool, command: Command) -> SandboxResult:
    """Run ``payload`` on the staged ``work`` folder and judge it (in two processes when it hands tools over).

    Raises:
        SandboxUnavailable: a process could not be confined as required; no user code ran in it.
    """
    if not (payload["op"] == "run_function" and payload.get("tools_entry")):
        report = _launch(work, payload, limits, program=program, guard=guard, command=command)
        return _judge(report, payload["op"], expected, limits)
    request_r, request_w = os.pipe()
    response_r, response_w = os.pipe()
    function_payload = {**payload, "tools_channel": {"request_fd": request_w, "response_fd": response_r}}
    tools_payload = {**payload, "op": "serve_tools", "entry": payload["tools_entry"], "calls": [],
                     "request_fd": request_r, "response_fd": response_w}
    reports: dict[str, ChildReport | BaseException] = {}

    def serve() -> None:
        try:
            reports["tools"] = _launch(work, tools_payload, limits, program=program, guard=guard, command=command,
                                       channel_fds=(request_r, response_w))
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread below
            reports["tools"] = err

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        function_report = _launch(work, function_payload, limits, program=program, guard=guard, command=command,
                                  channel_fds=(request_w, response_r))
    finally:
        server.join()
    tools_report = reports["tools"]
    if isinstance(tools_report, BaseException):
        raise tools_report
    tools = _judge(tools_report, "serve_tools", None, limits)
    function = _judge(function_report, payload["op"], expected, limits)
    return _combine(function, tools, limits)


def _combine(function: SandboxResult, tools: SandboxResult, limits: SandboxLimits) -> SandboxResult:
    """The function's results; the tools' failure when they failed (a violation in either wins)."""
    update: dict[str, Any] = {
        "layers": [layer for layer in function.layers if layer in tools.layers],
        "peak_rss_bytes": max(function.peak_rss_bytes or 0, tools.peak_rss_bytes or 0) or None,
        "cpu_seconds": (function.cpu_seconds or 0.0) + (tools.cpu_seconds or 0.0),
        "notes": [*function.notes, "the tools ran in a sandbox process of their own"],
    }
    if tools.stderr_tail:
        tail = f"{function.stderr_tail}\n--- tools process ---\n{tools.stderr_tail}"
        update["stderr_tail"] = tail[-limits.stderr_tail_bytes:] if limits.stderr_tail_bytes else ""
    if not tools.ok and (function.ok or tools.error_kind == "policy_violation"
                         and function.error_kind != "policy_violation"):
        update.update(ok=False, error_kind=tools.error_kind, exit_code=tools.exit_code,
                      error_message=f"the tools process: {tools.error_message}")
    return function.model_copy(update=update)
