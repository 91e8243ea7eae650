"""What a user asks for: a theme, and which model answers each stage.

A ``ThemeSpec`` comes from ``--theme "…"`` or a YAML file (``examples/themes/*.yaml``) and is
stored as the run's config (it never holds secrets: keys come from the environment).
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sopforge.errors import UserError
from sopforge.families import IMPLEMENTED, Plan, options_sections, plan
from sopforge.parsing import yaml_error_where

PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "replay", "exchange", "scripted")
ReviewMode = Literal["auto", "ui"]
MAX_THEME_CHARS = 2000


class StageModelConfig(BaseModel):
    """Per-stage override of provider, model and sampling."""

    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(None, description="Provider for this stage.")
    model: str | None = Field(None, description="Model for this stage.")
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature for this stage.")
    base_url: str | None = Field(None, description="OpenAI/Anthropic-compatible base URL for this stage.")


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
    families: list[str] | None = Field(None, description="Benchmark families to build (default: every implemented "
                                                          "one); the shared stages run once for all of them.")
    gates: list[str] | None = Field(None, description="Stages followed by a review gate (default: each family's "
                                                      "declared gates).")
    max_cost: float | None = Field(None, gt=0, description=(
        "Spending cap in USD for the run's LLM calls: printed with an estimate before anything is paid; a call "
        "that could take the run past it is not sent and the run stops, resumable with `sopforge rerun`."))
    batch: bool = Field(False, description=(
        "Send each stage's independent calls through the provider's batch API (OpenAI Batch, Anthropic Message "
        "Batches): half price, answers within hours; a stopped run polls the same jobs when resumed."))
    waive: dict[str, str] = Field(default_factory=dict, description=(
        "Checks overruled for this theme, check name -> the reason (e.g. dataset.realism.numeric_spread: 'duty "
        "thresholds are fixed per country'): a failed waived check no longer blocks; it is recorded with the "
        "reason in the validations and in the export's metadata."))
    options: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        "Each family's own section of the theme file by its key (e.g. hardening:), validated by that family. "
        "In a theme file the sections are written at the top level."))

    @model_validator(mode="before")
    @classmethod
    def _family_sections(cls, data: Any) -> Any:
        """Move top-level family sections (``hardening:`` ...) under ``options``."""
        if not isinstance(data, dict):
            return data
        sections = options_sections()
        found = {key: data[key] for key in data if key in sections}
        if not found:
            return data
        rest = {key: value for key, value in data.items() if key not in found}
        return {**rest, "options": {**(data.get("options") or {}), **found}}

    @field_validator("theme")
    @classmethod
    def _theme_is_usable(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("the theme is empty: give a business theme such as 'pharmacy prescription refills'")
        if len(value) > MAX_THEME_CHARS:
            raise ValueError(f"the theme is {len(value)} characters long; shorten it to at most {MAX_THEME_CHARS}")
        return value

    @field_validator("provider")
    @classmethod
    def _provider_known(cls, value: str) -> str:
        _check_provider(value)
        return value

    @field_validator("families")
    @classmethod
    def _families_known(cls, value: list[str] | None) -> list[str] | None:
        unknown = [f for f in value or [] if f not in IMPLEMENTED]
        if unknown:
            raise ValueError(f"unknown family {unknown[0]!r}: choose from {', '.join(IMPLEMENTED)}")
        return value

    @field_validator("waive")
    @classmethod
    def _waivers_explained(cls, value: dict[str, str]) -> dict[str, str]:
        for name, reason in value.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+", name):
                raise ValueError(f"waive: {name!r} is not a check name (such as dataset.realism.numeric_spread; "
                                 "`sopforge show RUN` lists a run's checks)")
            if not str(reason or "").strip():
                raise ValueError(f"waive: give the reason for overruling {name} (waive: {{{name}: \"why\"}})")
        return {name: str(reason).strip() for name, reason in value.items()}

    @field_validator("slug")
    @classmethod
    def _slug_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z0-9][a-z0-9_]{0,63}", value):
            raise ValueError(f"slug {value!r} must match [a-z0-9][a-z0-9_]* (at most 64 characters)")
        return value

    @model_validator(mode="after")
    def _known_names(self) -> "ThemeSpec":
        self.families = list(dict.fromkeys(self.families or IMPLEMENTED))
        dag = self.plan()
        llm_stages = [s.name for s in dag.stages if s.uses_llm]
        for stage, cfg in self.stages.items():
            if stage not in llm_stages:
                raise ValueError(f"unknown stage {stage!r}: choose one of {', '.join(llm_stages)}")
            if cfg.provider is not None:
                _check_provider(cfg.provider)
        if self.gates is None:
            self.gates = [s.name for s in dag.stages if s.gate]
        for gate in self.gates:
            if gate not in dag.names:
                raise ValueError(f"unknown gate stage {gate!r}: choose from {', '.join(dag.names)}")
        # Gates follow the plan's order whatever order they were listed in.
        self.gates = [s for s in dag.names if s in self.gates]
        sections = options_sections()
        for key, value in self.options.items():
            if key not in sections:
                raise ValueError(f"unknown section {key!r}: families read {', '.join(sections) or 'none'}")
            try:
                self.options[key] = sections[key][1].model_validate(value or {}).model_dump(mode="json")
            except ValidationError as err:
                raise ValueError(f"{key}.{_one_line(err, sections[key][1])}") from None
        if self.slug is None:
            self.slug = slugify(self.theme)
        return self

    def plan(self) -> Plan:
        """The stage DAG of this theme's families."""
        return plan(tuple(self.families or IMPLEMENTED))

    @property
    def llm_stages(self) -> list[str]:
        """Stages of this theme that ask a model (the ones ``stages:`` can configure)."""
        return [s.name for s in self.plan().stages if s.uses_llm]

    def for_stage(self, stage: str) -> StageModelConfig:
        """Resolved provider/model/temperature/base_url for ``stage`` (overrides win)."""
        if stage not in self.llm_stages:
            raise UserError(f"unknown stage {stage!r}: choose one of {', '.join(self.llm_stages)}")
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


def _one_line(err: ValidationError, model: type[BaseModel] | None = None) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden" and model is not None:
        keys = _keys_at(model, first["loc"][:-1])
        if keys:
            msg = f"unknown key; the keys here are {', '.join(keys)}"
    return f"{where}: {msg}" if where else msg


def _keys_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys a theme mapping may hold at ``loc`` (field names of the model found there)."""
    current: Any = model
    steps = list(loc)
    while steps:
        info = current.model_fields.get(str(steps.pop(0))) if isinstance(current, type) else None
        if info is None:
            return []
        kind = info.annotation
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if typing.get_origin(kind) is dict:
            kind = args[-1]
            if steps:
                steps.pop(0)  # the mapping's own key (a stage name)
        elif args and not (isinstance(kind, type) and issubclass(kind, BaseModel)):
            kind = args[0]  # X | None
        current = kind
    if not (isinstance(current, type) and issubclass(current, BaseModel)):
        return []
    keys = [name for name in current.model_fields if not (current is ThemeSpec and name == "options")]
    return keys + (list(options_sections()) if current is ThemeSpec else [])


def build_spec(data: dict, *, source: str, sources: dict[str, str] | None = None) -> ThemeSpec:
    """Validate a theme mapping; raise ``UserError`` with one line naming where the bad value came from.

    Args:
        data: The merged request (theme file or ``--theme``, then the command line's options).
        source: Where ``data`` came from (a theme file's path, ``--theme``).
        sources: Top-level keys that came from elsewhere, with where (``{"rows": "--rows"}``): an
            error in such a key names that instead of ``source``.
    """
    try:
        return ThemeSpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else None
        if sources and key in sources:
            value = data.get(key)
            shown = f" {value}" if isinstance(value, (int, float, str)) and len(str(value)) <= 40 else ""
            raise UserError(f"{sources[key]}{shown}: {first['msg'].removeprefix('Value error, ')}") from None
        raise UserError(f"{source}: {_one_line(err, ThemeSpec)}") from None


def build_stored_spec(data: dict, *, source: str) -> tuple[ThemeSpec, list[str]]:
    """A run's stored theme as this version reads it, and the options it left out.

    A store outlives versions: a run made by an older sopforge may carry options this one no longer has (PROBE's
    ``max_bm25_f1`` became ``max_attack_ratio``). A theme file with such a key is refused, since its author can fix
    it; a stored run cannot be edited, so the keys are left out and named, and the run can still be rerun.

    Args:
        data: ``runs.config["spec"]`` of the run.
        source: Where it came from, for the error of a value this version refuses.

    Returns:
        The spec, and the dotted names of the keys left out (empty for a run made by this version).
    """
    kept = {k: v for k, v in data.items() if k in ThemeSpec.model_fields}
    dropped = [k for k in data if k not in ThemeSpec.model_fields]
    sections = options_sections()
    options: dict[str, Any] = {}
    for name, values in (data.get("options") or {}).items():
        if name not in sections:
            dropped.append(name)
            continue
        fields = sections[name][1].model_fields
        options[name] = {k: v for k, v in (values or {}).items() if k in fields}
        dropped += [f"{name}.{k}" for k in values or {} if k not in fields]
    kept["options"] = options
    return build_spec(kept, source=source), dropped


def load_theme_file(path: Path) -> tuple[dict[str, Any], Path]:
    """Read a theme YAML file. Returns its mapping (validated by :func:`build_spec` once the
    command line's options are merged in) and the folder relative paths resolve against."""
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
    return data, path.parent
