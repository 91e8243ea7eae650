"""All configuration in one pydantic-settings object.

Every field can be set from the environment as ``SOPFORGE_<FIELD>``; provider secrets come
only from their conventional variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) and are
held as ``SecretStr`` so they never reach a repr, a log line, the store or an export.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from sopforge.errors import UserError

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# USD per million tokens (input, output, cached input, cache write). Estimates for cost accounting
# and the --max-cost budget; override with SOPFORGE_PRICES='{"model": [in, out]}' (cache prices then
# follow each provider's rule, see sopforge.llm.limits.cache_prices). Batch calls are half price.
# Unknown models are costed at 0 and flagged.
DEFAULT_PRICES: dict[str, tuple[float, ...]] = {
    "claude-sonnet-4-5": (3.0, 15.0, 0.30, 3.75),
    "claude-opus-4-1": (15.0, 75.0, 1.50, 18.75),
    "claude-haiku-4-5": (1.0, 5.0, 0.10, 1.25),
    "gpt-5": (1.25, 10.0, 0.125, 1.25),
    "gpt-5-mini": (0.25, 2.0, 0.025, 0.25),
    "gpt-4o": (2.5, 10.0, 1.25, 2.5),
    "gpt-4o-mini": (0.15, 0.6, 0.075, 0.15),
}


class Settings(BaseSettings):
    """Runtime settings. ``SOPFORGE_HOME`` relocates all state."""

    model_config = SettingsConfigDict(env_prefix="SOPFORGE_", extra="ignore", populate_by_name=True)

    home: Path = Field(PROJECT_ROOT / "artifacts", description="State root: DuckDB file, exports, exchange folder, Prefect home.")
    project_root: Path = Field(PROJECT_ROOT, description="Checkout holding prompts/, flows/, validation/ and examples/.")

    provider: str = Field("anthropic", description="Default LLM provider: anthropic, openai, replay, exchange or scripted.")
    model: str | None = Field(None, description="Default model; each provider has its own fallback.")
    temperature: float = Field(0.1, description="Default sampling temperature (TELLER uses 0.1 throughout).")
    waivers: dict[str, str] = Field(default_factory=dict, description=(
        "Checks a person overruled for this run, check name -> reason; set by the run from the theme file's "
        "waive:, --waive and review decisions (sopforge.checks.apply_waivers)."))
    max_tokens: int | None = Field(None, ge=1, description=(
        "Upper bound on every call's completion budget. Unset: each stage's own budget, bounded by the model's "
        "published output limit (sopforge.llm.output_limits)."))

    anthropic_api_key: SecretStr | None = Field(None, validation_alias=AliasChoices("ANTHROPIC_API_KEY"))
    openai_api_key: SecretStr | None = Field(None, validation_alias=AliasChoices("OPENAI_API_KEY"))
    anthropic_base_url: str | None = Field(None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "SOPFORGE_ANTHROPIC_BASE_URL"))
    openai_base_url: str | None = Field(None, validation_alias=AliasChoices("OPENAI_BASE_URL", "SOPFORGE_OPENAI_BASE_URL"))

    max_attempts: int = Field(3, ge=1, le=10, description="Parse/validation attempts per stage call (1 = no re-ask).")
    max_retries: int = Field(5, ge=0, le=20, description="Transport retries on 429/5xx/timeouts per attempt.")
    backoff_base_seconds: float = Field(1.0, ge=0, description="First retry delay; doubles each retry.")
    backoff_max_seconds: float = Field(60.0, ge=0, description="Ceiling on a single retry delay.")
    request_timeout_seconds: float = Field(300.0, gt=0, description="Per-request timeout for provider HTTP calls.")
    requests_per_minute: float | None = Field(None, gt=0, description=(
        "Optional client-side ceiling per provider and model, for servers that send no rate-limit headers; "
        "otherwise the limits are learnt from the provider's headers and 429s."))
    max_concurrency: int = Field(16, ge=1, description=(
        "Most requests in flight per provider and model (shared by every stage of a process); the adaptive "
        "window backs off below it on 429s."))

    batch_poll_seconds: float = Field(30.0, gt=0, description="How often a batch job's status is asked (--batch).")

    exchange_dir: Path | None = Field(None, description="Folder for the exchange provider (default: <home>/exchange).")
    exchange_wait_seconds: float = Field(0.0, ge=0, description="How long the exchange provider polls for a response file before stopping the run.")
    recordings_dir: Path | None = Field(None, description="Folder of recorded responses for the replay provider (default: examples/recordings).")

    review_timeout_seconds: int = Field(86_400, ge=1, description="How long a gate waits for a reviewer (--review ui) before the run stops as needs_review; `sopforge rerun` picks it up.")
    review_poll_seconds: int = Field(5, ge=1, description="How often a paused gate checks whether it was answered.")

    prices: dict[str, tuple[float, ...]] = Field(default_factory=lambda: dict(DEFAULT_PRICES), description=(
        "USD per million input, output[, cached input, cache write] tokens, by model prefix."))

    @property
    def db_path(self) -> Path:
        return self.home / "sopforge.duckdb"

    @property
    def exports_dir(self) -> Path:
        return self.home / "exports"

    @property
    def prefect_home(self) -> Path:
        return self.home / "prefect"

    @property
    def prompts_dir(self) -> Path:
        return self.project_root / "prompts"

    @property
    def resolved_exchange_dir(self) -> Path:
        return self.exchange_dir or self.home / "exchange"

    @property
    def resolved_recordings_dir(self) -> Path:
        return self.recordings_dir or self.project_root / "examples" / "recordings"


def load_settings(**overrides) -> Settings:
    """Build settings from the environment, with explicit overrides taking precedence.

    Raises:
        UserError: A variable (or override) holds a value its setting does not accept: one line naming
            the variable, its value and what it accepts.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        raise _bad_setting(field, first.get("input"), given) from None
    except SettingsError as err:  # a JSON value (SOPFORGE_PRICES) that does not parse
        match = re.search(r'field "([^"]+)"', str(err))
        raise _bad_setting(match[1] if match else "", None, given) from None


def _variable(field: str, overrides: dict[str, Any]) -> str:
    if field in overrides:
        return f"--{field.replace('_', '-')}"
    info = Settings.model_fields.get(field)
    alias = getattr(info, "validation_alias", None) if info is not None else None
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return field if field.isupper() else f"SOPFORGE_{field.upper()}"


def accepted(field: str) -> str:
    """What a setting accepts, in words: its kind and bounds (``a whole number from 1 to 10``)."""
    info = Settings.model_fields.get(field)
    if info is None:
        return "a valid value"
    kind = info.annotation
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if typing.get_origin(kind) is dict:
        return 'JSON such as {"model-prefix": [input, output]} (USD per million tokens)'
    word = {int: "a whole number", float: "a number", bool: "true or false", Path: "a path"}.get(kind, "text")
    low = high = None
    for rule in info.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">")):
            if getattr(rule, attr, None) is not None:
                low = (sign, getattr(rule, attr))
        if getattr(rule, "le", None) is not None:
            high = rule.le
    if low and high is not None and low[0] == "≥":
        return f"{word} from {low[1]:g} to {high:g}"
    bounds = [f"{low[0]} {low[1]:g}"] if low else []
    bounds += [f"≤ {high:g}"] if high is not None else []
    return f"{word} {' and '.join(bounds)}".strip()


def _bad_setting(field: str, value: Any, overrides: dict[str, Any]) -> UserError:
    shown = "" if value is None or isinstance(value, (dict, list)) else f"={str(value)[:40]!r}"
    info = Settings.model_fields.get(field)
    default = getattr(info, "default", None)
    fallback = f" ({default:g})" if isinstance(default, (int, float)) and not isinstance(default, bool) else ""
    return UserError(f"{_variable(field, overrides)}{shown} is not valid: it takes {accepted(field)}; "
                     f"fix it, or unset it for the default{fallback}")
