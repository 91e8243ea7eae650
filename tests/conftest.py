"""Suite-wide set-up: the slow end-to-end tier, the order tests start in, and parallel workers.

``make test`` (CI) runs every test on ``pytest-xdist`` workers (``-n``, see the Makefile). What
keeps that safe: every test writes under its own ``tmp_path`` (a per-worker base folder), servers
bind free loopback ports, and the first test that asks for ``prefect_api`` starts the one Prefect server
every worker shares (``tests/session_server.py``); the session stops it at its end (below).

Tiers (``tests/README.md``):
- ``slow``: end to end, the CLI in a subprocess against a Prefect server, seconds to minutes each.
  Every test marked ``prefect`` or using a server fixture (``SERVER_FIXTURES``) is ``slow`` too. ``pytest -m "not slow"`` is the quick loop while
  developing; CI runs both tiers.
- everything else: unit tests and quick integration checks.

Order: slow tests start first, heaviest first (``weight`` below), so that the long ones do not end up
last on one worker while the others sit idle. Tests sharing an expensive module or session fixture
(the local topology, the shared demo) carry ``xdist_group`` marks so that one worker builds it once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import session_server

from sopforge.gc_thresholds import collect_less_often

collect_less_often()  # the workers import what the sopforge command does (see the module), and run it in-process

pytest_plugins = ("cpu_report",)  # PYTEST_CPU_REPORT=FILE: each test's CPU, its subprocesses included (tests/README.md)

# Relative cost of the slowest modules (measured with --durations); unknown slow modules weigh 1.
# Only the order depends on it: a wrong weight makes the suite a little longer, never wrong.
WEIGHTS = {  # ~ seconds per test / 15, from --durations of a serial run (test_local_topology: its group)
    "test_local_topology.py": 12,  # one test: servers, workers and two flow runs at once
    "test_eval.py": 12,  # the demo group: four evaluations on a copy of the session's demo
    "test_shared_prefect_server.py": 3,  # SOP-Maze alone, twice at once
    "test_review_gates.py": 7,
    "test_readme.py": 7,  # the demo group too
    "test_browser_review.py": 6,
    "test_demo_output.py": 6,  # the demo group: the shared demo is generated first
    "test_rerun.py": 5,
    "test_batch_resume.py": 4,
    "test_probe.py": 4,
    "test_generate.py": 3,
    "test_housekeeping.py": 3,  # the demo group: a copy of the demo, a second run reusing it
    "test_killed_runs.py": 3,
    "test_resumed_exports.py": 5,  # each test: a demo stopped after a package, then the same command again
    "test_concurrency.py": 2,
    "test_leading_zeros.py": 2,
    "test_hardening.py": 2,
    "test_maze.py": 2,
}


# Modules whose tests mostly wait (a flow paused for a reviewer in a browser, a process killed at some
# point): a third of their wall time or less is CPU. Spread evenly among the other slow tests, so that
# they do not fill every worker at once while the cores sit idle: when the two browser tests and a killed
# run ran side by side, the suite used a third of the two cores for two minutes. The browser tests are
# one xdist_group, so they also never run at the same time as each other.
WAITING = {"test_browser_review.py", "test_resumed_exports.py", "test_probe.py"}

# A test that asks for one of these needs a Prefect server (and the demo a whole generation).
SERVER_FIXTURES = ("prefect_api", "cli", "demo")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # a worker: the controller stops the server after every worker
        return
    report = os.environ.get("PYTEST_CPU_REPORT")
    session_server.stop(session_server.shared_folder(session.config._tmp_path_factory.getbasetemp()),
                        Path(report) if report else None)


def weight(item: pytest.Item) -> int:
    if item.get_closest_marker("slow") is None:
        return 0
    return WEIGHTS.get(item.path.name, 1)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("prefect") is not None or set(SERVER_FIXTURES) & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
    # Stable: within one weight, tests keep their file order (module fixtures stay together).
    items.sort(key=weight, reverse=True)
    slow = [item for item in items if weight(item)]
    items[:len(slow)] = spread_waiting(slow)


def spread_waiting(items: list[pytest.Item]) -> list[pytest.Item]:
    """The same tests with the ``WAITING`` modules' spread evenly among the others, the heaviest first.

    Counted the way the scheduler hands them out (``--dist loadgroup --no-loadscope-reorder``): the tests
    of one ``xdist_group`` go to one worker together, at their first test's place, so they count as one.
    """
    units: dict[object, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_group(item) or item, []).append(item)
    waiting = [unit for unit in units.values() if unit[0].path.name in WAITING]
    others = [unit for unit in units.values() if unit[0].path.name not in WAITING]
    step = max(1, len(others) // (len(waiting) + 1))
    for i, unit in enumerate(waiting):  # after the first `step` others, then every `step`
        others.insert(min(len(others), (i + 1) * step + i), unit)
    return [item for unit in others for item in unit]


def _group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None
