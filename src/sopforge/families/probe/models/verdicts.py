"""Judges' answers: the f(d) predicate (ours, L34-38), T13's review, T24/T25's verdicts, the adversary.

Every judge answers one JSON object inside ``<verdict>`` (docs/families/probe.md, "Formats").
The scores of T24 and T25 are computed here from the verdict, deterministically, the way the
paper's metrics define them (L134-146): a judge names details, code turns them into numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AdversaryAnswer", "PersonaAdversaryAnswer", "ConveysVerdict", "EvidenceReview", "IdentificationVerdict", "JudgedAnswer",
           "ParameterVerdict", "IDENTIFICATION_SCORES", "PARAMETER_SCORES"]

IDENTIFICATION_SCORES = {"CORRECT": 1.0, "PARTIALLY_CORRECT": 0.5, "INCORRECT": 0.0}
PARAMETER_SCORES = {"CORRECT": 1.0, "PARTIALLY_CORRECT": 0.5, "INCORRECT": 0.0}
Essential = Literal["correct", "incorrect", "missing"]
NonEssential = Literal["correct", "incorrect", "missing", "n/a"]


class ConveysVerdict(BaseModel):
    """Which of a persona's bottlenecks a document carries evidence of (the paper's f(d), asked blind)."""

    evidence_of: list[int] = Field(description="1-based numbers of the bottlenecks the document gives evidence "
                                               "of; empty when none.")
    reason: str = Field("", description="One or two sentences quoting what decided it.")


class EvidenceReview(BaseModel):
    """T13's review (L1619-1671) of one true positive."""

    quality_score: int = Field(ge=1, le=10)
    strengths: list[str] = Field(default_factory=list)
    issues: list[str] = Field(default_factory=list)
    improvements: list[str] = Field(default_factory=list)
    search_queries: list[str] = Field(default_factory=list)
    mentions_other_bottlenecks: bool = Field(description="T13 criterion 3 as a yes/no: does it touch another "
                                                         "bottleneck of the persona?")


class EssentialDetails(BaseModel):
    model_config = ConfigDict(extra="forbid")

    who_blocked: Essential
    who_blocker: Essential
    what_task: Essential
    why_root_cause: Essential


class NonEssentialDetails(BaseModel):
    model_config = ConfigDict(extra="forbid")

    when_deadline: NonEssential
    where_system: NonEssential
    how_mechanism: NonEssential
    impact_scope: NonEssential


class IdentificationVerdict(BaseModel):
    """T24's answer (L2153-2308)."""

    judgment: Literal["CORRECT", "PARTIALLY_CORRECT", "INCORRECT"]
    essential_details_analysis: EssentialDetails
    non_essential_details_analysis: NonEssentialDetails
    reasoning: str = ""

    def score(self) -> float:
        """The paper's rubric (L134-136) from the details: 0 if an essential detail is not correct, 1 if every
        detail is correct (n/a counts as correct, as in the companion code), else 0.5. The judge's own
        ``judgment`` label is kept but does not decide: the details do."""
        if any(v != "correct" for v in self.essential_details_analysis.model_dump().values()):
            return 0.0
        if all(v in ("correct", "n/a") for v in self.non_essential_details_analysis.model_dump().values()):
            return 1.0
        return 0.5


class ParameterAnalysis(BaseModel):
    critical_parameters_met: bool
    would_resolve_bottleneck: Literal["yes", "partially", "no"]
    missing_parameters: list[str] = Field(default_factory=list)
    incorrect_parameters: list[str] = Field(default_factory=list)
    semantic_matches: list[str] = Field(default_factory=list)


class ParameterVerdict(BaseModel):
    """T25's answer (L2318-2626)."""

    judgment: Literal["CORRECT", "PARTIALLY_CORRECT", "INCORRECT"]
    reasoning: str = ""
    parameter_analysis: ParameterAnalysis
    confidence: float = Field(ge=0, le=1)

    def score(self) -> float:
        return PARAMETER_SCORES[self.judgment]


class AdversaryAnswer(BaseModel):
    """The shortcut adversary's guess from surface artifacts only (ours; paper L100, L112)."""

    documents: list[str] = Field(description="Document ids it believes are the evidence.")
    action: str = Field(description="The action id it believes resolves the hidden bottleneck.")
    reasoning: str = Field("", description="Which surface pattern it used.")


class PersonaAdversaryAnswer(BaseModel):
    """The persona-only adversary's guess from the world model and actions alone (ours; paper L100, L112)."""

    action: str = Field(description="The action id it believes resolves the hidden bottleneck.")
    reasoning: str = Field("", description="Which pattern it used.")


class JudgedAnswer(BaseModel):
    """A scorer's verdict stored with the judge's raw text (what agent evaluation records)."""

    score: float = Field(ge=0, le=1)
    verdict: dict = Field(description="The parsed verdict.")
    raw_text: str = Field(description="The judge's raw answer.")
    template_id: str
    model: str
