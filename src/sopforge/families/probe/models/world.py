"""Personas and their world models (PROBE §2.3, T2-T4): data and the parsers of their answers.

Answer formats (docs/families/probe.md, "Formats"): each answer is one JSON value inside a named
tag: ``<personas>`` (a list), ``<org_structure>``, ``<personal_context>`` and ``<relationships>``
(objects shaped like T2, T3 and T4's JSON, plus the fields our documents need: e-mail addresses
and a short persona id).
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sopforge.parsing import ParseError, describe_validation_error, extract_json, extract_tag

__all__ = [
    "RELATIONSHIP_TYPES", "OrgStructure", "Persona", "PersonaSet", "PersonalContext", "Relationship", "WorldModel",
    "WorldSet", "parse_json_block",
]

M = TypeVar("M", bound=BaseModel)
RELATIONSHIP_TYPES: tuple[str, ...] = ("colleague", "client", "manager", "stakeholder", "collaborator")


def parse_json_block(raw: str, tag: str, model: type[M], *, key: str | None = None) -> M:
    """The JSON inside ``<tag>`` validated as ``model`` (``key`` unwraps ``{"key": [...]}``).

    Raises:
        ParseError: missing tag, invalid JSON or a value the model refuses (one line, re-askable).
    """
    value: Any = extract_json(extract_tag(raw, tag))
    if key is not None and isinstance(value, dict) and key in value:
        value = value[key]
    try:
        return model.model_validate(value if key is None else {key: value})
    except ValidationError as exc:
        raise ParseError(describe_validation_error(exc, f"<{tag}>")) from exc


class Persona(BaseModel):
    """The paper's persona seed {name, occupation, location, about} (L67-69), derived from the context."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Short id assigned by code: p1, p2, ...")
    name: str = Field(min_length=3, description="Full name of the persona.")
    occupation: str = Field(min_length=3, description="Job title inside the business.")
    location: str = Field(min_length=2, description="City (and region) where they work.")
    about: str = Field(min_length=20, description="Professional summary, as on a profile page.")
    role: str = Field(min_length=2, description="The business context's key role this persona holds.")
    sub_business: str = Field(min_length=2, description="The sub-business of the context they mostly work in.")
    difficulty: Literal["easy", "medium", "hard"] = Field(description="Difficulty of this persona's samples.")


class PersonaSet(BaseModel):
    personas: list[Persona] = Field(description="Personas in order; ids p1, p2, ...")


class OrgStructure(BaseModel):
    """T2's JSON (L721-758) plus the e-mail domain every address in the persona's world uses."""

    company_name: str = Field(min_length=2)
    company_type: str = Field(min_length=2)
    department: str = Field(min_length=2)
    team_size: int = Field(ge=1, le=10_000)
    direct_reports: int = Field(ge=0, le=10_000)
    reporting_to: str = Field(min_length=2, description="Title of the persona's manager.")
    key_processes: list[str] = Field(min_length=1)
    typical_meetings: list[str] = Field(min_length=1)
    email_domain: str = Field(pattern=r"^[a-z0-9-]+(\.[a-z0-9-]+)+$", description="e.g. 'harborpharmacy.com'.")


class PersonalContext(BaseModel):
    """T3's JSON (L766-805); ``current_goals`` are the persona's priorities."""

    work_style: str = Field(min_length=5)
    current_goals: list[str] = Field(min_length=1)
    constraints: list[str] = Field(default_factory=list)
    communication_preferences: str = Field(min_length=3)
    tools_used: list[str] = Field(min_length=1)
    peak_productivity_time: str = Field(min_length=2)
    biggest_challenges: list[str] = Field(default_factory=list)


class Relationship(BaseModel):
    """One entry of T4's list (L877-905), with the department and e-mail T25 reads (L2318-2626)."""

    name: str = Field(min_length=3)
    role: str = Field(min_length=2)
    type: Literal["colleague", "client", "manager", "stakeholder", "collaborator"]
    interaction: str = Field(min_length=5)
    status: str = Field(min_length=2)
    frequency: str = Field(min_length=2)
    department: str = Field("", description="Their department, empty for people outside the company.")
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$")


class RelationshipList(BaseModel):
    relationships: list[Relationship] = Field(min_length=1)


class WorldModel(BaseModel):
    """One persona's world: organisation, personal context, relationships (the agent's W)."""

    persona: Persona
    today: str = Field(description="ISO date of 'today' in this world (the theme's probe.reference_date).")
    persona_email: str = Field(description="The persona's own address (first.last@email_domain).")
    org: OrgStructure
    personal: PersonalContext
    relationships: list[Relationship]

    def people(self) -> list[str]:
        """The persona and every relationship's full name."""
        return [self.persona.name] + [r.name for r in self.relationships]

    def relationship(self, name: str) -> Relationship | None:
        wanted = " ".join(name.lower().split())
        return next((r for r in self.relationships if r.name.lower() == wanted), None)

    def to_prompt_text(self, *, relationships: int | None = None) -> str:
        """The world model as the prompts show it (shared prefix of every per-persona call)."""
        o, p, c = self.org, self.persona, self.personal
        rels = self.relationships if relationships is None else self.relationships[:relationships]
        lines = [
            f"As of: {self.today} (today). Everything dated before it has happened; everything after it is "
            "planned, scheduled or expected, and is written so.",
            f"Persona: {p.name} ({p.occupation}), {p.location}; e-mail {self.persona_email}",
            f"About: {p.about}",
            f"Company: {o.company_name} ({o.company_type}); department: {o.department}; team size {o.team_size}; "
            f"{o.direct_reports} direct reports; reports to: {o.reporting_to}",
            f"Key processes: {'; '.join(o.key_processes)}",
            f"Typical meetings: {'; '.join(o.typical_meetings)}",
            f"Work style: {c.work_style}",
            f"Current goals (priorities): {'; '.join(c.current_goals)}",
            f"Constraints: {'; '.join(c.constraints) or 'none stated'}",
            f"Communication preferences: {c.communication_preferences}",
            f"Tools used: {', '.join(c.tools_used)}",
            f"Peak productivity time: {c.peak_productivity_time}",
            f"Biggest challenges: {'; '.join(c.biggest_challenges) or 'none stated'}",
            "Relationships:",
            *(f"- {r.name}, {r.role} ({r.type}; {r.department or 'external'}; {r.email}): {r.interaction} "
              f"Status: {r.status}. Frequency: {r.frequency}." for r in rels),
        ]
        return "\n".join(lines)


class WorldSet(BaseModel):
    """The probe_world artifact: one world model per persona."""

    worlds: list[WorldModel] = Field(description="One per persona, in persona order.")

    def of(self, persona_id: str) -> WorldModel:
        return next(w for w in self.worlds if w.persona.id == persona_id)


def email_of(name: str, domain: str) -> str:
    """first.last@domain for a full name (letters only, lower case)."""
    parts = [re.sub(r"[^a-z]", "", part.lower()) for part in name.split()]
    parts = [p for p in parts if p]
    return f"{parts[0]}.{parts[-1]}@{domain}" if len(parts) > 1 else f"{parts[0]}@{domain}"
