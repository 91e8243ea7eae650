"""Configuration and results of one sandboxed run of LLM-written code."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sopforge.checks import CheckResult

ErrorKind = Literal["timeout", "cpu_limit", "memory_limit", "policy_violation", "load_error", "crash", "bad_output"]
# staging: the host copied the folder as data (regular files only, see staging.py);
# ast_policy: the static check passed. The next four are confirmed by the parent from the host
# kernel's view of the child (/proc) before user code runs: bubblewrap: no capabilities,
# no_new_privs, fresh pid/mount/net/ipc/uts (and user) namespaces; unprivileged_uid: the host
# accounts the child to a uid that is not root; seccomp: the kernel filter is loaded; rlimits:
# the child's resource limits are the requested ones. pids_cgroup: its processes and threads
# are capped by a cgroup of their own; audit_hook: installed by the child before user code.
Layer = Literal["staging", "ast_policy", "bubblewrap", "unprivileged_uid", "seccomp", "rlimits", "pids_cgroup",
                "audit_hook", "wall_clock"]

GIB = 1024 ** 3
MIB = 1024 ** 2


class SandboxLimits(BaseModel):
    """Resource limits of one sandbox process.

    The isolation itself is not an option: every run is inside the bubblewrap boundary of
    ``boundary.py``, or it does not run.
    """

    # An unknown field is refused, not ignored: SandboxLimits(network_namespace="off") must not
    # read as if it had switched anything off (the boundary is not an option).
    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_seconds: float = Field(120.0, gt=0, description="Wall-clock budget; the parent kills the process group after it.")
    cpu_seconds: int = Field(60, ge=1, description="RLIMIT_CPU of the child (includes importing pandas, ~2-3 s).")
    memory_bytes: int = Field(GIB, ge=64 * MIB, description="RLIMIT_AS (address space) of the child.")
    file_size_bytes: int = Field(MIB, ge=0, description="RLIMIT_FSIZE: largest file the child may write.")
    open_files: int = Field(256, ge=16, description="RLIMIT_NOFILE of the child.")
    max_processes: int = Field(0, ge=0, description="Threads (and processes, which the seccomp filter kills anyway) "
                                                     "the tool code may start: the sandbox's pids cgroup allows this "
                                                     "many tasks beyond its own, and a refused one is a violation; "
                                                     "without a cgroup, RLIMIT_NPROC of the sandbox's unprivileged "
                                                     "uid (which counts all its tasks) is set to it.")
    max_output_bytes: int = Field(256 * MIB, ge=MIB, description="Largest framed record stream the parent accepts "
                                                                 "(checked before a frame is read).")
    max_output_values: int = Field(20_000_000, ge=1000, description="Most JSON values (and keys) the parent parses "
                                                                    "from the stream: a cap on its memory, since "
                                                                    "parsed values take far more room than bytes.")
    max_result_bytes: int = Field(MIB, ge=1024, description="Largest JSON encoding of one call's result; larger ones are omitted.")
    stderr_tail_bytes: int = Field(8192, ge=0, description="How much of the child's stderr (incl. user prints) is kept.")


class CallError(BaseModel):
    """An exception raised by user code during one call."""

    type: str = Field(description="Exception class name, e.g. 'ValueError'.")
    message: str = Field(description="str(exception), truncated.")
    line: int | None = Field(None, description="Line in the user module where it was raised, when known.")


class ToolCallRecord(BaseModel):
    """One tool call made by a reference procedure (the expected call sequence)."""

    tool: str = Field(description="Tool name.")
    input: Any = Field(None, description="Arguments as passed (non-JSON values shown by repr).")
    ok: bool = Field(description="False when the tool raised.")


class CallOutcome(BaseModel):
    """The outcome of one tool call (call_tools) or one function call (run_function)."""

    tool: str | None = Field(None, description="Tool name, for call_tools.")
    ok: bool = Field(description="The call returned without raising.")
    result: Any = Field(None, description="The returned value (None when it raised, was not JSON-encodable or too large).")
    json_ok: bool = Field(False, description="json.dumps(result) succeeded.")
    unencodable: str | None = Field(None, description="Where and what the first non-JSON value is, e.g. '$.score: numpy.int64'.")
    result_bytes: int | None = Field(None, description="Size of the JSON encoding of the result.")
    omitted: bool = Field(False, description="The result exceeded max_result_bytes and was not returned.")
    error: CallError | None = Field(None, description="The exception, when ok is False.")
    tool_calls: list[ToolCallRecord] | None = Field(None, description="Tool calls made during a run_function call with tools.")


class SandboxResult(BaseModel):
    """What one sandbox process did; ``ok`` says the process itself completed cleanly."""

    ok: bool = Field(description="Every group/call ran to completion and nothing was killed or violated.")
    op: str = Field(description="The payload op: call_tools or run_function.")
    results: list[list[CallOutcome]] | list[CallOutcome] = Field(
        default_factory=list,
        description="call_tools: one list of outcomes per group; run_function: one outcome per call. "
                    "On failure, the groups/calls that completed before it.")
    completed: int = Field(0, description="Number of groups (call_tools) or calls (run_function) completed.")
    error_kind: ErrorKind | None = Field(None, description="Why the process did not complete.")
    error_message: str = Field("", description="One line explaining error_kind.")
    checks: list[CheckResult] = Field(default_factory=list, description="AST policy results for each module checked.")
    stderr_tail: str = Field("", description="End of the child's stderr (user prints are redirected there).")
    wall_seconds: float = Field(0.0, description="Wall-clock duration of the child process.")
    cpu_seconds: float | None = Field(None, description="User + system CPU time of the child.")
    peak_rss_bytes: int | None = Field(None, description="Peak resident set size of the child (from wait4).")
    exit_code: int | None = Field(None, description="Child exit status; negative for a signal.")
    layers: list[Layer] = Field(default_factory=list, description="Isolation layers confirmed active for this run.")
    notes: list[str] = Field(default_factory=list, description="Caveats about the isolation actually achieved.")
