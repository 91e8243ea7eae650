"""Stage 'distractors': distractor tools and data fields, each verified before it is kept (issue 5, items 1-2).

SOP-Bench §3.3.2 makes domains harder with "semantically similar but functionally redundant"
tools and "distractor variables that appear relevant but are not required"; TELLER adds in-domain
and off-domain distractor APIs. Neither checks them. Two asks, each its own ``ask_until_valid``
conversation:

1. ``tools`` (call keys ``{slug}/distractors/tools/aN``, template ``sop_bench/distractor_tools``):
   toolSpecs plus a ``DistractorTools`` mixin, verified by
   :func:`sopforge.families.sop_tools.verify.distractor_tools.verify_distractor_tools`;
2. ``fields`` (``{slug}/distractors/fields/aN``, ``sop_bench/distractor_fields``): new columns
   (a value pool each) and existing fields claimed to be irrelevant, verified by perturbation
   (:func:`sopforge.families.sop_tools.verify.distractor_fields.verify_field_candidates`).

An unreadable answer or code the sandbox refuses is re-asked; a single bad item is dropped with
its reason and counted in the funnel, never re-asked (the other items of the answer are fine).
An ask whose ``n`` is 0 is skipped. Pure: no Prefect, no store.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from sopforge.errors import UserError
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, RenderedPrompt, default_registry
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, check
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset, no_identifier_message
from sopforge.families.sop_tools.models.distractor_code import base_manager_members
from sopforge.families.sop_tools.models.distractors import (
    DistractorField, DistractorSet, DistractorTool, parse_field_answer, parse_tools_answer,
)
from sopforge.funnel import Funnel
from sopforge.families.sop_tools.models.ground_truth import GroundTruth
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.tools import ToolsArtifact
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_keeping_answers, fan_out
from sopforge.families.sop_tools.stages.tools import SAMPLE_ROWS, allowed_imports_text, sample_csv
from sopforge.families.sop_tools.verify.distractor_fields import verify_field_candidates
from sopforge.families.sop_tools.verify.distractor_tools import baseline_problem, verify_distractor_tools
from sopforge.families.sop_tools.verify.ground_truth_bundle import write_bundle
from sopforge.sandbox import SandboxLimits
from sopforge.families.sop_tools.verify.tool_runtime import TOOL_CHECK_LIMITS

__all__ = ["STAGE", "TEMPLATE_IDS", "DistractorsInputs", "run"]

STAGE = "distractors"
TOOLS_TEMPLATE, FIELDS_TEMPLATE = "sop_bench/distractor_tools", "sop_bench/distractor_fields"
TEMPLATE_IDS = (TOOLS_TEMPLATE, FIELDS_TEMPLATE)


class DistractorsInputs(BaseModel):
    """What the distractors stage needs: the accepted, executable domain."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (what is in and out of domain).")
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema (field names new columns must avoid).")
    sop: SOPDocument = Field(description="Accepted SOP (what a look-alike tool must resemble without serving).")
    api_graph: APIGraph = Field(description="Accepted API graph (input columns, reference re-run).")
    tools: ToolsArtifact = Field(description="Accepted tools: toolspecs, tools.py and its Manager class.")
    dataset: Dataset = Field(description="Accepted rows the ground truth was computed from.")
    ground_truth: GroundTruth = Field(description="Accepted ground truth (expected calls, outputs).")
    n_tools: int = Field(5, ge=0, description="Distractor tools to ask for (0 skips the ask).")
    n_fields: int = Field(3, ge=0, description="Distractor fields to ask for (0 skips the ask).")
    seed: int = Field(0, description="Seed of the field value assignment and of the perturbations.")


class _ToolsOutcome(BaseModel):
    tools: list[DistractorTool]
    code: str


class _FieldsOutcome(BaseModel):
    fields: list[DistractorField]


def _kept_check(name: str, noun: str, kept: int, asked: int, total: int) -> CheckResult:
    return check(name, kept >= asked, f"{kept} of {asked} requested distractor {noun} kept ({total - kept} of {total} "
                 f"proposed dropped, reasons in drops)", severity="warning", kept=kept, asked=asked, proposed=total)


def run(inputs: DistractorsInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None,
        limits: SandboxLimits | None = None) -> StageResult[DistractorSet]:
    """Ask for distractor tools and fields, verify every one, and keep only those that change nothing.

    Args:
        inputs: The accepted domain plus how many tools and fields to ask for and the seed.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget per ask, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version; appended to both prompts.
        registry: Prompt registry; defaults to the project's ``prompts/``.
        limits: Sandbox limits of each verification process; defaults to ``TOOL_CHECK_LIMITS``.

    Returns:
        The DistractorSet with every proposal, its fate, the funnel and the drops. ``checks``
        are those of the accepted answers plus ``distractors.tools_kept`` / ``.fields_kept``;
        template identity and ``prompt_hash`` are the first ask's; ``attempts`` and
        ``raw_texts`` cover both asks.

    Raises:
        UserError: The dataset has no id field, or the ground truth does not match the tools and rows.
        ValidationFailed: An ask failed every attempt; ``raw_texts`` holds every answer so far.
    """
    registry = registry or default_registry(settings)
    base, gt, schema = inputs.tools, inputs.ground_truth, inputs.data_schema
    dataset = inputs.dataset.keyed_by(schema)  # a dataset stored by older code may say id_field: null
    if not dataset.id_field:
        raise UserError(no_identifier_message("distractors", schema, "new columns are keyed by it"))
    limits = limits or TOOL_CHECK_LIMITS
    if inputs.n_tools or inputs.n_fields:
        problem = baseline_problem(base, schema, inputs.api_graph, dataset.rows, gt, limits=limits)
        if problem:
            raise UserError(f"distractors: the ground truth does not match the tools and rows ({problem}); "
                            "re-run the reference stage first")
    shared = {"business_context": inputs.context.to_prompt_text(), "sop_file_contents": inputs.sop.to_prompt_text()}
    raw_texts: list[str] = []
    funnel = Funnel()

    def ask(step: str, rendered: RenderedPrompt, parse_and_check) -> tuple[RenderedPrompt, StageResult, list[str]]:
        answers: list[str] = []  # the step's own: the two asks run side by side and merge in order
        result = ask_keeping_answers(answers, llm, rendered, step=step, parse_and_check=parse_and_check,
                                     stage=STAGE, call_key_prefix=f"{inputs.theme_slug}/{STAGE}/{step}",
                                     settings=settings, model=model, temperature=temperature, feedback=feedback)
        return rendered, result, answers

    def ask_tools() -> tuple[RenderedPrompt, StageResult, list[str]]:
        def parse_tools(raw: str) -> tuple[_ToolsOutcome, list[CheckResult]]:
            answer = parse_tools_answer(raw)
            checked, kept_code, checks = verify_distractor_tools(
                answer.tools, answer.code, base=base, schema=schema, graph=inputs.api_graph, rows=dataset.rows,
                ground_truth=gt, limits=limits)
            kept = sum(t.kept for t in checked)
            return (_ToolsOutcome(tools=checked, code=kept_code),
                    checks + [_kept_check("distractors.tools_kept", "tools", kept, inputs.n_tools, len(checked))])

        reserved = sorted(base_manager_members(base.code.source, base.class_name) | {"process_tool_call", "__init__"})
        rendered = registry.render(
            TOOLS_TEMPLATE, **shared, toolspecs=base.toolspecs.to_prompt_text(),
            real_tool_names=", ".join(n for n in base.toolspecs.names if isinstance(n, str)),
            reserved_names=", ".join(reserved), sample_data=sample_csv(dataset), id_field=dataset.id_field,
            n_tools=str(inputs.n_tools), allowed_imports=allowed_imports_text())
        return ask("tools", rendered, parse_tools)

    def ask_fields() -> tuple[RenderedPrompt, StageResult, list[str]]:
        with tempfile.TemporaryDirectory(prefix="sopforge-distractor-fields-") as tmp:
            bundle = write_bundle(Path(tmp) / "bundle", tool_code=base.code.source, toolspecs=base.toolspecs.specs,
                                  procedure_source=gt.procedure.source, rows=dataset.rows, schema=schema)

            def parse_fields(raw: str) -> tuple[_FieldsOutcome, list[CheckResult]]:
                checked = verify_field_candidates(
                    parse_field_answer(raw), bundle_folder=bundle, schema=schema, api_graph=inputs.api_graph,
                    rows=dataset.rows, id_field=dataset.id_field, baseline=gt, seed=inputs.seed, limits=limits)
                kept = sum(f.kept for f in checked)
                return (_FieldsOutcome(fields=checked),
                        [_kept_check("distractors.fields_kept", "fields", kept, inputs.n_fields, len(checked))])

            rendered = registry.render(
                FIELDS_TEMPLATE, **shared, sample_schema=schema.to_prompt_text(),
                decision_fields=", ".join(f.name for f in schema.decisions),
                sample_data=dataset.to_prompt_text(max_rows=SAMPLE_ROWS), n_fields=str(inputs.n_fields))
            return ask("fields", rendered, parse_fields)

    steps = [step for step, n in ((ask_tools, inputs.n_tools), (ask_fields, inputs.n_fields)) if n]
    results = fan_out(lambda step: step(), steps, "ask")
    for _, _, answers in results:
        raw_texts += answers
    tools: list[DistractorTool] = []
    code = ""
    fields: list[DistractorField] = []
    for _, result, _ in results:
        if isinstance(result.artifact, _ToolsOutcome):
            tools, code = result.artifact.tools, result.artifact.code
            for t in tools:
                funnel.item("distractor_tool", t.kind, t.name, verified=t.kept, kept=t.kept,
                            retried=result.attempts > 1, reason=t.reason)
        else:
            fields = result.artifact.fields
            for f in fields:
                funnel.item("distractor_field", f.origin, f.name, verified=f.kept, kept=f.kept,
                            retried=result.attempts > 1, reason="" if f.kept else f.reason)

    artifact = DistractorSet(tools=tools, fields=fields, code=code, seed=inputs.seed, funnel=funnel.rows(),
                             drops=funnel.drops)
    first = results[0][0] if results else _identity(registry, shared, inputs)
    return StageResult[DistractorSet](
        artifact=artifact, checks=[c for _, r, _ in results for c in r.checks], template_id=first.template_id,
        template_hash=first.template_hash, prompt_hash=first.prompt_hash, model=model,
        attempts=sum(r.attempts for _, r, _ in results), raw_texts=raw_texts)


def _identity(registry: PromptRegistry, shared: dict[str, Any], inputs: DistractorsInputs) -> RenderedPrompt:
    """With both counts 0 nothing is asked; the fields prompt still names the template the result stands for."""
    schema = inputs.data_schema
    return registry.render(FIELDS_TEMPLATE, **shared, sample_schema=schema.to_prompt_text(),
                           decision_fields=", ".join(f.name for f in schema.decisions),
                           sample_data=inputs.dataset.to_prompt_text(max_rows=SAMPLE_ROWS), n_fields="0")
