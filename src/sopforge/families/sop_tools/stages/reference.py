"""Stage 'reference': SOP + schema + API graph + tools + rows → GroundTruth, computed by execution.

The model writes ``reference_procedure.py`` (docs/bundle.md); the stage never trusts it. Each
answer is written into a temporary bundle next to the generated tools and the dataset rows and
run on every row in the sandbox (:func:`sopforge.families.sop_tools.verify.ground_truth.compute_ground_truth`).
Rows that raise, values outside the schema, unreached decision outcomes, unknown tools and
non-determinism are ``ground_truth.*`` checks, so they go back to the model on re-ask
(DESIGN, "The chain", row tools: the reference procedure computes the ground truth; TELLER S12).

Pure: no Prefect, no store. The flow wraps :func:`run` in a task and persists the result.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, ReferenceProcedure, csv_cell
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_until_valid
from sopforge.families.sop_tools.verify.consequences import DEFAULT_GATES
from sopforge.families.sop_tools.verify.ground_truth import MAX_EXCLUDED_SHARE, compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import input_columns, write_bundle
from sopforge.sandbox import SandboxLimits

__all__ = ["STAGE", "TEMPLATE_ID", "ToolSources", "ReferenceInputs", "render_input_columns",
           "render_decision_fields", "render_write_tools", "run"]

STAGE = "reference"
TEMPLATE_ID = "teller/reference_procedure"


class ToolSources(BaseModel):
    """The generated tools the procedure calls: toolspecs.json and tools.py."""

    model_config = ConfigDict(populate_by_name=True)

    toolspecs: list[dict[str, Any]] = Field(
        validation_alias=AliasChoices("toolspecs", "toolspecs_json"),
        description="The toolSpec array (a JSON string is accepted and parsed).")
    tool_code: str = Field(validation_alias=AliasChoices("tool_code", "tools_py", "code"),
                           description="Source of tools.py.")

    @field_validator("toolspecs", mode="before")
    @classmethod
    def _parse_json_text(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value


class ReferenceInputs(BaseModel):
    """What the reference stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema (roles, types, choices).")
    sop: SOPDocument = Field(description="Accepted SOP the procedure follows.")
    api_graph: APIGraph = Field(description="Accepted API graph (input columns, call order).")
    tools: ToolSources = Field(description="Generated toolspecs and tool code.")
    rows: list[dict[str, Any]] = Field(description="Dataset rows (existing fields), in order.")
    max_excluded_share: float = Field(MAX_EXCLUDED_SHARE, ge=0, le=1,
                                      description="Largest share of rows the procedure may fail on.")
    gates: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_GATES), description=(
        "min_distinct_paths and max_baseline_state_success (the theme's hardening section)."))


def render_input_columns(schema: DataSchema, columns: list[str], rows: list[dict[str, Any]]) -> str:
    """The ``input_columns`` parameter: one line per column, then an example case from the first row."""
    lines = []
    for name in columns:
        f = schema.field(name)
        lines.append(f"- {name} ({f.type}): {f.description} (e.g., {f.example})")
    if rows:
        example = {c: csv_cell(rows[0].get(c)) for c in columns}
        lines.append(f"Example case, exactly as run_procedure receives it: {json.dumps(example, ensure_ascii=False)}")
    return "\n".join(lines)


def render_decision_fields(schema: DataSchema) -> str:
    """The ``decision_fields`` parameter: one line per decision field with its allowed values."""
    return "\n".join(f"- {f.name} ({f.type}): one of " + ", ".join(
        ("True" if v == "true" else "False") if f.type == "boolean" else f'"{v}"' for v in f.labels())
        for f in schema.decisions)


def render_write_tools(graph: APIGraph) -> str:
    """The ``write_tools`` parameter: each write tool, its table, what it records and its branch."""
    lines = []
    for api in graph.write_apis:
        lines.append(f"- {api.api_name}: writes {api.writes_table} with {', '.join(api.input_names)}; "
                     + (f"only when {api.when_text}" if api.conditional else "on every branch"))
    return "\n".join(lines) or "There is no write tool."


def run(inputs: ReferenceInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None,
        limits: SandboxLimits | None = None) -> StageResult[GroundTruth]:
    """Ask for the reference procedure until it runs on the rows and yields complete ground truth.

    Args:
        inputs: Theme slug, schema, SOP, API graph, tools and dataset rows.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version, if regenerating.
        registry: Prompt registry; defaults to the project's ``prompts/``.
        limits: Sandbox limits for each execution of the procedure.

    Returns:
        The accepted GroundTruth (tasks, excluded rows, coverage) with its checks and provenance.

    Raises:
        ValidationFailed: No procedure passed the checks within ``settings.max_attempts``.
    """
    registry = registry or default_registry(settings)
    schema, graph = inputs.data_schema, inputs.api_graph
    columns = input_columns(schema, graph)
    rendered = registry.render(
        TEMPLATE_ID, sop_file_contents=inputs.sop.to_prompt_text(), sample_schema=schema.to_prompt_text(),
        api_graph=graph.to_prompt_text(), toolspecs=json.dumps(inputs.tools.toolspecs, indent=2, ensure_ascii=False),
        tool_code=inputs.tools.tool_code, input_columns=render_input_columns(schema, columns, inputs.rows),
        decision_fields=render_decision_fields(schema), write_tools=render_write_tools(graph),
        min_distinct_paths=int(inputs.gates["min_distinct_paths"]),
        max_baseline_share=f"{inputs.gates['max_baseline_state_success']:.0%}")

    def parse_and_check(raw: str) -> tuple[GroundTruth, list[CheckResult]]:
        procedure = ReferenceProcedure.parse(raw)
        with tempfile.TemporaryDirectory(prefix="sopforge-reference-") as tmp:
            bundle = write_bundle(Path(tmp) / "bundle", tool_code=inputs.tools.tool_code,
                                  toolspecs=inputs.tools.toolspecs, procedure_source=procedure.source,
                                  rows=inputs.rows, schema=schema)
            return compute_ground_truth(bundle, schema, graph, inputs.rows,
                                        max_excluded_share=inputs.max_excluded_share, limits=limits,
                                        gates=inputs.gates)

    return ask_until_valid(llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                           call_key_prefix=f"{inputs.theme_slug}/{STAGE}/main", settings=settings,
                           model=model, temperature=temperature, feedback=feedback)
