"""Build providers and gateways from settings: the only place that knows every provider.

Configuration problems (unknown provider, missing key) are ``UserError``s that say how to fix
them, raised before any stage runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from pydantic import SecretStr

from sopforge.errors import UserError
from sopforge.llm.gateway import Gateway, Provider
from sopforge.llm.providers import ExchangeProvider, ReplayProvider, ScriptedProvider
from sopforge.llm.types import CallLedger
from sopforge.settings import Settings

PROVIDERS = ("anthropic", "openai", "replay", "exchange", "scripted")

DEFAULT_MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4o-mini",
    "replay": "recorded",
    "exchange": "exchange",
    "scripted": "scripted",
}

# OpenAI-compatible local servers (vLLM, Ollama) accept any key but the SDK insists on one.
PLACEHOLDER_KEY = "not-needed"


def default_model(provider_name: str) -> str:
    """The model used when neither ``--model`` nor ``SOPFORGE_MODEL`` is set.

    Raises:
        UserError: for an unknown provider name.
    """
    _check_name(provider_name)
    return DEFAULT_MODELS[provider_name]


def build_provider(name: str, *, settings: Settings, base_url: str | None = None,
                   check_only: bool = False) -> Provider | None:
    """Create the named provider from settings.

    Args:
        name: one of ``anthropic``, ``openai``, ``replay``, ``exchange``, ``scripted``.
        settings: keys, base URLs, timeout and folders.
        base_url: overrides the configured base URL (anthropic/openai only).
        check_only: only check that it could be built (name, key) and return None, without
            importing an SDK (seconds that a run whose stages are all reused never needs).

    Returns:
        A provider ready to wrap in a ``Gateway`` (None with ``check_only``).

    Raises:
        UserError: unknown provider, or its API key is not set.
    """
    _check_name(name)
    timeout = settings.request_timeout_seconds
    if name == "anthropic":
        key = _secret(settings.anthropic_api_key)
        if key is None:
            raise UserError("ANTHROPIC_API_KEY is not set: export it, "
                            "or run the offline example with --provider replay")
        if check_only:
            return None
        from sopforge.llm.providers.anthropic import AnthropicProvider  # slow import: only when used

        return AnthropicProvider(key, base_url or settings.anthropic_base_url, timeout)
    if name == "openai":
        url = base_url or settings.openai_base_url
        key = _secret(settings.openai_api_key)
        if key is None:
            if not url:
                raise UserError("OPENAI_API_KEY is not set: export it (or point --base-url at an "
                                "OpenAI-compatible server), or run the offline example with --provider replay")
            key = PLACEHOLDER_KEY
        if check_only:
            return None
        from sopforge.llm.providers.openai import OpenAIProvider  # slow import: only when used

        return OpenAIProvider(key, url, timeout)
    if name == "replay":
        return ReplayProvider(settings.resolved_recordings_dir)
    if name == "exchange":
        return ExchangeProvider(settings.resolved_exchange_dir, wait_seconds=settings.exchange_wait_seconds)
    # From the command line there is nothing to script, so it fails on first use with a
    # message; from Python, construct ScriptedProvider(responses) directly instead.
    return ScriptedProvider([])


# The SDK behind each provider that has one: seconds to import (openai 0.3 s, anthropic 1.2 s here).
SDK_MODULES = {"anthropic": "sopforge.llm.providers.anthropic", "openai": "sopforge.llm.providers.openai"}


def import_sdks(providers: Iterable[str]) -> None:
    """Import these providers' SDKs now: called while a starting Prefect server comes up, where the
    first stage would otherwise import it on the run's critical path (under the warm-up threads' load)."""
    for name in sorted(set(providers)):
        if name in SDK_MODULES:
            importlib.import_module(SDK_MODULES[name])


def build_gateway(settings: Settings, *, ledger: CallLedger | None = None, run_id: str | None = None,
                  provider: str | Provider | None = None, base_url: str | None = None,
                  sleep: Callable[[float], None] | None = None) -> Gateway:
    """Create the ``LLMClient`` for a run.

    Args:
        settings: run settings; ``settings.provider`` is used when ``provider`` is None.
        ledger: the store (records calls, serves the response cache).
        run_id: run the calls belong to.
        provider: a provider name, or an already-built provider object.
        base_url: overrides the configured base URL when building by name.
        sleep: injectable wait function (tests).

    Raises:
        UserError: as ``build_provider``.
    """
    backend = provider if provider is not None and not isinstance(provider, str) else build_provider(
        provider or settings.provider, settings=settings, base_url=base_url)
    extra = {"sleep": sleep} if sleep is not None else {}
    return Gateway(backend, ledger=ledger, settings=settings, run_id=run_id, **extra)


def _check_name(name: str) -> None:
    if name not in PROVIDERS:
        raise UserError(f"unknown provider {name!r}: choose one of {', '.join(PROVIDERS)}")


def _secret(value: SecretStr | None) -> str | None:
    text = value.get_secret_value().strip() if value is not None else ""
    return text or None
