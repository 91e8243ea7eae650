"""Trajectories and their scores: what an agent did on one task, and how it compares with the reference.

τ²-bench scores an agent by the state of the database it leaves behind, compared with the state
the reference actions leave when replayed on a fresh environment; TELLER records the reference's
call sequence and final outputs. A task here carries both (``Task.expected_state``,
``Task.expected_calls``) plus the order the SOP imposes (``Task.order_constraints``), and an
agent's :class:`Trajectory` is scored against them by
:func:`sopforge.families.sop_tools.verify.trajectory.score_trajectory`.

State: the Manager's ``database_state()`` is ``{table: {record key: record}}``; a *state diff* is
the part that changed during a task, in the same shape (a deleted record maps to ``None``). The
record key of a write is the case id, so one task's writes never touch another case's records.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field

__all__ = ["AgentReport", "PathRow", "StateDiff", "Trajectory", "TrajectoryCall", "TrajectoryScore",
           "state_entries"]

StateDiff = dict[str, dict[str, Any]]


def state_entries(diff: StateDiff | None) -> dict[str, Any]:
    """``{"table/key": record}`` for every record of a state diff (empty tables dropped)."""
    return {f"{table}/{key}": record for table, records in (diff or {}).items() for key, record in records.items()}


class TrajectoryCall(BaseModel):
    """One tool call an agent made, with what it returned and what it changed."""

    tool: str = Field(description="Tool name as called.")
    input: dict[str, Any] = Field(default_factory=dict, description="Arguments as passed.")
    output: Any = Field(None, description="The tool's result (None when it raised).")
    error: str | None = Field(None, description="'<ExceptionType>: message' when the call raised.")
    state_diff: StateDiff = Field(default_factory=dict, description="Records this call created or changed.")


class Trajectory(BaseModel):
    """What an agent did on one task: its calls in order, the database it left behind and its answer."""

    task_id: str = Field(description="The task (Task.task_id).")
    calls: list[TrajectoryCall] = Field(default_factory=list, description="Tool calls in the order made.")
    state_diff: StateDiff | None = Field(
        None, description="Records created or changed during the task (None: the tools keep no state).")
    answer: dict[str, Any] = Field(default_factory=dict, description="Decision field -> the agent's answer.")


class TrajectoryScore(BaseModel):
    """One trajectory judged against its task's expectations (all lists empty for the oracle)."""

    task_id: str = Field(description="The task scored.")
    outputs_correct: bool = Field(description="Every decision field equals the expected label (normalised).")
    outputs_harness: bool = Field(description="Every decision field matches under SOP-Bench's lenient matcher.")
    state_correct: bool | None = Field(description="The database diff equals the expected one (None: no state).")
    forbidden_writes: list[str] = Field(default_factory=list, description=(
        "'table/key' records the agent wrote that the SOP does not allow on this task's branch."))
    wrong_writes: list[str] = Field(default_factory=list,
                                    description="Expected records written with other values: 'table/key: field'.")
    missing_writes: list[str] = Field(default_factory=list, description="Expected records the agent never wrote.")
    order_violations: list[str] = Field(default_factory=list,
                                        description="'b before a': a call made before a call the SOP puts first.")
    unnecessary_calls: list[str] = Field(default_factory=list,
                                         description="Calls beyond the expected ones (tool names, with repeats).")
    missing_calls: list[str] = Field(default_factory=list, description="Expected calls the agent never made.")
    failed_calls: int = Field(0, description="Calls that raised.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def order_ok(self) -> bool:
        return not self.order_violations

    @computed_field  # type: ignore[prop-decorator]
    @property
    def success(self) -> bool:
        """Outputs right, final state right (when there is state) and no order violation."""
        return self.outputs_correct and self.state_correct is not False and self.order_ok


class AgentReport(BaseModel):
    """Scores of one agent over every task (an oracle, a baseline, later a model under evaluation)."""

    agent: str = Field(description="Agent name, e.g. 'oracle', 'call_every_tool', 'read_only', 'majority_label'.")
    description: str = Field("", description="What the agent does.")
    n_tasks: int = Field(description="Tasks scored.")
    outputs: float = Field(description="Share of tasks with every decision field right.")
    final_state: float | None = Field(description="Share of tasks whose database diff equals the expected one.")
    order: float = Field(description="Share of tasks without an order violation.")
    success: float = Field(description="Share of tasks right on outputs, final state and order together.")
    forbidden_write_tasks: int = Field(0, description="Tasks with at least one forbidden write.")
    mean_calls: float = Field(0.0, description="Mean number of tool calls per task.")
    mean_unnecessary_calls: float = Field(0.0, description="Mean number of calls beyond the expected ones.")
    failing: list[TrajectoryScore] = Field(default_factory=list,
                                           description="Scores of the first tasks that were not a full success.")

    def line(self) -> str:
        """One line: outputs, final state, order and success."""
        state = "n/a" if self.final_state is None else f"{self.final_state:.2f}"
        return (f"{self.agent} on {self.n_tasks} tasks: outputs {self.outputs:.2f}, final state {state}, "
                f"order {self.order:.2f}, success {self.success:.2f}")


class PathRow(BaseModel):
    """One distinct expected tool path: which tasks follow it and which outcomes it leads to."""

    path: list[str] = Field(description="Tool names in call order.")
    tasks: int = Field(description="Tasks whose expected path this is.")
    task_ids: list[str] = Field(default_factory=list, description="The first few of them.")
    outcomes: list[str] = Field(default_factory=list,
                                description="Distinct decision outcomes, 'field=value, field=value'.")
    writes: list[str] = Field(default_factory=list, description="Tables written on this path.")
