"""The sop_tools family's :class:`~sopforge.evaluation.protocol.EvalSpec`: plans every suite, dispatches items.

A suite that cannot be planned (no ground truth in the export, no instruction document, no API
graph) becomes one item carrying the reason as its error, so the other suites still run and the
report says what is missing; only an export that is not a sop_tools export at all stops the family.
"""

from __future__ import annotations

from sopforge.errors import UserError
from sopforge.evaluation.protocol import EvalContext, EvalItem, ItemResult
from sopforge.families.sop_tools.evaluation import sop_bench, teller, tod
from sopforge.llm.types import LLMClient

__all__ = ["plan", "run"]

PLAN_ERROR = "plan"


def plan(ctx: EvalContext) -> list[EvalItem]:
    """Every suite's items; a suite that cannot be planned is one error item."""
    items: list[EvalItem] = []
    for suite, planner in ((sop_bench.SUITE, sop_bench.plan), (teller.SUITE, teller.plan), ("tod", tod.plan)):
        try:
            items += planner(ctx)
        except UserError:
            raise  # not a sop_tools export at all
        except (LookupError, FileNotFoundError, OSError, ValueError) as problem:
            items.append(EvalItem(suite=suite, agent=PLAN_ERROR, item_id=suite, payload={"error": str(problem)}))
    return items


def run(item: EvalItem, ctx: EvalContext, llm: LLMClient) -> ItemResult:
    if item.agent == PLAN_ERROR:
        return ItemResult(error=item.payload["error"])
    if item.suite.startswith(sop_bench.SUITE):
        return sop_bench.run(item, ctx, llm)
    if item.suite == teller.SUITE:
        return teller.run(item, ctx, llm)
    return tod.run(item, ctx, llm)
