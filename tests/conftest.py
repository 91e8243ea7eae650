"""Suite-wide set-up: the slow end-to-end tier, the order tests start in, and parallel workers.

``make test`` (CI) runs every test on ``pytest-xdist`` workers (``-n``, see the Makefile). What
keeps that safe: every test writes under its own ``tmp_path`` (a per-worker base folder), servers
bind free loopback ports, and the workers share one Prefect server, started by the first test that
asks for ``prefect_api`` (``tests/integration/conftest.py``).

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

import pytest

from sopforge.gc_thresholds import collect_less_often

collect_less_often()  # the workers import what the sopforge command does (see the module), and run it in-process

# Relative cost of the slowest modules (measured with --durations); unknown slow modules weigh 1.
# Only the order depends on it: a wrong weight makes the suite a little longer, never wrong.
WEIGHTS = {  # ~ seconds per test / 15, from --durations of a serial run (test_local_topology: its group)
    "test_local_topology.py": 12,
    "test_eval.py": 12,  # the demo group: four evaluations on a copy of the session's demo
    "test_shared_prefect_server.py": 10,
    "test_review_gates.py": 7,
    "test_readme.py": 7,  # the demo group too
    "test_browser_review.py": 6,
    "test_demo_output.py": 6,  # the demo group: the shared demo is generated first
    "test_rerun.py": 5,
    "test_batch_resume.py": 4,
    "test_probe.py": 4,
    "test_generate.py": 3,
    "test_housekeeping.py": 3,
    "test_killed_runs.py": 3,
    "test_resumed_exports.py": 5,  # each test: a demo stopped after a package, then the same command again
    "test_concurrency.py": 2,
    "test_leading_zeros.py": 2,
    "test_hardening.py": 2,
    "test_maze.py": 2,
}


# A test that asks for one of these needs a Prefect server (and the demo a whole generation).
SERVER_FIXTURES = ("prefect_api", "cli", "demo")


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
