"""sop_tools in ``sopforge eval``: the domain as a tool environment, the SOP-Bench agents' tasks,
TELLER's graph reconstruction and execution, TOD-ProcBench tasks 1-3, baselines and the report.

``EVALUATION`` is what ``family.py`` declares; its functions import the suites (and the MCP SDK)
on first use, so loading the family for ``sopforge generate`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sopforge.evaluation.protocol import EvalSpec

__all__ = ["EVALUATION"]


def _plan(ctx):
    from sopforge.families.sop_tools.evaluation.spec import plan

    return plan(ctx)


def _run(item, ctx, llm):
    from sopforge.families.sop_tools.evaluation.spec import run

    return run(item, ctx, llm)


def _report(records, ctx):
    from sopforge.families.sop_tools.evaluation.report import report

    return report(records, ctx)


def _environment(export_dir: Path, options: dict[str, Any]):
    from sopforge.families.sop_tools.evaluation.environment import SopToolsEnvironment

    return SopToolsEnvironment(export_dir, options)


EVALUATION = EvalSpec(plan=_plan, run=_run, report=_report, environment=_environment,
                      suites=("sop_bench", "teller_graph", "tod_task1", "tod_task2", "tod_task3"))
