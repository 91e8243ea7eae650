"""``python -m sopforge.orchestration.prefect_cli ARGS``: Prefect's own command line (``prefect ARGS``)
with sopforge's collector thresholds (``sopforge.gc_thresholds``), for the Prefect servers and
workers sopforge starts: a server handles every flow and task run's API calls for its whole life."""

from __future__ import annotations

import sys

from sopforge.gc_thresholds import collect_less_often

collect_less_often()

from prefect.cli import app  # noqa: E402  - after the thresholds: the import is most of the garbage

if __name__ == "__main__":
    sys.argv[0] = "prefect"
    app()
