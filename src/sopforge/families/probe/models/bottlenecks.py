"""Bottlenecks (T6, L1029-1108) and the action space (T1, L515-713) of each persona.

The probe_bottlenecks artifact holds, per persona, the bottlenecks, the actions with their
parameter schemas, and which action solves which bottleneck (``solves_bottleneck``, 1-based as in
T1; ground truth, never shown to an agent), plus the solver judge's verdicts and the funnel.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from sopforge.families.probe.models.verdicts import PersonaAdversaryAnswer
from sopforge.funnel import DroppedItem, FunnelRow

__all__ = ["ACTION_TYPES", "BOTTLENECK_TYPES", "URGENCIES", "Action", "ActionList", "Bottleneck", "BottleneckList",
           "BottleneckSet", "PersonaBottlenecks", "SolverVerdict", "SourceList", "SourceSystem"]

BOTTLENECK_TYPES: tuple[str, ...] = ("delay", "missing_info", "conflict", "approval", "resource", "coordination")
URGENCIES: tuple[str, ...] = ("high", "medium", "low")
# T1's twenty action categories (L542-561).
ACTION_TYPES: tuple[str, ...] = (
    "send_email", "reply_email", "schedule_meeting", "reschedule_meeting", "cancel_meeting", "create_task",
    "delegate_task", "update_task_status", "create_document", "update_document", "share_document",
    "send_slack_message", "make_phone_call", "request_access", "provide_feedback", "request_approval",
    "escalate_to_manager", "create_meeting_agenda", "conduct_review", "update_project_plan",
)


class Bottleneck(BaseModel):
    """One entry of T6's list."""

    description: str = Field(min_length=40, description="2-3 specific sentences: real names, artifacts, a deadline.")
    primary_person: str = Field(min_length=3, description="Main person involved (a relationship's full name).")
    urgency: Literal["high", "medium", "low"]
    type: Literal["delay", "missing_info", "conflict", "approval", "resource", "coordination"]


class BottleneckList(BaseModel):
    bottlenecks: list[Bottleneck] = Field(min_length=1)


class ParamsSchema(BaseModel):
    required: list[str] = Field(min_length=1, description="Required parameter names (snake_case).")

    @field_validator("required")
    @classmethod
    def _snake_case(cls, value: list[str]) -> list[str]:
        import re

        bad = [v for v in value if not re.fullmatch(r"[a-z][a-z0-9_]*", v)]
        if bad:
            raise ValueError(f"parameter names must be snake_case: {bad}")
        return value


class Action(BaseModel):
    """One entry of T1's ``actions`` list."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Unique snake_case identifier.")
    type: str = Field(description="One of T1's twenty action categories.")
    description: str = Field(min_length=10)
    constraints: list[str] = Field(default_factory=list)
    params_schema: ParamsSchema
    solves_bottleneck: int | None = Field(None, ge=1, description="1-based bottleneck index it solves, else null.")

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in ACTION_TYPES:
            raise ValueError(f"unknown action type {value!r}: use one of T1's categories ({', '.join(ACTION_TYPES)})")
        return value

    def text(self) -> str:
        """Everything an agent reads of the action (checked for bottleneck keywords)."""
        return " ".join([self.id.replace("_", " "), self.description, *self.constraints,
                         *(p.replace("_", " ") for p in self.params_schema.required)])

    def for_agent(self) -> dict:
        """The action as an agent sees it: no ``solves_bottleneck``."""
        return self.model_dump(mode="json", exclude={"solves_bottleneck"})


class ActionList(BaseModel):
    actions: list[Action] = Field(min_length=2)


class SourceSystem(BaseModel):
    """One entry of T12's answer: a system where evidence of a bottleneck would live."""

    system: str = Field(min_length=2, description="The system or platform, by name.")
    evidence: str = Field(min_length=3, description="What evidence would be found there.")
    access: str = Field("", description="How someone would search or access it.")
    relevance: str = Field("", description="Why it is relevant to this bottleneck.")


class SourceList(BaseModel):
    sources: list[SourceSystem] = Field(min_length=1)


class SolverVerdict(BaseModel):
    """The solver judge's answer for one bottleneck (ours; the paper trusts T1's own label)."""

    resolving_action: str = Field(description="The one action id the judge says resolves the bottleneck.")
    also_resolving: list[str] = Field(default_factory=list, description="Other action ids that would also resolve it.")
    reason: str = Field("", description="One or two sentences.")


class PersonaBottlenecks(BaseModel):
    """One persona's bottlenecks and action space, with the verdicts that proved each solver unique."""

    persona_id: str
    difficulty: str
    bottlenecks: list[Bottleneck] = Field(description="T6's list, in order (index = position + 1).")
    actions: list[Action]
    verdicts: dict[str, SolverVerdict] = Field(default_factory=dict,
                                               description="Bottleneck index (as text) -> the solver judge's verdict.")
    kept: list[int] = Field(default_factory=list, description="1-based indices of bottlenecks that become samples.")
    sources: dict[str, list[SourceSystem]] = Field(
        default_factory=dict, description="Bottleneck index (as text) -> T12's systems where its evidence would live.")
    persona_adversary: PersonaAdversaryAnswer | None = Field(
        None, description="The persona-only adversary's guess on the final action space (world model and actions only).")

    def solver(self, index: int) -> Action:
        return next(a for a in self.actions if a.solves_bottleneck == index)

    def others(self, index: int) -> list[str]:
        """Descriptions of the persona's other bottlenecks (the 'to avoid' lists of T8-T11, T13)."""
        return [b.description for i, b in enumerate(self.bottlenecks, 1) if i != index]


class BottleneckSet(BaseModel):
    """The probe_bottlenecks artifact."""

    personas: list[PersonaBottlenecks]
    funnel: list[FunnelRow] = Field(default_factory=list)
    drops: list[DroppedItem] = Field(default_factory=list)

    def of(self, persona_id: str) -> PersonaBottlenecks:
        return next(p for p in self.personas if p.persona_id == persona_id)

    def samples(self) -> list[tuple[PersonaBottlenecks, int]]:
        """(persona, bottleneck index) of every kept bottleneck: one sample each."""
        return [(p, i) for p in self.personas for i in p.kept]


def sample_id(persona_id: str, index: int) -> str:
    """The id of the sample built for bottleneck ``index`` of ``persona_id``, e.g. ``p1-b2``."""
    return f"{persona_id}-b{index}"
