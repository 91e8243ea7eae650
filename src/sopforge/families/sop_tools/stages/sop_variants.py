"""SOP variants (issue 5 item 3): harder agent-facing SOPs, each verified to keep the ground truth.

Part of the ``manipulations`` stage. Pure: no Prefect, no store. For each requested type
(SOP-Bench §3.3.2 complexity injection, TELLER S10 SOP abstraction) a bounded number of
generation cycles runs:

1. the generator template answers with an edit script that code applies to the base SOP
   (an unreadable script, or a ``find`` missing, repeated or overlapping, is re-asked inside
   :func:`~sopforge.ask.ask_until_valid`);
2. the structural checks of :mod:`sopforge.families.sop_tools.verify.sop_variant_checks` run;
3. if they pass, the LLM judge (``sop_bench/variant_judge``) says whether every decision is still
   determinable with the same result.

A cycle that fails at 2 or 3 starts the next one with the reasons appended to the prompt; after
the last cycle the type is dropped. A generator or judge that never answers readably drops the
type at once (never kept on a guess, and the stage goes on). Each type is counted once in the
funnel.

Agents are given the variant; ground truth still comes from the base SOP's reference procedure.
That is why every check here is about *keeping* the ground truth determinable rather than
recomputing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import AliasChoices, BaseModel, Field, field_validator

from sopforge.errors import ValidationFailed
from sopforge.llm.types import LLMClient
from sopforge.parsing import one_line
from sopforge.prompts import PromptRegistry, RenderedPrompt
from sopforge.checks import CheckResult, blocking_failures, check
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.funnel import Funnel
from sopforge.families.sop_tools.models.ground_truth import GroundTruth
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.sop_variants import (
    JudgeVerdict,
    SOPEdit,
    SOPVariant,
    apply_edits,
    parse_edits,
    parse_summary,
    parse_verdict,
    unified_diff,
)
from sopforge.settings import Settings
from sopforge.ask import ask_keeping_answers, fan_out
from sopforge.families.sop_tools.options import SOP_BENCH_VARIANTS, TELLER_VARIANTS, known_variant_types
from sopforge.families.sop_tools.verify.sop_variant_checks import check_variant, numbers_in, threshold_stated_in

__all__ = ["STAGE", "COMPONENT", "TEMPLATE_IDS", "CYCLE_FEEDBACK_LEAD", "VariantInputs", "VariantsResult", "paper_of",
           "make_variants"]

STAGE = "manipulations"
COMPONENT = "sop_variant"
TEMPLATE_IDS = ("sop_bench/complexity_injection", "teller/sop_abstraction", "sop_bench/variant_judge")
GENERATOR_TEMPLATES = {"sop_bench": TEMPLATE_IDS[0], "teller": TEMPLATE_IDS[1]}
JUDGE_TEMPLATE = TEMPLATE_IDS[2]
CYCLE_FEEDBACK_LEAD = ("Your previous variant of this type was rejected; "
                       "write a new edit script that avoids these problems:")


class VariantInputs(BaseModel):
    """What the SOP-variant step needs: the accepted chain artifacts and the requested types."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (given to agents with the variant).")
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema (decision fields and labels).")
    sop: SOPDocument = Field(description="The base SOP; ground truth was computed from it.")
    tool_names: list[str] = Field(description="Names of the real tools; ambiguous_expressions must not name them.")
    ground_truth: GroundTruth = Field(description="Computed ground truth (its decision and intermediate columns).")
    variant_types: list[str] = Field(description="Variant types to generate, from options.VARIANT_TYPES.")
    max_retries: int = Field(2, ge=0, description="Extra generation cycles for a type whose variant is rejected.")

    @field_validator("variant_types")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return known_variant_types(value)


@dataclass
class VariantsResult:
    """Kept variants, stage-level checks and every raw model answer."""

    variants: list[SOPVariant]
    checks: list[CheckResult]
    raw_texts: list[str] = field(default_factory=list)
    attempts: int = 0


def paper_of(variant_type: str) -> str:
    """``"sop_bench"`` or ``"teller"``: whose technique the type is."""
    if variant_type in SOP_BENCH_VARIANTS:
        return "sop_bench"
    if variant_type in TELLER_VARIANTS:
        return "teller"
    raise ValueError(f"unknown SOP variant type {variant_type!r}")


# --- prompt parameters ------------------------------------------------------------------------

def _decision_lines(inputs: VariantInputs) -> str:
    lines = []
    for name in inputs.ground_truth.output_columns:
        spec = inputs.data_schema.field(name)
        lines.append(f"`{name}`: one of " + ", ".join(f'"{label}"' for label in spec.labels()))
    return "\n".join(lines) or "none"


def _output_fields(inputs: VariantInputs) -> list[str]:
    gt = inputs.ground_truth
    return list(dict.fromkeys(gt.output_columns + gt.intermediate_columns))


def _intermediate_lines(inputs: VariantInputs) -> str:
    lines = []
    for name in inputs.ground_truth.intermediate_columns:
        spec = inputs.data_schema.field(name)
        values = f" [{' | '.join(spec.labels())}]" if spec.labels() else ""
        lines.append(f"`{name}` ({spec.type}{values}): {spec.description}")
    return "\n".join(lines) or "none"


def _threshold_lines(inputs: VariantInputs, *, mark_context: bool) -> str:
    context_numbers = numbers_in(inputs.context.to_prompt_text())
    lines = []
    for t in inputs.sop.thresholds:
        line = f"step {t.step}: {t.text}"
        if mark_context:
            line += (" (the business context states this number)" if threshold_stated_in(t, context_numbers)
                     else " (not in the business context: the number must stay in the SOP)")
        lines.append(line)
    return "\n".join(lines) or "none"


def _render_generator(inputs: VariantInputs, variant_type: str, registry: PromptRegistry) -> RenderedPrompt:
    paper = paper_of(variant_type)
    params = {
        "business_context": inputs.context.to_prompt_text(),
        "sop_text": inputs.sop.text,
        "variant_type": variant_type,
        "decision_fields": _decision_lines(inputs),
        "output_fields": "\n".join(f"`{name}`" for name in _output_fields(inputs)),
        "thresholds": _threshold_lines(inputs, mark_context=True),
    }
    if paper == "teller":
        params["tool_names"] = ", ".join(inputs.tool_names) or "none"
    return registry.render(GENERATOR_TEMPLATES[paper], **params)


def _with_cycle_feedback(rendered: RenderedPrompt, reasons: list[str]) -> RenderedPrompt:
    # Same shape as stages.base.with_feedback: a final paragraph after the rendered prompt. The
    # prompt hash stays the rendered one (it identifies the template and inputs, not the re-asks).
    if not reasons:
        return rendered
    listed = "\n".join(f"- {r}" for r in reasons)
    return rendered.model_copy(update={"text": f"{rendered.text.rstrip()}\n\n{CYCLE_FEEDBACK_LEAD}\n{listed}\n"})


# --- one type ---------------------------------------------------------------------------------

class _Candidate(BaseModel):
    """A parsed and applied edit script, before the structural checks."""

    edits: list[SOPEdit]
    text: str
    summary: str


@dataclass
class _Outcome:
    variant: SOPVariant | None
    cycles: int
    reason: str
    raw_texts: list[str]


def _make_one(inputs: VariantInputs, variant_type: str, *, llm: LLMClient, settings: Settings, model: str,
              temperature: float, judge_temperature: float, registry: PromptRegistry,
              feedback: str | None) -> _Outcome:
    slug, base = inputs.theme_slug, inputs.sop
    context_text = inputs.context.to_prompt_text()
    rendered = _render_generator(inputs, variant_type, registry)
    raw_texts: list[str] = []
    reasons: list[str] = []
    cycles = 1 + inputs.max_retries

    def parse_candidate(raw: str) -> tuple[_Candidate, list[CheckResult]]:
        edits = parse_edits(raw)
        return _Candidate(edits=edits, text=apply_edits(base.text, edits), summary=parse_summary(raw)), []

    for cycle in range(1, cycles + 1):
        try:
            generated = ask_keeping_answers(
                raw_texts, llm, _with_cycle_feedback(rendered, reasons), parse_and_check=parse_candidate, stage=STAGE,
                call_key_prefix=f"{slug}/{STAGE}/variant_{variant_type}_c{cycle}", settings=settings,
                model=model, temperature=temperature, feedback=feedback)
        except ValidationFailed as exc:
            return _Outcome(None, cycle, f"generator reply unparsable: {one_line(str(exc), 200)}", raw_texts)
        candidate: _Candidate = generated.artifact  # type: ignore[assignment]

        checks = check_variant(variant_type, base, candidate.text, schema=inputs.data_schema,
                               output_fields=_output_fields(inputs), tool_names=inputs.tool_names,
                               context_text=context_text)
        failed = blocking_failures(checks)
        if failed:
            reasons = [f"{c.name}: {c.message}" for c in failed]
            continue

        diff = unified_diff(base.text, candidate.text, variant_type)
        judge_prompt = registry.render(
            JUDGE_TEMPLATE, business_context=context_text, base_sop=base.text, variant_sop=candidate.text,
            diff=diff, variant_type=variant_type, variant_summary=candidate.summary or "(no summary given)",
            decisions=_decision_lines(inputs), intermediate_fields=_intermediate_lines(inputs),
            thresholds=_threshold_lines(inputs, mark_context=False))
        try:
            judged = ask_keeping_answers(
                raw_texts, llm, judge_prompt, parse_and_check=lambda raw: (parse_verdict(raw), []), stage=STAGE,
                call_key_prefix=f"{slug}/{STAGE}/judge_{variant_type}_c{cycle}", settings=settings,
                model=model, temperature=judge_temperature)
        except ValidationFailed:
            return _Outcome(None, cycle, "judge reply unparsable", raw_texts)
        verdict: JudgeVerdict = judged.artifact  # type: ignore[assignment]
        if not verdict.keeps_ground_truth:
            lost = ", ".join(verdict.undeterminable) or "none listed"
            reasons = [f"variant.judge: the verifier found the variant changes the ground truth "
                       f"(undeterminable: {lost}): {one_line(verdict.reason, 300)}"]
            continue
        variant = SOPVariant(variant_type=variant_type, paper=paper_of(variant_type), text=candidate.text,
                             diff=diff, edits=candidate.edits, summary=candidate.summary, verdict=verdict,
                             cycles=cycle, checks=checks)
        return _Outcome(variant, cycle, "", raw_texts)
    return _Outcome(None, cycles, f"rejected in all {cycles} cycles; last: {'; '.join(reasons)}", raw_texts)


# --- the step -----------------------------------------------------------------------------------

def make_variants(inputs: VariantInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
                  registry: PromptRegistry, funnel: Funnel, feedback: str | None = None,
                  judge_temperature: float = 0.0) -> VariantsResult:
    """Generate, check and judge one SOP variant per requested type.

    Args:
        inputs: Base SOP with the context, schema, tool names and ground truth it was verified against.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (``max_attempts`` bounds re-asks of one unreadable answer).
        model: Model asked for variants and verdicts.
        temperature: Sampling temperature of the generator.
        registry: Prompt registry holding :data:`TEMPLATE_IDS`.
        funnel: Receives one item per requested type (component ``sop_variant``).
        feedback: Reviewer feedback on a rejected previous version, appended to every generator prompt.
        judge_temperature: Sampling temperature of the judge (deterministic by default).

    Returns:
        The kept variants in the requested order, the stage-level checks (``variants.kept`` warns
        when a type was dropped), every raw answer and the number of model calls.

    Raises:
        ProviderError, ResponsePending: From ``llm``, unchanged.
    """
    variants: list[SOPVariant] = []
    raw_texts: list[str] = []
    dropped: dict[str, str] = {}
    outcomes = fan_out(lambda variant_type: _make_one(
        inputs, variant_type, llm=llm, settings=settings, model=model, temperature=temperature,
        judge_temperature=judge_temperature, registry=registry, feedback=feedback), inputs.variant_types, "variant")
    for variant_type, outcome in zip(inputs.variant_types, outcomes):
        raw_texts += outcome.raw_texts
        kept = outcome.variant is not None
        funnel.item(COMPONENT, variant_type, variant_type, verified=kept, kept=kept, retried=outcome.cycles > 1,
                    reason=outcome.reason)
        if outcome.variant is not None:
            variants.append(outcome.variant)
        else:
            dropped[variant_type] = outcome.reason
    message = f"{len(variants)} of {len(inputs.variant_types)} SOP variant types kept"
    if dropped:
        message += "; dropped: " + ", ".join(f"{t} ({one_line(r, 120)})" for t, r in dropped.items())
    checks = [check("variants.kept", not dropped, message, severity="warning",
                    kept=[v.variant_type for v in variants], dropped=dropped)]
    return VariantsResult(variants=variants, checks=checks, raw_texts=raw_texts, attempts=len(raw_texts))
