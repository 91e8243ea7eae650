"""sopforge.llm: the one seam between the pipeline and language models.

Everything outside this package depends only on ``LLMClient`` (usually a ``Gateway`` built by
``build_gateway``); only modules in ``sopforge.llm.providers`` import the vendor SDKs.

The SDK-backed ``AnthropicProvider`` and ``OpenAIProvider`` load on first access (the SDKs
take seconds to import, which offline runs should not pay).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sopforge.llm.factory import DEFAULT_MODELS, PROVIDERS, build_gateway, build_provider, default_model
from sopforge.llm.gateway import Gateway, GatewayStats, Provider
from sopforge.llm.budget import Budget
from sopforge.llm.limits import LIMITERS, AdaptiveLimiter, RateLimitInfo, estimate_cost, match_price
from sopforge.llm.providers import ExchangeProvider, ReplayProvider, ScriptedProvider, ScriptExhausted
from sopforge.llm.types import (
    CallLedger,
    LLMCallRecord,
    LLMClient,
    LLMRequest,
    LLMResponse,
    Message,
    sha256_json,
    sha256_text,
)

if TYPE_CHECKING:
    from sopforge.llm.providers.anthropic import AnthropicProvider
    from sopforge.llm.providers.openai import OpenAIProvider

__all__ = [
    "DEFAULT_MODELS",
    "PROVIDERS",
    "AnthropicProvider",
    "CallLedger",
    "ExchangeProvider",
    "Gateway",
    "GatewayStats",
    "LLMCallRecord",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "OpenAIProvider",
    "Provider",
    "AdaptiveLimiter",
    "Budget",
    "LIMITERS",
    "RateLimitInfo",
    "ReplayProvider",
    "ScriptExhausted",
    "ScriptedProvider",
    "build_gateway",
    "build_provider",
    "default_model",
    "estimate_cost",
    "match_price",
    "sha256_json",
    "sha256_text",
]


def __getattr__(name: str) -> Any:
    if name in ("AnthropicProvider", "OpenAIProvider"):
        from sopforge.llm import providers

        return getattr(providers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
