"""What a user asks for: a theme, and which model answers each stage.

A ``ThemeSpec`` comes from ``--theme "…"`` or a YAML file (``examples/themes/*.yaml``) and is
stored as the run's config (it never holds secrets: keys come from the environment).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sopforge.errors import UserError
from sopforge.parsing import yaml_error_where

STAGES: tuple[str, ...] = ("context", "schema", "sop", "api_graph", "dataset", "tools", "reference", "distractors",
                           "manipulations")
# Stages that ask no LLM (no provider or model to configure).
DETERMINISTIC_STAGES: tuple[str, ...] = ("package",)
PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "replay", "exchange", "scripted")
# Review gates stop after these stages unless the theme file or --gate/--no-gate says otherwise:
# the SOP, the graph and the tools are what a domain expert can judge; package is the release.
DEFAULT_GATES: tuple[str, ...] = ("sop", "api_graph", "tools", "package")
ReviewMode = Literal["auto", "ui"]
# SOP variant types: SOP-Bench §3.3.2 complexity injection, then TELLER S10 SOP abstraction.
SOP_BENCH_VARIANTS: tuple[str, ...] = ("branching", "redundant_detail", "tangential", "ambiguity")
TELLER_VARIANTS: tuple[str, ...] = ("implicit_decision_points", "ambiguous_expressions", "exception_paths")
VARIANT_TYPES: tuple[str, ...] = SOP_BENCH_VARIANTS + TELLER_VARIANTS
MAX_THEME_CHARS = 2000


class StageModelConfig(BaseModel):
    """Per-stage override of provider, model and sampling."""

    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(None, description="Provider for this stage.")
    model: str | None = Field(None, description="Model for this stage.")
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature for this stage.")
    base_url: str | None = Field(None, description="OpenAI/Anthropic-compatible base URL for this stage.")


def known_variant_types(value: list[str]) -> list[str]:
    """``value`` without repeats; raises ValueError naming the first unknown type."""
    unknown = [v for v in value if v not in VARIANT_TYPES]
    if unknown:
        raise ValueError(f"unknown SOP variant type {unknown[0]!r}: choose from {', '.join(VARIANT_TYPES)}")
    return list(dict.fromkeys(value))


class HardeningSpec(BaseModel):
    """How many distractors and manipulations the ``distractors`` and ``manipulations`` stages make."""

    model_config = ConfigDict(extra="forbid")

    distractor_tools: int = Field(5, ge=0, le=40, description="Distractor tools to ask for (SOP-Bench §3.3.2, TELLER S9).")
    distractor_fields: int = Field(3, ge=0, le=20, description="Distractor data fields to ask for.")
    sop_variants: list[str] = Field(default_factory=lambda: list(VARIANT_TYPES),
                                    description="SOP variant types to generate, from " + ", ".join(VARIANT_TYPES) + ".")
    dialogues: int = Field(2, ge=0, le=100, description="Tasks sampled for TOD-ProcBench dialogues and compliance pairs.")
    max_retries: int = Field(2, ge=0, le=5, description="Extra generation cycles for an item that fails verification.")
    seed: int = Field(0, description="Seed of every sampling and perturbation choice (recorded with the artifacts).")

    @field_validator("sop_variants")
    @classmethod
    def _known_variants(cls, value: list[str]) -> list[str]:
        return known_variant_types(value)


class ThemeSpec(BaseModel):
    """A generation request: the theme plus model settings, overall and per stage."""

    model_config = ConfigDict(extra="forbid")

    theme: str = Field(description="Business theme, e.g. 'pharmacy prescription refills'.")
    slug: str | None = Field(None, description="Short [a-z0-9_] name; part of every LLM call key. Derived from the theme when absent.")
    provider: str = Field("anthropic", description="Default provider for every stage.")
    model: str | None = Field(None, description="Default model for every stage (provider default when absent).")
    temperature: float = Field(0.1, ge=0, le=2, description="Default sampling temperature.")
    base_url: str | None = Field(None, description="Base URL of an OpenAI/Anthropic-compatible server.")
    recordings: str | None = Field(None, description="Replay folder (relative to the theme file) for --provider replay.")
    rows: int = Field(50, ge=1, le=100_000, description="Dataset rows (tasks) to generate (SOP-Bench n_samples).")
    stages: dict[str, StageModelConfig] = Field(default_factory=dict, description="Per-stage overrides keyed by stage name.")
    review: ReviewMode = Field("auto", description="auto: a gate approves when every check passed, else the run stops as needs_review; "
                                                   "ui: the flow run pauses at each gate for a reviewer (Prefect UI or `sopforge review`).")
    gates: list[str] = Field(default_factory=lambda: list(DEFAULT_GATES), description="Stages followed by a review gate.")
    hardening: HardeningSpec = Field(default_factory=HardeningSpec,
                                     description="Distractors and manipulations to generate (issue 5).")

    @field_validator("theme")
    @classmethod
    def _theme_is_usable(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("the theme is empty: give a business theme such as 'pharmacy prescription refills'")
        if len(value) > MAX_THEME_CHARS:
            raise ValueError(f"the theme is {len(value)} characters long; shorten it to at most {MAX_THEME_CHARS}")
        return value

    @field_validator("slug")
    @classmethod
    def _slug_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z0-9][a-z0-9_]{0,63}", value):
            raise ValueError(f"slug {value!r} must match [a-z0-9][a-z0-9_]* (at most 64 characters)")
        return value

    @model_validator(mode="after")
    def _known_names(self) -> "ThemeSpec":
        _check_provider(self.provider)
        for stage, cfg in self.stages.items():
            if stage not in STAGES:
                raise ValueError(f"unknown stage {stage!r}: choose one of {', '.join(STAGES)}")
            if cfg.provider is not None:
                _check_provider(cfg.provider)
        for gate in self.gates:
            if gate not in STAGES + DETERMINISTIC_STAGES:
                raise ValueError(f"unknown gate stage {gate!r}: choose from {', '.join(STAGES + DETERMINISTIC_STAGES)}")
        # Gates follow the chain's order whatever order they were listed in.
        self.gates = [s for s in STAGES + DETERMINISTIC_STAGES if s in self.gates]
        if self.slug is None:
            self.slug = slugify(self.theme)
        return self

    def for_stage(self, stage: str) -> StageModelConfig:
        """Resolved provider/model/temperature/base_url for ``stage`` (overrides win)."""
        if stage not in STAGES:
            raise UserError(f"unknown stage {stage!r}: choose one of {', '.join(STAGES)}")
        override = self.stages.get(stage, StageModelConfig())
        # The run-wide model only makes sense for the run-wide provider; a stage that switches
        # provider without naming a model gets that provider's default.
        same_provider = override.provider in (None, self.provider)
        return StageModelConfig(
            provider=override.provider or self.provider,
            model=override.model or (self.model if same_provider else None),
            temperature=self.temperature if override.temperature is None else override.temperature,
            base_url=override.base_url or self.base_url,
        )


def _check_provider(name: str) -> None:
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}: choose one of {', '.join(PROVIDERS)}")


def slugify(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:limit].strip("_")
    return slug or "theme"


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def build_spec(data: dict, *, source: str) -> ThemeSpec:
    """Validate a theme mapping; raise ``UserError`` with one line naming ``source`` on failure."""
    try:
        return ThemeSpec.model_validate(data)
    except ValidationError as err:
        raise UserError(f"{source}: {_one_line(err)}") from None


def load_theme_file(path: Path) -> tuple[ThemeSpec, Path]:
    """Read a theme YAML file. Returns the spec and the folder relative paths resolve against."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"theme file {path} does not exist: pass a path like examples/themes/pharmacy_refills.yaml") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"theme file {path} cannot be read ({err.__class__.__name__}): check the path and that it is UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise UserError(f"theme file {path} is not valid YAML{yaml_error_where(err)}: fix the syntax") from None
    if not isinstance(data, dict):
        raise UserError(f"theme file {path} must be a YAML mapping with at least a 'theme:' key")
    return build_spec(data, source=str(path)), path.parent
