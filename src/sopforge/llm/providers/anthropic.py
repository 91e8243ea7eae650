"""Anthropic Messages API provider, through the official SDK.

The SDK sends API version 2026-10-21, which rejects ``temperature`` (and the SDK no longer
accepts it), so the requested temperature is part of the cache key and the record but is
not sent; ``applies_temperature`` tells the gateway to say so in the recorded params.
"""

from __future__ import annotations

from typing import Any

import anthropic

from sopforge.errors import ProviderError
from sopforge.llm.providers._http import as_int, json_body, malformed, server_message, status_error
from sopforge.llm.types import LLMRequest, LLMResponse

NAME = "anthropic"


class AnthropicProvider:
    """Calls ``POST /v1/messages`` once per ``send``; the gateway does retries.

    Args:
        api_key: the Anthropic API key; held by the SDK client only, never logged or recorded.
        base_url: API root (``None`` = the SDK default, or ``ANTHROPIC_BASE_URL``).
        timeout: seconds before one HTTP attempt is abandoned (then retried by the gateway).
    """

    name = NAME
    rate_limited = True
    applies_temperature = False

    def __init__(self, api_key: str, base_url: str | None, timeout: float):
        self.base_url = base_url
        self.timeout = timeout
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self.base_url!r}, timeout={self.timeout})"

    def send(self, request: LLMRequest) -> LLMResponse:
        """Send one Messages request.

        Args:
            request: the prompt and sampling budget.

        Returns:
            The concatenated text blocks with usage and the raw JSON body.

        Raises:
            ProviderError: on any HTTP, transport or body problem; ``retryable`` says whether
                trying again can help.
        """
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if request.system:
            kwargs["system"] = request.system
        try:
            raw = self._client.messages.with_raw_response.create(**kwargs)
            text = raw.http_response.text
        except anthropic.APIStatusError as err:
            raise status_error(NAME, err.status_code, err.api_message or server_message(err.body),
                               err.response.headers) from None
        except anthropic.APITimeoutError:
            raise ProviderError(f"{NAME}: no response within {self.timeout:g}s", retryable=True) from None
        except anthropic.APIConnectionError as err:
            cause = err.__cause__ or err
            raise ProviderError(f"{NAME}: connection failed: {cause}", retryable=True) from None
        except anthropic.APIResponseValidationError as err:
            raise malformed(NAME, str(err), err.status_code) from None
        except anthropic.AnthropicError as err:
            raise ProviderError(f"{NAME}: {type(err).__name__}: {err}", retryable=False) from None
        return parse_message(text, request)


def parse_message(text: str, request: LLMRequest) -> LLMResponse:
    """Turn a Messages API success body into an ``LLMResponse``.

    Raises:
        ProviderError: retryable "malformed response body" when the body is not a message.
    """
    body = json_body(NAME, text)
    content = body.get("content")
    if not isinstance(content, list):
        raise malformed(NAME, "no 'content' list")
    answer = "".join(block.get("text") or "" for block in content
                     if isinstance(block, dict) and block.get("type") == "text")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return LLMResponse(
        text=answer,
        provider=NAME,
        model=str(body.get("model") or request.model),
        input_tokens=as_int(usage.get("input_tokens")),
        output_tokens=as_int(usage.get("output_tokens")),
        cached_tokens=as_int(usage.get("cache_read_input_tokens")),
        raw=body,
    )
