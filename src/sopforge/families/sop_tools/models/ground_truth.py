"""Ground truth computed by executing a reference procedure over the generated tools.

The reference procedure (``reference_procedure.py``, docs/bundle.md) follows the SOP by calling
the tools; running it on every dataset row yields, per row, the decision outputs, the
intermediate values and the expected call sequence. That is a :class:`Task`. Rows where it
raises or returns an invalid value are :class:`ExcludedRow` s with their reason, never kept
(TELLER S12, L113: "structural errors" are filtered). DESIGN, "The chain": ground truth is
computed by execution, never guessed by an LLM.

Value conventions: every value in a Task is typed (existing fields as in the dataset rows,
intermediates as the tools returned them, decisions as the procedure returned them).
:func:`csv_cell` spells a value as a CSV cell; the ``case`` the procedure received was
``{column: csv_cell(value)}`` of ``Task.inputs``, and the bundle CSV is checked to hold exactly
those cells. :meth:`GroundTruth.export_rows` gives the exporter one typed dict per task.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from sopforge.parsing import ParseError, extract_tag, strip_code_fence
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.tools import csv_cell  # one spelling of bundle CSV cells, shared with the tools stage
from sopforge.families.sop_tools.models.trajectory import AgentReport, PathRow

__all__ = [
    "CODE_TAG",
    "ExcludedKind",
    "ReferenceProcedure",
    "ExpectedCall",
    "Task",
    "ExcludedRow",
    "GroundTruth",
    "OracleFailure",
    "OracleReport",
    "csv_cell",
]

CODE_TAG = "code"

ExcludedKind = Literal["exception", "invalid_output", "out_of_range", "intermediate_mismatch"]


class ReferenceProcedure(BaseModel):
    """The source of ``reference_procedure.py``: ``def run_procedure(manager, case) -> dict``."""

    source: str = Field(description="Python source of reference_procedure.py, as accepted.")

    @classmethod
    def parse(cls, raw_text: str) -> ReferenceProcedure:
        """Read the procedure from the last ``<code>`` block of a model answer (one code fence allowed).

        Args:
            raw_text: The model's full answer.

        Returns:
            The procedure; the sandbox policy and execution checks come later.

        Raises:
            ParseError: The block is missing, unclosed or empty.
        """
        body = strip_code_fence(extract_tag(raw_text, CODE_TAG))
        if not body.strip():
            raise ParseError(f"the <{CODE_TAG}> block is empty; write the whole reference_procedure.py in it")
        return cls(source=body.rstrip() + "\n")

    @property
    def sha256(self) -> str:
        """sha256 of the source (UTF-8)."""
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()


class ExpectedCall(BaseModel):
    """One tool call of the expected call sequence, with the result the tools gave."""

    tool: str = Field(description="Tool name (a toolSpec name).")
    input: dict[str, Any] = Field(description="Arguments exactly as the reference procedure passed them.")
    output: Any = Field(description="What the tool returned (JSON values).")


class Task(BaseModel):
    """One benchmark task: a dataset row with its computed ground truth."""

    task_id: str = Field(
        description="The row's id-field value, or 'row-<n>' (1-based) when the schema has no id field.")
    row_index: int = Field(description="0-based position of the row in the dataset.")
    inputs: dict[str, Any] = Field(
        description="Input columns (shown to the agent) -> dataset value; run_procedure received them as "
                    "csv_cell strings.")
    hidden: dict[str, Any] = Field(
        description="Hidden columns: existing fields not shown to the agent (dataset values) and intermediate "
                    "to-be-obtained fields (as the tools returned them).")
    expected_outputs: dict[str, Any] = Field(description="Decision field -> the allowed value the procedure decided.")
    expected_calls: list[ExpectedCall] = Field(description="The tool calls the procedure made, in order.")
    expected_path: list[str] = Field(default_factory=list,
                                     description="Tool names of expected_calls, in order (the task's branch).")
    expected_state: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        "The database diff the expected calls leave on a fresh Manager: {table: {record key: record}}; "
        "{} when the branch writes nothing."))
    order_constraints: list[list[str]] = Field(default_factory=list, description=(
        "[before, after] tool pairs the SOP orders on this path; pairs not listed may run in any order."))


class ExcludedRow(BaseModel):
    """A dataset row that yields no task, and why."""

    row_id: str = Field(description="The row's id-field value, or 'row-<n>' (1-based).")
    row_index: int = Field(description="0-based position of the row in the dataset.")
    kind: ExcludedKind = Field(
        description="'exception': the procedure or a tool raised; 'invalid_output': not a dict, a missing field, a "
                    "wrong type or a value outside the allowed choices; 'out_of_range': a numeric value outside "
                    "its schema range; 'intermediate_mismatch': an intermediate value differs from what the tools "
                    "returned.")
    reason: str = Field(description="One line: exception text, missing field, or offending value.")


class GroundTruth(BaseModel):
    """Tasks with computed outputs and call sequences, the excluded rows, and outcome coverage."""

    procedure: ReferenceProcedure = Field(description="The reference procedure that produced this ground truth.")
    id_field: str | None = Field(description="Field identifying a row, or None.")
    rows_total: int = Field(description="Dataset rows the procedure was run on.")
    tasks: list[Task] = Field(description="Rows with a complete, valid result, in dataset order.")
    excluded: list[ExcludedRow] = Field(description="Rows without a valid result, in dataset order.")
    coverage: dict[str, dict[str, int]] = Field(
        description="Decision fields, then enum/boolean intermediate fields -> allowed value -> number of tasks "
                    "(zero counts included; booleans as 'true'/'false').")
    columns: list[str] = Field(description="CSV column order of the export: every schema field, in schema order.")
    input_columns: list[str] = Field(
        description="Existing fields some API takes with source user_input: the task inputs shown to the agent.")
    hidden_columns: list[str] = Field(
        description="Existing fields that are not input columns (reachable only via tools).")
    intermediate_columns: list[str] = Field(description="To-be-obtained fields without [decision] (hidden columns).")
    output_columns: list[str] = Field(description="The [decision] fields: the answers (SOP-Bench output_columns).")
    write_tools: list[str] = Field(default_factory=list, description="Tools that change the simulated database.")
    state_tables: list[str] = Field(default_factory=list, description="Tables the write tools write.")
    paths: list[PathRow] = Field(default_factory=list,
                                 description="Path coverage: every distinct expected tool path with its tasks.")
    baselines: list[AgentReport] = Field(default_factory=list, description=(
        "Baseline agents replayed through the tools (call every tool, read-only, majority label)."))
    gates: dict[str, float] = Field(default_factory=dict, description=(
        "The bounds the paths and baselines were held to: min_distinct_paths, max_baseline_state_success."))

    @property
    def excluded_share(self) -> float:
        """Share of rows excluded (1.0 when there are no rows)."""
        return len(self.excluded) / self.rows_total if self.rows_total else 1.0

    def unreached(self, fields: list[str] | None = None) -> list[str]:
        """``field=value`` for every allowed value no task reaches.

        Args:
            fields: Fields to look at; default the output (decision) columns.
        """
        names = self.output_columns if fields is None else fields
        return [f"{name}={value}" for name in names for value, n in self.coverage.get(name, {}).items() if n == 0]

    def coverage_table_text(self) -> str:
        """The coverage table as aligned plain text, unreached values marked, for reports and re-asks."""
        header = ("field", "kind", "value", "tasks")
        lines: list[tuple[str, str, str, str]] = []
        for name, counts in self.coverage.items():
            kind = "decision" if name in self.output_columns else "intermediate"
            for i, (value, n) in enumerate(counts.items()):
                lines.append((name if i == 0 else "", kind if i == 0 else "", value,
                              f"{n}  <- unreached" if n == 0 else str(n)))
        widths = [max(len(row[c]) for row in [header, *lines]) for c in range(3)]
        out = [f"Coverage over {len(self.tasks)} tasks ({len(self.excluded)} of {self.rows_total} rows excluded)"]
        for row in [header, *lines]:
            out.append("  ".join(row[c].ljust(widths[c]) for c in range(3)) + "  " + row[3])
        return "\n".join(line.rstrip() for line in out)

    def export_rows(self) -> list[dict[str, Any]]:
        """One typed dict per task holding every column, keys in :attr:`columns` order (exporter input)."""
        rows = []
        for task in self.tasks:
            values = {**task.inputs, **task.hidden, **task.expected_outputs}
            rows.append({c: values.get(c) for c in self.columns})
        return rows

    def csv_rows(self) -> list[dict[str, str]]:
        """:meth:`export_rows` spelled as CSV cells (:func:`csv_cell`)."""
        return [{c: csv_cell(v) for c, v in row.items()} for row in self.export_rows()]


class OracleFailure(BaseModel):
    """A task the oracle agent did not solve."""

    task_id: str = Field(description="Task id (see Task.task_id).")
    row_index: int = Field(description="0-based CSV row of the task (SOP-Bench task id).")
    reasons: list[str] = Field(description="Why it failed: a call that raised, a result that differs, a wrong answer.")


class OracleReport(BaseModel):
    """Scores of the oracle agent on an exported folder (SOP-Bench ECR / C-TSR / TSR, sopbench_format.md §8)."""

    folder: str = Field(description="The folder checked.")
    n_tasks: int = Field(description="Tasks replayed (CSV rows).")
    completed: int = Field(description="Tasks whose every call returned without raising (ECR numerator).")
    correct: int = Field(description="Tasks solved under SOP-Bench's matching rules (TSR numerator).")
    strict_correct: int = Field(
        description="Tasks solved with answers equal after normalisation only (no substring match).")
    tool_calls: int = Field(description="Tool calls replayed.")
    tool_calls_ok: int = Field(description="Replayed tool calls that did not raise.")
    problems: list[str] = Field(default_factory=list,
                                description="Folder-level problems (missing files, bad metadata, sandbox failure).")
    failures: list[OracleFailure] = Field(default_factory=list, description="Failed tasks, in CSV order.")
    stateful: bool = Field(False, description="The tools keep a database state (database_state()) to score.")
    state_correct: int = Field(0, description="Tasks whose replayed calls leave exactly the expected database state.")
    order_correct: int = Field(0, description="Tasks without an order violation.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ecr(self) -> float:
        """Execution completion rate: completed / n."""
        return self.completed / self.n_tasks if self.n_tasks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def c_tsr(self) -> float:
        """Conditional task success rate: correct / completed."""
        return self.correct / self.completed if self.completed else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tsr(self) -> float:
        """Task success rate: correct / n."""
        return self.correct / self.n_tasks if self.n_tasks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def strict_tsr(self) -> float:
        """Task success rate with strict answer matching."""
        return self.strict_correct / self.n_tasks if self.n_tasks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def final_state(self) -> float | None:
        """Share of tasks whose replay leaves the expected database state (None: the tools keep no state)."""
        return self.state_correct / self.n_tasks if self.stateful and self.n_tasks else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def order(self) -> float:
        """Share of tasks without an order violation."""
        return self.order_correct / self.n_tasks if self.n_tasks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """The oracle must score 1.00 on both matchers, on final state and on order, with no folder problem."""
        n = self.n_tasks
        return (not self.problems and n > 0 and self.correct == self.strict_correct == n
                and self.order_correct == n and (not self.stateful or self.state_correct == n))

    def summary(self) -> str:
        """One line: ECR, TSR, strict TSR, final state, order and the failing task ids."""
        failing = ", ".join(f.task_id for f in self.failures[:10])
        more = f" (+{len(self.failures) - 10} more)" if len(self.failures) > 10 else ""
        state = "n/a" if self.final_state is None else f"{self.final_state:.2f}"
        text = (f"oracle on {self.n_tasks} tasks: ECR {self.ecr:.2f}, TSR {self.tsr:.2f}, "
                f"strict TSR {self.strict_tsr:.2f}, final state {state}, order {self.order:.2f}")
        if self.problems:
            text += f"; problems: {'; '.join(self.problems)}"
        return text + (f"; failing: {failing}{more}" if failing else "")

    def checks(self) -> list[CheckResult]:
        """``oracle.tsr`` as a CheckResult, the failing tasks and first reasons in details."""
        shown = "; ".join(f"{f.task_id}: {f.reasons[0]}" for f in self.failures[:5] if f.reasons)
        message = self.summary() + (f" — {shown}" if shown else "")
        return [check("oracle.tsr", self.passed, message, ecr=self.ecr, tsr=self.tsr, strict_tsr=self.strict_tsr,
                      final_state=self.final_state, order=self.order, failing=[f.task_id for f in self.failures])]
