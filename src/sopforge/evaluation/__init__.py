"""sopforge.evaluation: running agents on generated domains and scoring them (``sopforge eval``).

Shared infrastructure, knowing no family: the protocol a family implements
(:mod:`sopforge.evaluation.protocol`), the agents, the MCP environment server and the runner.
"""

from sopforge.evaluation.protocol import (
    AGENT_KINDS, DEFAULT_MAX_STEPS, EnvSession, EnvTool, EvalContext, EvalItem, EvalOptions, EvalReport, EvalSpec,
    ItemRecord, ItemResult, MetricTable, ToolEnvironment, ToolOutcome,
)

__all__ = ["AGENT_KINDS", "DEFAULT_MAX_STEPS", "EnvSession", "EnvTool", "EvalContext", "EvalItem", "EvalOptions",
           "EvalReport", "EvalSpec", "ItemRecord", "ItemResult", "MetricTable", "ToolEnvironment", "ToolOutcome"]
