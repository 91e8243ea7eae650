"""A command stopped by a signal ends after its exit hooks, without the interpreter's teardown (whose noise,
DuckDB's "nanobind: leaked instance" lines, once followed the one line a stopped run prints)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = r"""
import atexit, sys
from sopforge.cli import stopped
class Teardown:
    def __del__(self):
        sys.stderr.write("teardown ran\n")
keep = Teardown()  # freed only by the interpreter's teardown
atexit.register(lambda: sys.stderr.write("exit hook ran\n"))
if sys.argv[1] == "armed":
    stopped.arm()
stopped.stopped_by_signal(143)
sys.stderr.write("error: run r-1 interrupted by SIGTERM\n")
sys.exit(143)
"""


def run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=60)


def test_the_console_command_skips_the_teardown_after_its_exit_hooks_and_keeps_its_code():
    done = run("armed")
    assert done.returncode == 143
    assert done.stderr.splitlines() == ["error: run r-1 interrupted by SIGTERM", "exit hook ran"]


def test_a_process_that_only_imported_the_cli_ends_as_usual():
    done = run("in-process")
    assert done.returncode == 143 and done.stderr.splitlines()[-1] == "teardown ran"
