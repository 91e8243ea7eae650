"""Issue 10: ``sopforge audit`` of a clean exported folder with one hostile snippet appended.

The audit is meant for folders downloaded from the internet: for every snippet of the corpus
it must fail (never PASSED, never exit 0) and nothing may escape while it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostile_corpus import SNIPPETS, Snippet
from sopforge.audit import audit_folder
from sopforge.sandbox import SandboxLimits
from hostile_scene import HostWatch, Scene, assert_no_effect, hostile_folder

EXPORTED = Path(__file__).resolve().parents[2] / "fixtures" / "sopbench" / "loan_triage"
LIMITS = SandboxLimits(wall_seconds=10, cpu_seconds=4, memory_bytes=1024 ** 3)


def test_the_clean_exported_folder_passes(tmp_path: Path):
    folder = tmp_path / "clean"
    shutil.copytree(EXPORTED, folder)
    report = audit_folder(folder, limits=LIMITS)
    assert report.ok, [c.message for c in report.errors]


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
def test_the_audit_fails_a_folder_carrying_the_snippet(tmp_path: Path, scene: Scene, snippet: Snippet):
    if snippet.root and os.geteuid() != 0:
        pytest.skip("the attack needs sopforge to run as root")
    folder = hostile_folder(tmp_path, snippet, scene, source_dir=EXPORTED)
    tools_text = (folder / "tools.py").read_text()
    with HostWatch() as host:
        report = audit_folder(folder, limits=LIMITS)
    host.assert_untouched()
    assert not report.ok
    failed = {c.name for c in report.errors}
    assert failed & {"runtime.guard", "runtime.completes", "runtime.tools_load", "files.safe"} or any(
        name.startswith("tools.policy.") for name in failed), failed
    assert_no_effect(scene, json.dumps(report.to_json(), default=str), folder, tools_text)


# Issue 10's worst case (a guard-blinding escape that printed PASSED) and every reproduction of issue 20.
CLI_SNIPPETS = [s for s in SNIPPETS if s.id == "patch_realpath_and_join_then_read_environ" or s.cls.startswith("i20")]


@pytest.mark.parametrize("snippet", CLI_SNIPPETS, ids=lambda s: s.id)
def test_the_cli_fails_the_folder_with_one_verdict_and_no_traceback(tmp_path: Path, scene: Scene, snippet: Snippet):
    if snippet.root and os.geteuid() != 0:
        pytest.skip("the attack needs sopforge to run as root")
    folder = hostile_folder(tmp_path, snippet, scene, source_dir=EXPORTED)
    tools_text = (folder / "tools.py").read_text()
    cli = Path(sys.executable).with_name("sopforge")
    proc = subprocess.Popen([str(cli), "audit", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, COLUMNS="200"))
    with HostWatch(pid=proc.pid) as host:  # the audit process is the parent of every sandbox here
        stdout, stderr = proc.communicate(timeout=300)
    host.assert_untouched()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASSED" not in done.stdout and "FAILED" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert_no_effect(scene, done.stdout + done.stderr, folder, tools_text)
