"""LLM providers: each has ``name`` and ``send(request) -> LLMResponse``.

Optional attributes the gateway reads: ``rate_limited`` (apply the client-side rate limit),
``applies_temperature`` (whether the requested temperature reaches the model) and
``base_url`` (recorded with each call).

The SDK-backed providers are imported on first use: importing ``anthropic`` and ``openai``
takes several seconds, which every CLI command (and every offline replay run) would pay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sopforge.llm.providers.exchange import ExchangeProvider
from sopforge.llm.providers.replay import ReplayProvider
from sopforge.llm.providers.scripted import ScriptedProvider, ScriptExhausted

if TYPE_CHECKING:
    from sopforge.llm.providers.anthropic import AnthropicProvider
    from sopforge.llm.providers.openai import OpenAIProvider

_LAZY = {
    "AnthropicProvider": "sopforge.llm.providers.anthropic",
    "OpenAIProvider": "sopforge.llm.providers.openai",
}

__all__ = [
    "AnthropicProvider",
    "ExchangeProvider",
    "OpenAIProvider",
    "ReplayProvider",
    "ScriptExhausted",
    "ScriptedProvider",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
