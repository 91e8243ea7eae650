"""Stage 'manipulations': SOP variants and a compliance set, each verified (issue 5 items 3-5).

Two independent parts share one funnel:

1. SOP variants (SOP-Bench §3.3.2 complexity injection, TELLER S10 SOP abstraction), each checked
   structurally and by an LLM judge, retried a bounded number of times, then dropped and counted
   (:mod:`sopforge.families.sop_tools.stages.sop_variants`);
2. the TOD-ProcBench chain: the f1 instruction document (f2/f3 by code), dialogues for sampled
   tasks, the three manipulation operators, minimal violating rewrites and the entailment
   verifier (:mod:`sopforge.families.sop_tools.stages.compliance`).

A variant or pair that fails is dropped, not fatal; only an instruction document that never
parses fails the stage. Pure: no Prefect, no store.
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field

from sopforge.llm.types import LLMClient, sha256_json
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.funnel import Funnel
from sopforge.families.sop_tools.models.ground_truth import GroundTruth
from sopforge.families.sop_tools.models.manipulations import ManipulationSet
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.tools import ToolsArtifact
from sopforge.settings import Settings
from sopforge.families.sop_tools.stages import compliance, sop_variants
from sopforge.ask import StageResult, fan_out
from sopforge.families.sop_tools.options import HardeningSpec

__all__ = ["STAGE", "TEMPLATE_IDS", "ManipulationsInputs", "run"]

STAGE = "manipulations"
TEMPLATE_IDS = sop_variants.TEMPLATE_IDS + compliance.TEMPLATE_IDS


class ManipulationsInputs(BaseModel):
    """What the manipulations stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (thresholds an implicit SOP relies on).")
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema (decision fields and labels).")
    sop: SOPDocument = Field(description="The base SOP every variant and instruction document derives from.")
    tools: ToolsArtifact = Field(description="Accepted tools (their names must vanish from ambiguous variants).")
    ground_truth: GroundTruth = Field(description="Computed ground truth (decisions, tasks to build dialogues for).")
    hardening: HardeningSpec = Field(description="Variant types, dialogue count, retry budget and seed.")


def run(inputs: ManipulationsInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None,
        **_: object) -> StageResult[ManipulationSet]:
    """Generate and verify the SOP variants and the compliance set.

    Returns:
        The ManipulationSet with its funnel; ``checks`` are both parts' stage-level checks
        (warnings name what was dropped).

    Raises:
        ValidationFailed: The instruction document could not be parsed within the attempt budget.
    """
    registry = registry or default_registry(settings)
    spec, funnel = inputs.hardening, Funnel()
    common = {"llm": llm, "settings": settings, "model": model, "temperature": temperature, "registry": registry,
              "feedback": feedback}
    variant_funnel, compliance_funnel = Funnel(), Funnel()  # the two parts run side by side

    def make_variants() -> sop_variants.VariantsResult:
        return sop_variants.make_variants(sop_variants.VariantInputs(
            theme_slug=inputs.theme_slug, context=inputs.context, data_schema=inputs.data_schema, sop=inputs.sop,
            tool_names=[str(n) for n in inputs.tools.toolspecs.names], ground_truth=inputs.ground_truth,
            variant_types=spec.sop_variants, max_retries=spec.max_retries), funnel=variant_funnel, **common)

    def make_compliance() -> compliance.ComplianceResult:
        return compliance.make_compliance(compliance.ComplianceInputs(
            theme_slug=inputs.theme_slug, context=inputs.context, data_schema=inputs.data_schema, sop=inputs.sop,
            ground_truth=inputs.ground_truth, n_dialogues=spec.dialogues, max_retries=spec.max_retries,
            seed=spec.seed), funnel=compliance_funnel, **common)

    variants, pairs = fan_out(lambda part: part(), [make_variants, make_compliance], "part")
    funnel.extend(variant_funnel)
    funnel.extend(compliance_funnel)
    artifact = ManipulationSet(seed=spec.seed, variants=variants.variants, instructions=pairs.document,
                               dialogues=pairs.dialogues, compliance=pairs.items, funnel=funnel.rows(),
                               drops=funnel.drops)
    template_hashes = {tid: registry.get(tid).sha256 for tid in TEMPLATE_IDS}
    return StageResult[ManipulationSet](
        artifact=artifact, checks=variants.checks + pairs.checks, template_id=TEMPLATE_IDS[0],
        template_hash=sha256_json(template_hashes), prompt_hash=sha256_json(template_hashes), model=model,
        attempts=variants.attempts + pairs.attempts, raw_texts=variants.raw_texts + pairs.raw_texts)
