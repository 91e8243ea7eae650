"""The ``sopforge`` command ends after its exit hooks, without the interpreter's teardown (where a daemon
thread inside DuckDB aborted a finished command with "FATAL: exception not rethrown", and DuckDB printed
"nanobind: leaked instance" lines under a stopped run's one line)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = r"""
import atexit, sys
from sopforge.cli import ending
class Teardown:
    def __del__(self):
        sys.stderr.write("teardown ran\n")
keep = Teardown()  # freed only by the interpreter's teardown
atexit.register(lambda: sys.stderr.write("exit hook ran\n"))
code = {"ok": None, "stopped": 143, "message": "error text"}[sys.argv[2]]
if sys.argv[1] == "command":
    ending.ending_with(code)
sys.stderr.write("last line\n")
sys.exit(code)
"""


def run(mode: str, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM, mode, code], capture_output=True, text=True, timeout=60)


def test_the_command_skips_the_teardown_after_its_exit_hooks_and_keeps_its_code():
    for code, status in (("ok", 0), ("stopped", 143), ("message", 1)):
        done = run("command", code)
        assert done.returncode == status
        assert done.stderr.splitlines()[:1] == ["last line"] and done.stderr.splitlines()[-1] == "exit hook ran"
        assert "teardown ran" not in done.stderr


def test_a_process_that_only_imported_the_cli_ends_as_usual():
    done = run("library", "stopped")
    assert done.returncode == 143 and done.stderr.splitlines()[-1] == "teardown ran"
