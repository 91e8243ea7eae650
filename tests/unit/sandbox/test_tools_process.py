"""A function handed the tools runs in one sandbox process, the tools in another (issue 20, item 4).

The tools' code must not be able to write what the function's check is computed from: the
function's results and its log of tool calls (the labels check of ``sopforge audit``, the
expected call sequence of the ground truth).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sopforge.sandbox import SandboxLimits, run_in_sandbox

FAST = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_bytes=512 * 1024 ** 2)

PROCEDURE = '''\
def run_procedure(tools, case):
    score = tools.process_tool_call("getScore", {"id": case["id"]})
    checked = tools.check(id=case["id"])
    return {"decision": "approve" if score["score"] > 5 else "decline", "checked": checked}
'''

# With the policy off, tool code walks up its own stack: in a shared process it finds the
# function's log of calls (and could rewrite its result); in its own process there is nothing.
FORGING_TOOLS = '''\
import sys


class XManager:
    def process_tool_call(self, tool_name, tool_input):
        frame = sys._getframe()
        while frame is not None:
            log = frame.f_locals.get("log")
            if isinstance(log, list):
                log.append({"tool": "forgedByTheTools", "input": {}, "ok": True})
            frame = frame.f_back
        return {"score": 9}

    def check(self, id):
        return {"id": id, "tuple": (1, 2)}
'''


def folder_with(tmp_path: Path, tools: str, procedure: str = PROCEDURE) -> Path:
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "tools.py").write_text(tools)
    (folder / "reference_procedure.py").write_text(procedure)
    return folder


def run(folder: Path, cases: list[dict], **kwargs):
    payload = {"op": "run_function", "function": "run_procedure", "tools_entry": "tools.py",
               "calls": [{"args": [case]} for case in cases]}
    return run_in_sandbox(folder, "reference_procedure.py", payload, limits=FAST, **kwargs)


def test_the_tools_cannot_write_the_functions_log_of_calls(tmp_path: Path):
    result = run(folder_with(tmp_path, FORGING_TOOLS), [{"id": "a"}, {"id": "b"}], skip_policy=True)
    assert result.ok, result.error_message
    for outcome, case in zip(result.results, ("a", "b")):
        assert [c.tool for c in outcome.tool_calls] == ["getScore", "check"]
        assert outcome.result == {"decision": "approve", "checked": {"id": case, "tuple": [1, 2]}}
    assert "the tools ran in a sandbox process of their own" in result.notes


def test_tool_errors_cross_as_the_same_exception_type(tmp_path: Path):
    tools = textwrap.dedent('''\
        class XManager:
            def process_tool_call(self, tool_name, tool_input):
                raise KeyError(tool_input["id"])
        ''')
    procedure = textwrap.dedent('''\
        def run_procedure(tools, case):
            try:
                tools.process_tool_call("getScore", {"id": case["id"]})
            except KeyError as err:
                return {"caught": "KeyError", "message": str(err)}
        ''')
    result = run(folder_with(tmp_path, tools, procedure), [{"id": "x-1"}])
    assert result.ok and result.results[0].result == {"caught": "KeyError", "message": "'x-1'"}
    assert [(c.tool, c.ok) for c in result.results[0].tool_calls] == [("getScore", False)]


def test_the_procedure_cannot_import_the_tools_into_its_own_process(tmp_path: Path):
    procedure = "import tools\n\ndef run_procedure(manager, case):\n    return {}\n"
    result = run(folder_with(tmp_path, FORGING_TOOLS, procedure), [{"id": "a"}], skip_policy=True)
    assert result.error_kind == "load_error" and "runs in a process of its own" in result.error_message


@pytest.mark.parametrize("guard", [True, False])
def test_a_violation_in_the_tools_process_fails_the_run(tmp_path: Path, guard: bool):
    tools = "import os\n\nclass XManager:\n    def process_tool_call(self, tool_name, tool_input):\n" \
            "        os.system('true')\n        return {'score': 1}\n"
    result = run(folder_with(tmp_path, tools), [{"id": "a"}], skip_policy=True, skip_guard=not guard)
    assert not result.ok and result.error_kind == "policy_violation", result.error_message
    assert result.error_message.startswith("the tools process: ")
