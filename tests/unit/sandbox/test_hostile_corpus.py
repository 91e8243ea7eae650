"""Issue 10: every hostile snippet is contained, through the full sandbox and with layers off.

Each snippet of ``hostile_corpus.SNIPPETS`` is appended to the clean pharmacy tools.py and run
three ways: the full sandbox; the static policy off (the guard and the OS boundary must stop
it and report a violation); and policy *and* audit hook off, where only the OS boundary is
left (there, only the effects are judged: nothing may reach the host). Effects are checked
for real: a marker file outside the sandbox, a loopback listener, canary API keys in this
process's environment, and the folder's own files.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostile_corpus import SNIPPETS, Snippet
from hostile_scene import HostWatch, Scene, assert_no_effect, hostile_folder
from sopforge.sandbox import SandboxLimits, SandboxResult, SandboxUnavailable, run_in_sandbox
from sopforge.sandbox import boundary
from sopforge.sandbox.accounting import TaskGroup

HAS_CGROUP = (lambda group: group is not None and (group.close() or True))(TaskGroup.create())

LIMITS = SandboxLimits(wall_seconds=10, cpu_seconds=4, memory_bytes=1024 ** 3)
CALL = {"op": "call_tools", "groups": [[{"tool": "verifyPrescriberLicense", "input": {"prescription_id": "RX-004512"}}]]}
MODES = ("full", "policy_off")


def run(folder: Path, mode: str, snippet: Snippet | None = None) -> SandboxResult:
    return run_in_sandbox(folder, "tools.py", CALL, limits=limits_for(snippet), skip_policy=mode != "full",
                          skip_guard=mode == "os_only")


def limits_for(snippet: Snippet | None) -> SandboxLimits:
    """The clean call gets 10 s. A snippet that a timeout may stop gets 4 s: any of its kinds is a right
    answer, and the ones only a clock stops (sleeping) would wait out the whole limit. One that the CPU or
    memory limit must stop gets long enough for it to do so on a loaded machine (4 CPU seconds can take
    10 s of wall clock when the suite runs on every core), so the wall clock never pre-empts the layer
    under test."""
    if snippet is None:
        return LIMITS
    return LIMITS.model_copy(update={"wall_seconds": 4 if "timeout" in snippet.kinds else 60})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
def test_each_snippet_is_stopped_and_reported(tmp_path: Path, scene: Scene, snippet: Snippet, mode: str):
    if snippet.root and os.geteuid() != 0:
        pytest.skip("the attack needs sopforge to run as root")
    folder = hostile_folder(tmp_path, snippet, scene)
    tools_text = (folder / "tools.py").read_text()
    with HostWatch() as host:
        result = run(folder, mode, snippet)
    host.assert_untouched()
    seen = result.model_dump_json()
    assert not result.ok, f"reported as a clean run: {seen[:500]}"
    if snippet.staged:  # refused by the host's copy, whatever the mode: no sandbox was started
        assert result.layers == ["staging"] and result.error_kind == "policy_violation", result.error_message
        assert "cannot be staged as data" in result.error_message
    elif mode == "full" and snippet.static:
        assert result.layers == ["staging", "ast_policy"] and result.error_kind == "policy_violation"
        messages = " ".join(c.message for c in result.checks if not c.passed)
        assert snippet.static in messages, messages
    else:
        assert result.error_kind in snippet.kinds, (result.error_kind, result.error_message, result.stderr_tail[-800:])
        assert "bubblewrap" in result.layers
    assert_no_effect(scene, seen, folder, tools_text)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
def test_the_os_boundary_alone_contains_each_snippet(tmp_path: Path, scene: Scene, snippet: Snippet):
    # No AST policy and no audit hook: as if both Python layers had been defeated.
    if snippet.root and os.geteuid() != 0:
        pytest.skip("the attack needs sopforge to run as root")
    folder = hostile_folder(tmp_path, snippet, scene)
    tools_text = (folder / "tools.py").read_text()
    with HostWatch() as host:
        # A snippet a timeout may stop gets its 4 s; any other the clean call's 10 s (with both Python
        # layers off, an OS layer or the clock ends it, whatever its kinds say).
        result = run(folder, "os_only", snippet if "timeout" in snippet.kinds else None)
    host.assert_untouched()
    if snippet.os_kinds and (HAS_CGROUP or not snippet.cgroup):  # the OS layers also report it
        assert not result.ok and result.error_kind in snippet.os_kinds, (result.error_kind, result.error_message)
    assert "audit_hook" not in result.layers
    assert "bubblewrap" in result.layers or (snippet.staged and result.layers == ["staging"]), result.layers
    assert_no_effect(scene, result.model_dump_json(), folder, tools_text)


def test_the_corpus_covers_every_class_of_the_issue():
    classes = {s.cls.split(" ")[0] for s in SNIPPETS}
    assert {"1", "2", "3", "4", "sockets", "subprocess", "fork", "ctypes", "threads", "signals", "writes", "huge",
            "loops", "memory", "recursion", "pickle", "importlib", "sys.modules",
            "i20.1", "i20.2", "i20.3", "i20.4", "i20.5"} <= classes  # issue 20's five items
    assert len(SNIPPETS) >= 40 and len({s.id for s in SNIPPETS}) == len(SNIPPETS)


@pytest.mark.parametrize("snippet_id", ["write_marker_outside", "socket_connect_loopback", "read_parent_environ_via_proc"])
def test_the_effect_checks_see_an_escape_outside_the_sandbox(tmp_path: Path, scene: Scene, snippet_id: str):
    # The same snippet under plain python does leave its mark: the assertions above can fail.
    snippet = next(s for s in SNIPPETS if s.id == snippet_id)
    folder = hostile_folder(tmp_path, snippet, scene)
    done = subprocess.run([sys.executable, "tools.py"], cwd=folder, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))
    seen = done.stdout + done.stderr
    with pytest.raises(AssertionError):
        assert_no_effect(scene, seen, folder, (folder / "tools.py").read_text())


def test_without_bubblewrap_nothing_runs(tmp_path: Path, scene: Scene, monkeypatch: pytest.MonkeyPatch):
    snippet = next(s for s in SNIPPETS if s.id == "write_marker_outside")
    folder = hostile_folder(tmp_path, snippet, scene)
    monkeypatch.setattr(boundary, "BWRAP_PATH", str(tmp_path / "no-bwrap"))
    with pytest.raises(SandboxUnavailable) as err:
        run(folder, "policy_off")
    message = str(err.value)
    assert "\n" not in message and "no-bwrap is missing" in message and "apt-get install bubblewrap" in message
    assert not scene.marker.exists()


def test_what_the_sandbox_sees_from_inside(tmp_path: Path, scene: Scene):
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "tools.py").write_text(
        "import os\n"
        "class ProbeManager:\n"
        "    def process_tool_call(self, tool_name, tool_input):\n"
        "        return {'uid': os.getuid(), 'root': sorted(os.listdir('/')), 'env': sorted(os.environ),\n"
        "                'pids': sorted(p for p in os.listdir('/proc') if p.isdigit()), 'cwd': os.getcwd()}\n")
    result = run_in_sandbox(folder, "tools.py", {"op": "call_tools", "groups": [[{"tool": "probe"}]]}, limits=LIMITS,
                            skip_policy=True, skip_guard=True)
    assert result.ok and result.layers == ["staging", "bubblewrap", "unprivileged_uid", "seccomp", "rlimits",
                                           *(["pids_cgroup"] if HAS_CGROUP else []), "wall_clock"]
    seen = result.results[0][0].result
    assert seen["uid"] == boundary.identity().uid != 0 and seen["cwd"] == boundary.FOLDER
    assert seen["pids"] == ["1"]  # the child alone, as its namespace's init: nothing of the host
    assert not {"home", "dev", "var", "run", "sys"} & set(seen["root"]), seen["root"]
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} & set(seen["env"]) and "PYTHONHASHSEED" in seen["env"]
