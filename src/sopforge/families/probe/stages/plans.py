"""Stage 'probe_plans': per sample, the expected answer (T7 checklist) and the evidence plan (T8).

The ground-truth action a* is T1's solves_bottleneck label (proven unique by the solver judge),
never an LLM's choice; the checklist prompt is told a* and must fill exactly its required
parameters, which become the expected parameters T25 compares an agent's with. The evidence plan
spreads the bottleneck over ``evidence_documents`` documents of mixed types, each covering a
different aspect, and places every date, identifier and amount of the expected parameters in the
key information of a document, so the evidence carries what an agent must fill in. Pure.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import BottleneckSet, sample_id
from sopforge.families.probe.models.sets import Checklist, EvidencePlan, PlanSet, SamplePlan
from sopforge.families.probe.models.world import WorldSet, parse_json_block
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.verify.judges import actions_text
from sopforge.families.probe.verify.plan_checks import check_checklist, check_plan
from sopforge.families.probe.verify.values import expected_values
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "PlansInputs", "run", "sources_text"]

STAGE = "probe_plans"
TEMPLATE_IDS = ("probe/checklist", "probe/evidence_plan")


class PlansInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    worlds: WorldSet
    bottlenecks: BottleneckSet
    options: ProbeSpec


def sources_text(systems) -> str:
    """T12's systems as the prompts list them, or "- none"."""
    return "\n".join(f"- {x.system}: {x.evidence}" for x in systems) or "- none"


def run(inputs: PlansInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[PlanSet]:
    """A checklist and an evidence plan for every kept bottleneck."""
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    samples = []
    for persona, index in inputs.bottlenecks.samples():
        world = inputs.worlds.of(persona.persona_id)
        bottleneck, solver, sid = persona.bottlenecks[index - 1], persona.solver(index), sample_id(persona.persona_id, index)
        shared = {"world_model": world.to_prompt_text(), "bottleneck": bottleneck.description}
        checklist = asker.ask(f"{sid}-checklist", TEMPLATE_IDS[0], {
            **shared, "difficulty": persona.difficulty, "actions": actions_text(persona.actions),
            "solver_action": actions_text([solver])},
            lambda raw: (c := parse_json_block(raw, "checklist", Checklist), check_checklist(c, solver)))
        n = inputs.options.evidence_documents.of(persona.difficulty)
        values = expected_values(checklist.task_selection_step.parameters)
        systems = persona.sources.get(str(index), [])
        plan = asker.ask(f"{sid}-plan", TEMPLATE_IDS[1], {
            **shared, "other_bottlenecks": numbered(persona.others(index)), "num_documents": str(n),
            "required_values": "\n".join(f"- {v.written} ({v.kind}, parameter {v.parameter})" for v in values)
            or "- none", "sources": sources_text(systems)},
            lambda raw: (p := parse_json_block(raw, "evidence_plan", EvidencePlan),
                         check_plan(p.evidence_distribution, world, n, values, [x.system for x in systems])
                         )).evidence_distribution
        samples.append(SamplePlan(sample_id=sid, persona_id=persona.persona_id, bottleneck_index=index,
                                  checklist=checklist, plan=plan))
    return asker.result(PlanSet(samples=samples))
