"""Stage 'tools': SOP + graph + data → API docs, toolspecs and tools.py (SOP-Bench C.4a/C.4b/C.5, TELLER P6-P8).

Three sequential asks, each its own ``ask_until_valid`` conversation whose answer must pass its
checks before the next one starts (``sopforge.families.sop_tools.verify.tool_checks``):

1. ``api_docs`` (call keys ``{slug}/tools/api_docs/aN``): one ``<API>`` per API-graph node with the
   node's inputs and outputs;
2. ``toolspecs`` (``{slug}/tools/toolspecs/aN``): one toolSpec per node, valid JSON Schema, and
   every dataset row's arguments validate against them. Rows are checked here, where the model
   that can fix a spec is the one asked;
3. ``code`` (``{slug}/tools/code/aN``): tools.py passes the AST policy and the Manager contract, then
   runs on **every** row in the sandbox (two processes); any failing check, runtime ones
   included, is quoted back to the model on re-ask.

Prompts show at most :data:`SAMPLE_ROWS` rows. Pure: no Prefect, no store.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

from pydantic import AliasChoices, BaseModel, Field

from sopforge.errors import UserError, ValidationFailed
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, RenderedPrompt, default_registry
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, apply_waivers, as_report, blocking_failures
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset, no_identifier_message
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.tools import (
    APIDocs, ToolCode, ToolsArtifact, ToolSpecs, ToolsStepRecord, csv_cell, manager_class_name,
)
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_keeping_answers
from sopforge.sandbox import DEFAULT_ALLOWED, SandboxLimits
from sopforge.families.sop_tools.verify.tool_checks import (
    check_api_docs, check_code_static, check_rows_against_specs, check_toolspecs,
)
from sopforge.families.sop_tools.verify.data_dependencies import one_value_per_input
from sopforge.families.sop_tools.verify.tool_runtime import TOOL_CHECK_LIMITS, check_runtime

__all__ = ["STAGE", "TEMPLATE_IDS", "SAMPLE_ROWS", "ToolsInputs", "allowed_imports_text", "sample_csv", "run",
           "write_tables_text"]

STAGE = "tools"
DOCS_TEMPLATE, SPECS_TEMPLATE, CODE_TEMPLATE = "sop_bench/api_docs", "sop_bench/toolspecs", "sop_bench/tool_code"
TEMPLATE_IDS = (DOCS_TEMPLATE, SPECS_TEMPLATE, CODE_TEMPLATE)
SAMPLE_ROWS = 5
# pandas and numpy are allowed by the sandbox but take seconds to import; csv is all tools.py needs.
_NOT_OFFERED = frozenset({"pandas", "numpy", "__future__"})


class ToolsInputs(BaseModel):
    """What the tools stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key and of the class name.")
    context: BusinessContext = Field(description="Accepted business context.")
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema (field types, decisions).")
    sop: SOPDocument = Field(description="Accepted SOP (formulas and thresholds the tools compute with).")
    api_graph: APIGraph = Field(description="Accepted API graph: one tool per node, with its parameters.")
    dataset: Dataset = Field(description="Accepted rows; the runtime checks run the tools on all of them.")


def allowed_imports_text() -> str:
    """The modules the code prompt offers: the sandbox allow-list without the heavy ones."""
    return ", ".join(sorted(DEFAULT_ALLOWED - _NOT_OFFERED))


def write_tables_text(graph: APIGraph) -> str:
    """The code prompt's ``write_tables``: one line per write API and the table it writes."""
    lines = [f"{a.api_name} writes {a.writes_table}" for a in graph.write_apis]
    return "\n".join(lines) or "There is no write tool: create self._tables = {} and database_state() returns {}."


def sample_csv(dataset: Dataset, max_rows: int = SAMPLE_ROWS) -> str:
    """The header and first rows of the bundle CSV, exactly as ``tool_checks.write_bundle`` writes them."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(dataset.fields)
    writer.writerows([csv_cell(row.get(f)) for f in dataset.fields] for row in dataset.rows[:max_rows])
    return buffer.getvalue().rstrip("\n")


def run(inputs: ToolsInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None,
        limits: SandboxLimits | None = None) -> StageResult[ToolsArtifact]:
    """Write and check the API docs, the toolspecs and tools.py of the domain.

    Args:
        inputs: Theme slug and the accepted context, schema, SOP, API graph and dataset.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget per ask, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version; appended to all three prompts.
        registry: Prompt registry; defaults to the project's ``prompts/``.
        limits: Sandbox limits of each runtime-check process; defaults to ``TOOL_CHECK_LIMITS``.

    Returns:
        The accepted ToolsArtifact. ``checks`` are those of the three accepted answers;
        ``attempts`` and ``raw_texts`` cover all three asks; the template identity and
        ``prompt_hash`` are the first ask's (the only prompt that depends on the inputs alone);
        ``artifact.steps`` records each ask's.

    Raises:
        UserError: The dataset has no id field (tools could not look rows up).
        ValidationFailed: The data gives one input of a read API two values of an output (before anything is
            asked: the cause is in the data), or an ask failed every attempt; the message names the step, and
            ``raw_texts`` holds every answer so far.
    """
    registry = registry or default_registry(settings)
    ctx, schema, sop, graph = inputs.context, inputs.data_schema, inputs.sop, inputs.api_graph
    dataset = inputs.dataset.keyed_by(schema)  # a dataset stored by older code may say id_field: null
    if not dataset.id_field:
        raise UserError(no_identifier_message("tools", schema, "tools look rows up by it"))
    class_name = manager_class_name(inputs.theme_slug)
    limits = limits or TOOL_CHECK_LIMITS
    shared = {"sop_file_contents": sop.to_prompt_text(), "sample_schema": schema.to_prompt_text()}
    sample_rows = dataset.to_prompt_text(max_rows=SAMPLE_ROWS)
    raw_texts: list[str] = []
    steps: list[ToolsStepRecord] = []
    results: list[StageResult] = []
    # Data no tool can match fails every tools.py the model writes: found before anything is asked (issue 19).
    preflight = apply_waivers([one_value_per_input(dataset.rows, schema, graph, dataset.id_field)], settings.waivers)
    if failed := blocking_failures(preflight):
        error = ValidationFailed(f"{STAGE}: {failed[0].message}", report=as_report(failed))
        error.raw_texts = []  # type: ignore[attr-defined]  # nothing was asked
        raise error

    def ask(step: str, rendered: RenderedPrompt, parse_and_check: Callable) -> StageResult:
        result = ask_keeping_answers(raw_texts, llm, rendered, step=step, parse_and_check=parse_and_check,
                                     stage=STAGE, call_key_prefix=f"{inputs.theme_slug}/{STAGE}/{step}",
                                     settings=settings, model=model, temperature=temperature, feedback=feedback)
        steps.append(ToolsStepRecord(step=step, template_id=rendered.template_id, template_hash=rendered.template_hash,
                                     prompt_hash=rendered.prompt_hash, attempts=result.attempts))
        results.append(result)
        return result

    def parse_docs(raw: str) -> tuple[APIDocs, list[CheckResult]]:
        docs = APIDocs.parse(raw)
        return docs, check_api_docs(docs, graph, schema)

    first = registry.render(DOCS_TEMPLATE, **shared, business_context=ctx.to_prompt_text(),
                            api_graph=graph.to_prompt_text(), sample_data=sample_rows)
    docs: APIDocs = ask("api_docs", first, parse_docs).artifact

    def parse_specs(raw: str) -> tuple[ToolSpecs, list[CheckResult]]:
        specs = ToolSpecs.parse(raw)
        checks = check_toolspecs(specs, graph, schema)
        return specs, checks + check_rows_against_specs(dataset, specs, schema)

    rendered = registry.render(SPECS_TEMPLATE, **shared, business_context=ctx.to_prompt_text(),
                               api_graph=graph.to_prompt_text(), api_docs=docs.to_prompt_text(),
                               sample_data=sample_rows)
    specs: ToolSpecs = ask("toolspecs", rendered, parse_specs).artifact

    def parse_code(raw: str) -> tuple[ToolCode, list[CheckResult]]:
        code = ToolCode.parse(raw, class_name)
        checks = check_code_static(code, specs)
        if blocking_failures(checks):
            return code, checks  # never run code the policy refuses
        return code, checks + check_runtime(code, specs, graph, schema, dataset, limits=limits)

    rendered = registry.render(CODE_TEMPLATE, **shared, api_docs=docs.to_prompt_text(),
                               toolspecs=specs.to_prompt_text(),
                               sample_data=sample_csv(dataset), id_field=dataset.id_field, class_name=class_name,
                               allowed_imports=allowed_imports_text(), write_tables=write_tables_text(graph))
    code: ToolCode = ask("code", rendered, parse_code).artifact

    artifact = ToolsArtifact(class_name=class_name, id_field=dataset.id_field, api_docs=docs, toolspecs=specs,
                             code=code, steps=steps)
    return StageResult[ToolsArtifact](
        artifact=artifact, checks=preflight + [c for r in results for c in r.checks], template_id=first.template_id,
        template_hash=first.template_hash, prompt_hash=first.prompt_hash, model=model,
        attempts=sum(r.attempts for r in results), raw_texts=raw_texts)
