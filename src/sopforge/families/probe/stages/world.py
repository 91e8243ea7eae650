"""Stage 'probe_world': one world model per persona (T2 organisation, T3 personal context, T4 relationships).

Three asks per persona (``probe/org_structure``, ``probe/personal_context``, ``probe/relationships``),
each with the business context and the persona first, so a provider caches the shared prefix.
The organisation is the business of the context (the paper invents one per profile), and
relationships get e-mail addresses on the organisation's domain because every later document
addresses them. Pure.
"""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.checks import CheckResult
from sopforge.context.model import BusinessContext
from sopforge.families.probe.models.world import (
    OrgStructure, Persona, PersonalContext, PersonaSet, RelationshipList, WorldModel, WorldSet, email_of,
    parse_json_block,
)
from sopforge.families.probe.asker import Asker
from sopforge.families.probe.verify.world_checks import (
    RELATIONSHIP_BANDS, check_org, check_personal, check_relationships,
)
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "WorldInputs", "run", "persona_text"]

STAGE = "probe_world"
TEMPLATE_IDS = ("probe/org_structure", "probe/personal_context", "probe/relationships")


class WorldInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    context: BusinessContext = Field(description="The shared business context: the persona's organisation.")
    personas: PersonaSet = Field(description="The accepted personas.")
    today: str = Field(description="ISO reference date of every world (probe.reference_date).")


def persona_text(p: Persona) -> str:
    return f"Name: {p.name}\nOccupation: {p.occupation}\nLocation: {p.location}\nAbout: {p.about}\n" \
           f"Role in the business: {p.role} (sub-business: {p.sub_business})"


def run(inputs: WorldInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[WorldSet]:
    """Build every persona's world model; a world that never passes its checks fails the stage."""
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    context = inputs.context.to_prompt_text()
    as_of = date.fromisoformat(inputs.today)
    worlds = []
    for p in inputs.personas.personas:
        shared = {"business_context": context, "persona": persona_text(p), "as_of": inputs.today}
        org = asker.ask(f"{p.id}-org", TEMPLATE_IDS[0], shared,
                        lambda raw: (o := parse_json_block(raw, "org_structure", OrgStructure), check_org(o, as_of)))
        personal = asker.ask(f"{p.id}-personal", TEMPLATE_IDS[1], {**shared, "difficulty": p.difficulty},
                             lambda raw: (c := parse_json_block(raw, "personal_context", PersonalContext),
                                          check_personal(c, as_of)))
        low, high = RELATIONSHIP_BANDS[p.difficulty]

        def parse_relationships(raw: str, p: Persona = p, org: OrgStructure = org) -> tuple[RelationshipList, list[CheckResult]]:
            rels = parse_json_block(raw, "relationships", RelationshipList, key="relationships")
            return rels, check_relationships(rels.relationships, p, org.email_domain, as_of)

        rels = asker.ask(f"{p.id}-relationships", TEMPLATE_IDS[2], {
            **shared, "difficulty": p.difficulty, "organization": _org_text(org),
            "relationship_range": f"{low}-{high}"}, parse_relationships)
        worlds.append(WorldModel(persona=p, today=inputs.today, persona_email=email_of(p.name, org.email_domain), org=org,
                                 personal=personal, relationships=rels.relationships))
    return asker.result(WorldSet(worlds=worlds))


def _org_text(org: OrgStructure) -> str:
    return (f"Company: {org.company_name} ({org.company_type}); department: {org.department}; team size "
            f"{org.team_size}; reports to: {org.reporting_to}; e-mail domain: {org.email_domain}")
