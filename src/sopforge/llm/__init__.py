"""sopforge.llm: the one seam between the pipeline and language models.

Everything outside this package depends only on ``LLMClient`` (usually a ``Gateway`` built by
``build_gateway``); only modules in ``sopforge.llm.providers`` import the vendor SDKs.

Each name loads with its module on first access: the SDK-backed ``AnthropicProvider`` and
``OpenAIProvider`` take seconds to import, which offline runs should not pay.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sopforge.llm.budget import Budget
    from sopforge.llm.factory import DEFAULT_MODELS, PROVIDERS, build_gateway, build_provider, default_model
    from sopforge.llm.gateway import Gateway, GatewayStats, Provider
    from sopforge.llm.limits import LIMITERS, AdaptiveLimiter, RateLimitInfo, estimate_cost, match_price
    from sopforge.llm.providers import ExchangeProvider, ReplayProvider, ScriptedProvider, ScriptExhausted
    from sopforge.llm.providers.anthropic import AnthropicProvider
    from sopforge.llm.providers.openai import OpenAIProvider
    from sopforge.llm.types import (
        CallLedger, LLMCallRecord, LLMClient, LLMRequest, LLMResponse, Message, sha256_json, sha256_text,
    )

# Where each name lives. The store imports ``sopforge.llm.types`` in every command; loading the
# gateway, settings and batch machinery with it cost the commands that only read 0.15 s each.
_HOME = {
    **dict.fromkeys(("DEFAULT_MODELS", "PROVIDERS", "build_gateway", "build_provider", "default_model"), "factory"),
    **dict.fromkeys(("Gateway", "GatewayStats", "Provider"), "gateway"),
    "Budget": "budget",
    **dict.fromkeys(("LIMITERS", "AdaptiveLimiter", "RateLimitInfo", "estimate_cost", "match_price"), "limits"),
    **dict.fromkeys(("ExchangeProvider", "ReplayProvider", "ScriptedProvider", "ScriptExhausted",
                     "AnthropicProvider", "OpenAIProvider"), "providers"),
    **dict.fromkeys(("CallLedger", "LLMCallRecord", "LLMClient", "LLMRequest", "LLMResponse", "Message",
                     "sha256_json", "sha256_text"), "types"),
}

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
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
