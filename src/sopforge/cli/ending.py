"""How the ``sopforge`` command ends: every exit hook runs, the interpreter's teardown does not.

By the time a command exits it has printed what it had to say, its worker threads have finished, and every
exit hook has written what it holds (the store's queued calls and journals, Prefect's logs, temporary
folders). What is left is the interpreter's teardown, which can meet a daemon thread inside DuckDB: the thread
is unwound in C++ and the process aborts with "FATAL: exception not rethrown" (exit -6) after a command that
had succeeded, or DuckDB prints dozens of "nanobind: leaked instance" lines under the one line a stopped run
prints. CI saw each of these. So the last exit hook ends the process at once, with the command's exit code.

Imported first by ``sopforge.cli.app``, so its hook is registered first and runs last. Only the console
command sets the code (``ending_with``): a test that calls the app in-process ends as usual.
"""

from __future__ import annotations

import atexit
import os
import sys

_code: int | None = None


def ending_with(code: object) -> None:
    """The command is exiting with ``code`` (what ``SystemExit`` carries: None, an int or a message)."""
    global _code
    _code = 0 if code is None else code if isinstance(code, int) else 1


def _end_without_teardown() -> None:
    if _code is None:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nothing more can reach the reader anyway
    os._exit(_code)


atexit.register(_end_without_teardown)
