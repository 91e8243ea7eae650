"""The sandboxed execution of the reference procedure: the harness and what each row's run produced.

:data:`HARNESS_SOURCE` is written next to a copy of the bundle and run in one sandbox process for
all rows; :func:`_row_runs` turns the sandbox's outcomes into one :class:`_RowRun` per row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sopforge.families.sop_tools.verify.ground_truth_bundle import TOOLS_FILE
from sopforge.sandbox import SandboxLimits, SandboxResult, run_in_sandbox

__all__ = ["HARNESS_FILE", "HARNESS_SOURCE"]

HARNESS_FILE = "_sopforge_reference_harness.py"

# Runs inside the sandbox next to the bundle. The procedure gets a manager with nothing but
# process_tool_call; arguments and results pass through JSON, so the tools see exactly what a
# replaying agent will send and the record cannot be changed by later mutation.
HARNESS_SOURCE = '''\
"""sopforge harness: run reference_procedure.run_procedure on one case, recording every tool call."""
import json

import reference_procedure


class ToolUseError(Exception):
    """The procedure used the manager in a way the benchmark's agents cannot."""


_SCALARS = (str, int, float, bool, type(None))


def _plain(value, what):
    """A copy made only of JSON values, as json.loads(json.dumps(value)) would give, but fast."""
    if type(value) in _SCALARS:  # type(x) only compared: the sandbox policy keeps classes from flowing
        return value
    if type(value) is dict and all(type(k) is str for k in value):
        return {k: _plain(v, what) for k, v in value.items()}
    if type(value) is list or type(value) is tuple:
        return [_plain(v, what) for v in value]
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ToolUseError(f"{what} must hold only JSON values (str, int, float, bool, None, lists, dicts): {exc}")


class _RecordingManager:
    def __init__(self, tools, log):
        self._tools = tools
        self._log = log

    def process_tool_call(self, tool_name, tool_input):
        if not isinstance(tool_input, dict):
            raise ToolUseError(f"process_tool_call({tool_name!r}, ...) needs a dict of arguments, "
                               f"got {type(tool_input).__name__}")
        arguments = _plain(tool_input, f"the arguments of {tool_name}")
        entry = {"tool": tool_name, "input": arguments, "output": None, "error": None}
        self._log.append(entry)
        try:
            value = self._tools.process_tool_call(tool_name, _plain(arguments, "arguments"))
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise
        entry["output"] = _plain(value, f"the result of tool {tool_name}")
        return _plain(value, f"the result of tool {tool_name}")

    def __getattr__(self, name):
        raise ToolUseError(f"manager.{name} is not available: call tools only as "
                           f"manager.process_tool_call(tool_name, {{...}})")


def run_case(tools, case):
    log = []
    result = reference_procedure.run_procedure(_RecordingManager(tools, log), dict(case))
    return {"result": result, "calls": log}
'''


# --------------------------------------------------------------------------------------- execution

@dataclass
class _RowRun:
    """What one row's execution produced, before validation."""

    ok: bool
    error: str = ""
    result: Any = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    tools_called: list[tuple[str, Any]] = field(default_factory=list)  # (tool, input) incl. failing rows

    def fingerprint(self) -> str:
        return json.dumps([self.ok, self.error, self.result, self.calls], sort_keys=True, default=repr)


def _execute(folder: Path, cases: list[dict[str, str]], limits: SandboxLimits | None) -> SandboxResult:
    payload = {"op": "run_function", "function": "run_case", "tools_entry": TOOLS_FILE,
               "calls": [{"args": [case]} for case in cases]}
    # The runner stages the bundle as data and writes the harness into its copy.
    return run_in_sandbox(folder, HARNESS_FILE, payload, limits=limits, extra_files={HARNESS_FILE: HARNESS_SOURCE})


def _row_runs(result: SandboxResult) -> list[_RowRun]:
    runs = []
    for outcome in result.results:
        recorded = [(c.tool, c.input) for c in outcome.tool_calls or []]
        if not outcome.ok:
            err = outcome.error
            text = f"{err.type}: {err.message}" if err else "raised"
            failed = [c for c in outcome.tool_calls or [] if not c.ok]
            if failed:
                text += f" (raised by tool {failed[-1].tool} called with {json.dumps(failed[-1].input, default=repr)})"
            elif err and err.line and err.type != "ToolUseError":
                text = f"{err.type} at line {err.line}: {err.message}"
            runs.append(_RowRun(ok=False, error=text, tools_called=recorded))
        elif not outcome.json_ok or outcome.omitted:
            why = outcome.unencodable or "result too large"
            runs.append(_RowRun(ok=False, error=f"returned a value that is not JSON-encodable ({why})",
                                tools_called=recorded))
        else:
            body = outcome.result
            runs.append(_RowRun(ok=True, result=body["result"], calls=body["calls"], tools_called=recorded))
    return runs
