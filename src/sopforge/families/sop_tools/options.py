"""The sop_tools section of a theme file: ``hardening:`` (distractors and manipulations to make, and the
bounds of the gates that prove the SOP's branches matter)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from sopforge.theme import ThemeSpec

__all__ = ["OPTIONS_KEY", "SOP_BENCH_VARIANTS", "TELLER_VARIANTS", "VARIANT_TYPES", "HardeningSpec", "hardening",
           "known_variant_types"]

OPTIONS_KEY = "hardening"
# SOP variant types: SOP-Bench §3.3.2 complexity injection, then TELLER S10 SOP abstraction.
SOP_BENCH_VARIANTS: tuple[str, ...] = ("branching", "redundant_detail", "tangential", "ambiguity")
TELLER_VARIANTS: tuple[str, ...] = ("implicit_decision_points", "ambiguous_expressions", "exception_paths")
VARIANT_TYPES: tuple[str, ...] = SOP_BENCH_VARIANTS + TELLER_VARIANTS


def known_variant_types(value: list[str]) -> list[str]:
    """``value`` without repeats; raises ValueError naming the first unknown type."""
    unknown = [v for v in value if v not in VARIANT_TYPES]
    if unknown:
        raise ValueError(f"unknown SOP variant type {unknown[0]!r}: choose from {', '.join(VARIANT_TYPES)}")
    return list(dict.fromkeys(value))


class HardeningSpec(BaseModel):
    """How many distractors and manipulations the ``distractors`` and ``manipulations`` stages make, and how
    strictly the ``reference`` and ``package`` stages hold the domain to branch-dependent paths."""

    model_config = ConfigDict(extra="forbid")

    distractor_tools: int = Field(5, ge=0, le=40, description="Distractor tools to ask for (SOP-Bench §3.3.2, TELLER S9).")
    distractor_fields: int = Field(3, ge=0, le=20, description="Distractor data fields to ask for.")
    sop_variants: list[str] = Field(default_factory=lambda: list(VARIANT_TYPES),
                                    description="SOP variant types to generate, from " + ", ".join(VARIANT_TYPES) + ".")
    dialogues: int = Field(2, ge=0, le=100, description="Tasks sampled for TOD-ProcBench dialogues and compliance pairs.")
    max_retries: int = Field(2, ge=0, le=5, description="Extra generation cycles for an item that fails verification.")
    seed: int = Field(0, description="Seed of every sampling and perturbation choice (recorded with the artifacts).")
    min_distinct_paths: int = Field(4, ge=1, le=1000, description=(
        "Fewest distinct expected tool paths a domain may have (the reference and package gates)."))
    max_baseline_state_success: float = Field(0.5, ge=0.0, le=1.0, description=(
        "Largest share of tasks on which a baseline agent (call every tool, read-only, majority label) may reach "
        "the expected final state."))

    def gates(self) -> dict[str, float]:
        """The two bounds, as the reference and package stages take them."""
        return {"min_distinct_paths": self.min_distinct_paths,
                "max_baseline_state_success": self.max_baseline_state_success}

    @field_validator("sop_variants")
    @classmethod
    def _known_variants(cls, value: list[str]) -> list[str]:
        return known_variant_types(value)


def hardening(spec: "ThemeSpec") -> HardeningSpec:
    """The theme's ``hardening:`` section, defaults filled in."""
    return HardeningSpec.model_validate(spec.options.get(OPTIONS_KEY, {}))
