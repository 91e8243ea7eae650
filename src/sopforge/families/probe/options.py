"""The probe section of a theme file: ``probe:`` (sizes, verification thresholds and seed).

Defaults are much cheaper than the paper's set (Table 1, seeds/004 L102-108: about 79 documents
and 108k tokens per sample, 24-27 actions). Every document here is generated *and* judged (the
paper judges none), so each document costs two to three calls; 16 documents and 12,000 tokens per
datastore keep a sample under about 40 calls while leaving room for evidence spread over several
documents and a distractor pool ten times larger than the evidence. Raise them for a release.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from sopforge.theme import ThemeSpec

__all__ = ["DIFFICULTIES", "HARD_NEGATIVE_KINDS", "OPTIONS_KEY", "Difficulty", "ProbeSpec", "probe_options"]

OPTIONS_KEY = "probe"
Difficulty = Literal["easy", "medium", "hard"]
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
# T19-T23 (seeds/004 L2015-2145): entity swap (T20), time shift (T21), template clone (T22) and
# counterfactual (T19 email, T23 any kind).
HARD_NEGATIVE_KINDS: tuple[str, ...] = ("entity_swap", "time_shift", "template_clone", "counterfactual")


class PerDifficulty(BaseModel):
    """One count per difficulty level."""

    model_config = ConfigDict(extra="forbid")

    easy: int = Field(ge=1, le=30)
    medium: int = Field(ge=1, le=30)
    hard: int = Field(ge=1, le=30)

    def of(self, difficulty: str) -> int:
        return int(getattr(self, difficulty))


class ProbeSpec(BaseModel):
    """How big the PROBE set is and how strictly it is verified."""

    model_config = ConfigDict(extra="forbid")

    personas: int = Field(2, ge=1, le=50, description="Personas derived from the business context's roles.")
    difficulties: list[Difficulty] = Field(default_factory=lambda: ["easy", "hard"], min_length=1,
                                           description="Difficulty of each persona, cycled over the personas; "
                                                       "every sample inherits its persona's difficulty.")
    bottlenecks: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=1, medium=2, hard=2),
                                       description="Bottlenecks (= samples) per persona, by difficulty.")
    actions: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=6, medium=8, hard=10),
                                   description="Actions per persona (T1 num_actions); the paper's set has 24-27.")
    evidence_documents: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=2, medium=2, hard=3),
                                              description="True-positive documents per bottleneck (T8 num_documents).")
    distractors: dict[str, int] = Field(default_factory=lambda: {"email": 3, "calendar": 2, "document": 2},
                                        description="Bulk distractors per persona by kind (T14-T16 count).")
    enhanced: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=1, medium=1, hard=1),
                                    description="Distractors rewritten harder (T18) per persona; easy personas get "
                                                "none whatever this says, as in the paper's code.")
    hard_negatives: int = Field(1, ge=0, le=10, description="Hard negatives (T19-T23) per sample.")
    hard_negative_kinds: list[str] = Field(default_factory=lambda: list(HARD_NEGATIVE_KINDS),
                                           description="Manipulations to cycle through, from " + ", ".join(HARD_NEGATIVE_KINDS))
    words: dict[str, list[int]] = Field(
        default_factory=lambda: {"email": [90, 300], "calendar": [50, 220], "document": [120, 400]},
        description="[min, max] words per document kind (T9 asks 200-400 for emails, T16 400-800 for documents).")
    max_documents: int = Field(16, ge=2, le=500, description="Documents per datastore at most (paper: about 79).")
    token_budget: int = Field(12_000, ge=200, le=1_000_000,
                              description="Approximate tokens per datastore at most (paper: about 108k).")
    min_review_score: int = Field(7, ge=1, le=10, description="T13 quality score a true positive needs.")
    max_bm25_f1: float = Field(0.5, ge=0, le=1, description="Shortcut gate: BM25 search F1 a sample may reach at most.")
    max_adversary_f1: float = Field(0.5, ge=0, le=1, description="Shortcut gate: an adversary that picks the solver "
                                                                "and exceeds this search F1 from surface artifacts "
                                                                "solves the sample.")
    alpha: float = Field(0.05, gt=0, lt=1, description="Two-sample tests: below this p-value (Bonferroni over the "
                                                       "tests) true positives are separable from distractors.")
    reference_date: date = Field(date(2026, 3, 2), description="'Today' in every persona's world: documents are "
                                                              "dated around it and time shifts move away from it.")
    max_retries: int = Field(1, ge=0, le=5, description="Extra generation cycles for an item that fails verification.")
    seed: int = Field(0, description="Seed of every sampling, shuffling and id choice.")

    @field_validator("distractors")
    @classmethod
    def _known_kinds(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = [k for k in value if k not in ("email", "calendar", "document")]
        if unknown:
            raise ValueError(f"unknown document kind {unknown[0]!r}: choose from email, calendar, document")
        if any(n < 0 or n > 50 for n in value.values()):
            raise ValueError("distractor counts must be between 0 and 50")
        return value

    @field_validator("hard_negative_kinds")
    @classmethod
    def _known_manipulations(cls, value: list[str]) -> list[str]:
        unknown = [k for k in value if k not in HARD_NEGATIVE_KINDS]
        if unknown or not value:
            raise ValueError(f"unknown hard negative kind {(unknown or [''])[0]!r}: choose from "
                             + ", ".join(HARD_NEGATIVE_KINDS))
        return list(dict.fromkeys(value))

    @field_validator("words")
    @classmethod
    def _word_ranges(cls, value: dict[str, list[int]]) -> dict[str, list[int]]:
        for kind in ("email", "calendar", "document"):
            bounds = value.get(kind)
            if not bounds or len(bounds) != 2 or not 10 <= bounds[0] < bounds[1] <= 3000:
                raise ValueError(f"words.{kind} must be [min, max] with 10 <= min < max <= 3000")
        return value

    @model_validator(mode="after")
    def _room_for_distractors(self) -> "ProbeSpec":
        needed = max(self.evidence_documents.of(d) for d in self.difficulties) + self.hard_negatives
        if needed >= self.max_documents:
            raise ValueError(f"max_documents ({self.max_documents}) leaves no room for distractors: a sample "
                             f"already has up to {needed} true positives and hard negatives")
        return self

    def difficulty_of(self, persona_index: int) -> str:
        """Difficulty of the persona at 0-based ``persona_index`` (the list is cycled)."""
        return self.difficulties[persona_index % len(self.difficulties)]


def probe_options(spec: "ThemeSpec") -> ProbeSpec:
    """The theme's ``probe:`` section, defaults filled in."""
    return ProbeSpec.model_validate(spec.options.get(OPTIONS_KEY, {}))
