"""Stage 'probe_personas': the business context → personas working in that business.

PROBE starts from real LinkedIn profiles (L67-69); a theme has none, so the personas are
derived from the business context's key roles and sub-businesses (``probe/personas``), each
with the paper's persona fields {name, occupation, location, about}. Difficulty is assigned by
code from the theme's ``probe.difficulties`` (cycled), never by the model. Pure.
"""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.checks import CheckResult
from sopforge.context.model import BusinessContext
from sopforge.families.probe.models.world import Persona, PersonaSet, parse_json_block
from sopforge.families.probe.asker import Asker
from sopforge.families.probe.verify.world_checks import check_personas
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "PersonasInputs", "run"]

STAGE = "probe_personas"
TEMPLATE_IDS = ("probe/personas",)


class PersonasInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    context: BusinessContext = Field(description="The shared business context (roles, sub-businesses, systems).")
    difficulties: list[str] = Field(description="Difficulty of each persona, in order (already cycled).")
    as_of: str = Field(description="ISO day every persona's world is written as of (probe.reference_date).")


class _Draft(BaseModel):
    name: str
    occupation: str
    location: str
    about: str
    role: str
    sub_business: str


class _Drafts(BaseModel):
    personas: list[_Draft]


def run(inputs: PersonasInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[PersonaSet]:
    """Ask once for ``len(difficulties)`` personas and assign ids and difficulties."""
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    n = len(inputs.difficulties)

    def parse(raw: str) -> tuple[PersonaSet, list[CheckResult]]:
        drafts = parse_json_block(raw, "personas", _Drafts, key="personas").personas
        personas = [Persona(id=f"p{i}", difficulty=inputs.difficulties[i - 1] if i <= n else "easy",
                            **d.model_dump()) for i, d in enumerate(drafts, 1)]
        return PersonaSet(personas=personas), check_personas(personas, inputs.context, n, date.fromisoformat(inputs.as_of))

    roles = next((s.body for s in inputs.context.sections if s.number == 4), "")
    artifact = asker.ask("main", TEMPLATE_IDS[0], {
        "business_context": inputs.context.to_prompt_text(), "key_roles": roles, "num_personas": str(n),
        "as_of": inputs.as_of,
        "sub_businesses": "\n".join(f"- {s.name}: {s.description}" for s in inputs.context.sub_businesses)}, parse)
    return asker.result(artifact)
