"""The end of a command stopped by SIGINT or SIGTERM: the exit hooks run, the interpreter's teardown does not.

A stopped command has printed its one line (the run is stored as interrupted, with the command that resumes
it), its stages in flight have finished and been stored, and every exit hook has written what it holds. What
is left is the interpreter's teardown, which a stop can reach while DuckDB objects are still referenced: the
extension then prints dozens of "nanobind: leaked instance" lines under the one line the user should read
(seen in CI after a SIGTERM). So the last exit hook ends such a process at once, with its exit code.

Imported first by ``sopforge.cli.app``, so its hook is registered first and runs last. Only the console
command arms it (``arm``): a test that calls the app in-process must not be ended by it.
"""

from __future__ import annotations

import atexit
import os
import sys

_armed = False
_code: int | None = None


def arm() -> None:
    """This process is the ``sopforge`` command: a stop by signal may end it without the teardown."""
    global _armed
    _armed = True


def stopped_by_signal(code: int) -> None:
    """The command stopped on SIGINT (130) or SIGTERM (143) and has said so."""
    global _code
    if _armed:
        _code = code


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
