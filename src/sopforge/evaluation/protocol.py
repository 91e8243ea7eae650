"""What a family gives ``sopforge eval``: a plan of items, a runner for one item, a report.

``sopforge eval RUN`` evaluates agents on a generated domain. The shared infrastructure
(``sopforge.evaluation``, the ``evaluate`` flow) owns everything a family should not repeat: the
options, the gateway the agents call models through, item concurrency within the gateway's limits,
the results tables (an item already done is never run again, so a crashed or stopped evaluation
resumes where it stopped and pays for no item twice), the per-item accounting of tokens, cost and
latency, the leaderboard artifact and ``sopforge eval report``. A family contributes one
:class:`EvalSpec` (``Family.evaluation``):

* ``plan(ctx)``: the items to run, read from the run's export (and, where the export lacks
  something, from the run's artifacts through ``ctx.stage_content``). An item is one task for one
  agent: the model under evaluation (``agent`` = the agent kind, ``fc`` or ``react``) or a baseline
  (``agent`` = the baseline's name). Baselines are items too and are scored by the same code. A
  plan raises :class:`~sopforge.errors.UserError` when the export cannot be evaluated at all (no
  ground truth), with one line saying what to do.
* ``run(item, ctx, llm)``: runs one item and returns an :class:`ItemResult`. Everything that goes
  wrong with the item itself (an unparseable answer, an agent that loops until the step limit, a
  tool that crashes in the sandbox, arguments that do not validate, a provider that refuses the
  model) is returned as ``ItemResult.error``, never raised: the item is then scored as a failure
  and the evaluation goes on. ``llm`` is scoped to the item (its calls are counted for it); call keys
  come from :meth:`EvalContext.call_key` so recordings replay.
* ``report(records, ctx)``: the family's metric tables from the stored item records, with every
  baseline printed beside the agent, and the facts ``--json`` prints.
* ``environment(export_dir, options)`` (optional): the domain as a tool environment, served by
  ``sopforge mcp RUN`` and used by the family's own agents through the same server code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

from pydantic import BaseModel, Field

from sopforge.llm.types import sha256_json

if TYPE_CHECKING:
    from sopforge.llm.types import LLMClient
    from sopforge.settings import Settings

__all__ = ["AGENT_KINDS", "DEFAULT_MAX_STEPS", "EnvSession", "EnvTool", "EvalContext", "EvalItem", "EvalOptions",
           "EvalReport", "EvalSpec", "ItemRecord", "ItemResult", "MetricTable", "ToolEnvironment", "ToolOutcome"]

AgentKind = Literal["fc", "react"]
AGENT_KINDS: tuple[str, ...] = ("fc", "react")
# SOP-Bench's iteration caps (sop_bench.md §5): 10 for the function-calling agent, 15 for ReAct.
DEFAULT_MAX_STEPS = {"fc": 10, "react": 15}
_KEY_PART = re.compile(r"[^A-Za-z0-9_.:-]+")


class EvalOptions(BaseModel):
    """The options of one evaluation; those that change results are part of its resume key."""

    families: list[str] = Field(description="Families evaluated, in order.")
    provider: str = Field(description="LLM provider the agents call (anthropic, openai, replay, exchange...).")
    model: str = Field(description="Model under evaluation.")
    base_url: str | None = Field(None, description="OpenAI/Anthropic-compatible server URL, when not the default.")
    agent: AgentKind = Field("fc", description="fc: native function calling; react: ReAct text agent.")
    limit: int | None = Field(None, ge=1, description="Evaluate only the first N tasks of each suite.")
    max_steps: int | None = Field(None, ge=1, description="Model turns per task (default: 10 for fc, 15 for react).")
    temperature: float = Field(0.5, ge=0, description="Sampling temperature (SOP-Bench evaluates at 0.5).")
    max_tokens: int = Field(4096, ge=1, description="Completion budget per model turn.")
    ablations: bool = Field(False, description="Also run the papers' ablations (SOP variants, minimal registry).")
    judge_model: str | None = Field(None, description="Model of the LLM judge (default: the evaluated model).")

    @property
    def steps(self) -> int:
        """The step limit in force."""
        return self.max_steps or DEFAULT_MAX_STEPS[self.agent]

    def key(self) -> str:
        """Hash of every option that changes a result: an unfinished evaluation with the same key resumes."""
        return sha256_json(self.model_dump())[:16]


class EvalItem(BaseModel):
    """One unit of evaluation: one task for one agent (the model's or a baseline)."""

    suite: str = Field(description="The metric table the item belongs to, e.g. 'sop_bench', 'tod_task2'.")
    agent: str = Field(description="'fc' or 'react' for the model under evaluation, else a baseline's name.")
    item_id: str = Field(description="Unique within (family, suite, agent); stable, so a resumed run skips it.")
    payload: dict[str, Any] = Field(default_factory=dict, description="JSON the family's runner needs.")

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.agent}/{self.item_id}"


class ItemResult(BaseModel):
    """What running one item produced."""

    output: dict[str, Any] = Field(default_factory=dict, description="The agent's trajectory, answer and raw text.")
    score: dict[str, Any] = Field(default_factory=dict, description="Per-item metrics the report aggregates.")
    error: str | None = Field(None, description="One line: why the item failed (it still counts, as a failure).")


class ItemRecord(BaseModel):
    """A stored item result with its accounting (what ``report`` reads)."""

    family: str
    suite: str
    agent: str
    item_id: str
    output: dict[str, Any] = Field(default_factory=dict)
    score: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0


class MetricTable(BaseModel):
    """One table of a family's report: a row per agent (the model's and each baseline)."""

    title: str = Field(description="What the table measures, citing the paper.")
    columns: list[str] = Field(description="Column headers; the first is the agent.")
    rows: list[list[str]] = Field(default_factory=list, description="Formatted cells.")


class EvalReport(BaseModel):
    """A family's results: tables for the terminal and the leaderboard, facts for ``--json``."""

    tables: list[MetricTable] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class EvalContext:
    """What a family's plan, runner and report get.

    Attributes:
        eval_id: The evaluation (row of ``eval_runs``).
        run_id: The generated domain's run.
        theme_slug: Its slug (first part of every call key).
        export_dir: ``<home>/exports/<run id>``.
        options: The evaluation's options.
        settings: sopforge settings (sandbox limits, prices...).
        stage_content: The run's current artifact content of a stage (None when it has none).
    """

    eval_id: str
    run_id: str
    theme_slug: str
    export_dir: Path
    options: EvalOptions
    settings: "Settings"
    stage_content: Callable[[str], dict[str, Any] | None] = field(default=lambda stage: None)

    def call_key(self, family: str, item: EvalItem, turn: int) -> str:
        """The call key of turn ``turn`` of an item: stable across evaluations, so replay finds it.

        ``<slug>/eval_<family>/<suite>.<agent>.<item id>/t<turn>``; the evaluated model is not in it
        (a recording answers for whichever model recorded it) but the agent kind is.
        """
        item_part = _KEY_PART.sub("_", f"{item.suite}.{item.agent}.{item.item_id}")
        return f"{self.theme_slug}/eval_{family}/{item_part}/t{turn}"


# ----------------------------------------------------------------------------- environments

class EnvTool(BaseModel):
    """A tool of an environment, as an MCP client and the built-in agents see it."""

    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="JSON Schema of the arguments.")
    writes: bool = Field(False, description="The tool changes the environment's state ([WRITE] in its description).")


class ToolOutcome(BaseModel):
    """What one tool call returned: the tool's result, or an error the caller reads as the result."""

    result: Any = None
    error: str | None = Field(None, description="Schema error, unknown tool, or the tool's exception.")


class EnvSession(Protocol):
    """One client's view of an environment: its own state, seeded from the export."""

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome: ...

    def reset(self) -> None: ...

    def state(self) -> dict[str, Any]: ...


class ToolEnvironment(Protocol):
    """A generated domain as a tool environment (served by ``sopforge mcp``)."""

    name: str
    instructions: str

    def tools(self) -> list[EnvTool]: ...

    def tasks(self) -> list[dict[str, Any]]: ...

    def new_session(self) -> EnvSession: ...


@dataclass(frozen=True)
class EvalSpec:
    """How a family takes part in ``sopforge eval`` (see the module docstring).

    Attributes:
        plan: ``plan(ctx) -> [EvalItem]``; raises UserError when the export cannot be evaluated.
        run: ``run(item, ctx, llm) -> ItemResult``; never raises for a problem of the item.
        report: ``report(records, ctx) -> EvalReport``.
        environment: ``environment(export_dir, options) -> ToolEnvironment`` for ``sopforge mcp``.
        suites: the suites it can plan, for help texts.
    """

    plan: Callable[[EvalContext], list[EvalItem]]
    run: Callable[[EvalItem, EvalContext, "LLMClient"], ItemResult]
    report: Callable[[list[ItemRecord], EvalContext], EvalReport]
    environment: Callable[[Path, dict[str, Any]], ToolEnvironment] | None = None
    suites: tuple[str, ...] = ()
