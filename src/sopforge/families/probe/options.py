"""The probe section of a theme file: ``probe:`` (sizes, verification thresholds and seed).

The defaults are the paper's scale (Table 1, seeds/004 L102-108): 24-27 actions, about 79
documents and 96k-122k tokens per sample. Table 1's tokens imply about 1,360 tokens per document,
longer than the word ranges T9 and T16 ask for, so the default word ranges are set to reach the
table's totals. Every document is generated *and* judged (the paper judges none), and every
sample must survive the shortcut attacks; docs/families/probe.md gives the calls and tokens this
costs per sample. The demo theme keeps a small ``probe:`` section so ``make demo`` stays fast.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sopforge.llm.output_limits import max_tokens_for

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

    easy: int = Field(ge=0, le=50)
    medium: int = Field(ge=0, le=50)
    hard: int = Field(ge=0, le=50)

    def of(self, difficulty: str) -> int:
        return int(getattr(self, difficulty))


class ProbeSpec(BaseModel):
    """How big the PROBE set is and how strictly it is verified."""

    model_config = ConfigDict(extra="forbid")

    personas: int = Field(2, ge=1, le=50, description="Personas derived from the business context's roles.")
    difficulties: list[Difficulty] = Field(default_factory=lambda: ["easy", "hard"], min_length=1,
                                           description="Difficulty of each persona, cycled over the personas; "
                                                       "every sample inherits its persona's difficulty.")
    bottlenecks: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=2, medium=3, hard=4),
                                       description="Bottlenecks (= samples) per persona, by difficulty (the paper's "
                                                   "code: 1-2, 2-4, 4-6).")
    actions: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=24, medium=25, hard=26),
                                   description="Actions per persona (T1 num_actions); the paper's set has 24-27.")
    evidence_documents: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=2, medium=3, hard=4),
                                              description="True-positive documents per bottleneck (T8 num_documents; "
                                                          "the paper's code: 1-2, 2-3, 3-6).")
    distractors: dict[str, int] = Field(default_factory=lambda: {"email": 37, "calendar": 15, "document": 22},
                                        description="Distractors per sample by kind (T14-T16), each sample its own "
                                                    "(the paper's code mixes 50% e-mail, 20% calendar, 30% documents).")
    distractor_batch: int = Field(4, ge=1, le=20, description="Distractors asked for in one call at most; fewer when "
                                                              "their longest bodies would not fit the answer budget.")
    enhanced: PerDifficulty = Field(default_factory=lambda: PerDifficulty(easy=0, medium=2, hard=4),
                                    description="Distractors rewritten harder (T18) per sample; easy samples get "
                                                "none whatever this says, as in the paper's code.")
    hard_negatives: int = Field(2, ge=0, le=10, description="Hard negatives (T19-T23) per sample.")
    hard_negative_kinds: list[str] = Field(default_factory=lambda: list(HARD_NEGATIVE_KINDS),
                                           description="Manipulations to cycle through, from " + ", ".join(HARD_NEGATIVE_KINDS))
    words: dict[str, list[int]] = Field(
        default_factory=lambda: {"email": [500, 1200], "calendar": [300, 800], "document": [1200, 2800]},
        description="[min, max] words per document kind, the same for evidence and distractors (set to reach "
                    "Table 1's tokens per sample; T9 asks 200-400 for e-mails, T16 400-800 for documents).")
    max_documents: int = Field(81, ge=2, le=500, description="Documents per datastore at most (paper: 70-81).")
    token_budget: int = Field(122_098, ge=200, le=1_000_000,
                              description="Approximate tokens per datastore at most (paper: 96,294-122,098).")
    min_review_score: int = Field(7, ge=1, le=10, description="T13 quality score a true positive needs.")
    hardening_rounds: int = Field(3, ge=0, le=10, description="Revision rounds for a sample a shortcut attack solves; "
                                                              "a sample still solved after the last is dropped.")
    attack_alpha: float = Field(0.05, gt=0, lt=1, description="A shortcut attack solves a sample when random guessing "
                                                              "would do as well with probability below this.")
    max_attack_ratio: float = Field(1.5, ge=1, description="An attack's mean search F1 over the kept samples may reach "
                                                           "this multiple of random's (reported, and a warning beyond).")
    alpha: float = Field(0.05, gt=0, lt=1, description="Two-sample tests: below this p-value (Bonferroni over the "
                                                       "tests) true positives are separable from distractors.")
    reference_date: date = Field(date(2026, 3, 2), description="The day every persona's world is written as of "
                                                              "('today'): e-mails and documents are dated before it, "
                                                              "deadlines after it.")
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

    def first_try_calls(self, max_tokens: int | None = None) -> dict[str, int]:
        """LLM calls each PROBE stage makes when every answer passes on its first try and no sample is revised
        (the pre-run estimate and the progress line): the floor of a run's calls, not its ceiling.

        Args:
            max_tokens: ``SOPFORGE_MAX_TOKENS`` when set; the distractor stage's own budget bounds it.
        """
        max_tokens = max_tokens_for("probe_distractors", None, max_tokens)
        difficulties = [self.difficulty_of(i) for i in range(self.personas)]
        samples = [d for d in difficulties for _ in range(self.bottlenecks.of(d))]
        per_ask = {kind: max(1, min(self.distractor_batch, int(max_tokens * 0.75) // (int(words[1] * 1.4) + 120)))
                   for kind, words in self.words.items()}
        asks = sum(-(-count // per_ask[kind]) for kind, count in self.distractors.items() if count)
        enhanced = sum(0 if d == "easy" else 2 * self.enhanced.of(d) for d in samples)
        return {
            "probe_personas": 1, "probe_world": 3 * self.personas,
            "probe_bottlenecks": sum(3 + 2 * self.bottlenecks.of(d) for d in difficulties),
            "probe_plans": 2 * len(samples),
            "probe_distractors": len(samples) * (asks + sum(self.distractors.values())) + enhanced,
            "probe_evidence": sum(3 * self.evidence_documents.of(d) + 2 for d in samples),
            "probe_hard_negatives": 2 * self.hard_negatives * len(samples),
            "probe_assembly": len(samples),
        }

    def difficulty_of(self, persona_index: int) -> str:
        """Difficulty of the persona at 0-based ``persona_index`` (the list is cycled)."""
        return self.difficulties[persona_index % len(self.difficulties)]


def probe_options(spec: "ThemeSpec") -> ProbeSpec:
    """The theme's ``probe:`` section, defaults filled in."""
    return ProbeSpec.model_validate(spec.options.get(OPTIONS_KEY, {}))
