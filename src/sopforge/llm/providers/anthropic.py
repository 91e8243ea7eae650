"""Anthropic Messages API provider, through the official SDK.

The SDK sends API version 2026-10-21, which rejects ``temperature`` (and the SDK no longer
accepts it), so the requested temperature is part of the cache key and the record but is
not sent; ``applies_temperature`` tells the gateway to say so in the recorded params.
"""

from __future__ import annotations

from typing import Any

import anthropic

from sopforge.errors import ProviderError
from sopforge.llm.limits import RateLimitInfo
from sopforge.llm.providers._http import (
    as_int, json_body, malformed, sdk_errors,
)
from sopforge.llm.types import LLMRequest, LLMResponse, Message, ToolCall

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

    def _errors(self):
        """Map this SDK's exceptions to ProviderError (a context manager)."""
        return sdk_errors(NAME, self.base_url, self.timeout, anthropic, anthropic.AnthropicError)

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
        kwargs = message_params(request)
        with self._errors():
            raw = self._client.messages.with_raw_response.create(**kwargs)
            text, headers = raw.http_response.text, raw.http_response.headers
        response = parse_message(text, request)
        return response.model_copy(update={"rate_limit": RateLimitInfo.from_headers(headers)})

    # -- Message Batches (sopforge.llm.batch) ------------------------------------------------------
    def submit_batch(self, requests: dict[str, LLMRequest]) -> str:
        """Create a message batch of the requests; returns its id."""
        with self._errors():
            return self._client.messages.batches.create(
                requests=[{"custom_id": cid, "params": message_params(r)} for cid, r in requests.items()]).id

    def batch_status(self, job_id: str) -> str:
        """``pending`` or ``ended`` (an ended batch reports each request's own outcome)."""
        with self._errors():
            status = self._client.messages.batches.retrieve(job_id).processing_status
        return "ended" if status == "ended" else "pending"

    def batch_results(self, job_id: str, requests: dict[str, LLMRequest]) -> dict[str, LLMResponse | ProviderError]:
        """Each request's answer (or error) by custom id."""
        found: dict[str, LLMResponse | ProviderError] = {}
        with self._errors():
            for item in self._client.messages.batches.results(job_id):
                request = requests.get(item.custom_id)
                if request is None:
                    continue
                if item.result.type == "succeeded":
                    parsed = parse_message(item.result.message.model_dump_json(), request)
                    found[item.custom_id] = parsed.model_copy(update={"batch_id": job_id})
                else:  # errored, canceled, expired: asked again (in a new batch) by the gateway's retries
                    found[item.custom_id] = ProviderError(f"{NAME} batch {job_id}: request {item.result.type}",
                                                          retryable=True)
        return found


CACHE_CONTROL = {"type": "ephemeral"}


def message_params(request: LLMRequest) -> dict[str, Any]:
    """The Messages API parameters of ``request``, with prompt-cache breakpoints.

    Every stage sends its long shared material in the first user message. That message is marked
    for Anthropic's prompt cache (``cache_control`` on its content block), and when its template
    marks where the shared prefix ends (``{# cache-break #}``, see ``sopforge.prompts``) the message
    is split there and the prefix alone is marked, so the other items of the stage (each SOP
    variant type, each dialogue) read the prefix from the cache too. Re-asks resend the first
    message unchanged and read it from the cache. A system prompt is marked as well. That is at
    most three of the four breakpoints a request may carry. Prompts below the model's minimum
    cacheable length are simply not cached.
    """
    messages: list[dict[str, Any]] = []
    for i, m in enumerate(request.messages):
        if i == 0 and m.role == "user" and not m.tool_results:
            cut = m.cache_prefix if m.cache_prefix and 0 < m.cache_prefix < len(m.content) else len(m.content)
            blocks = [{"type": "text", "text": m.content[:cut], "cache_control": CACHE_CONTROL}]
            if cut < len(m.content):
                blocks.append({"type": "text", "text": m.content[cut:]})
            messages.append({"role": "user", "content": blocks})
        elif m.tool_calls or m.tool_results:
            messages.append({"role": m.role, "content": tool_blocks(m)})
        else:
            messages.append({"role": m.role, "content": m.content})
    params: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens, "messages": messages}
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": CACHE_CONTROL}]
    if request.tools is not None:
        params["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                           for t in request.tools]
    return params


def tool_blocks(message: Message) -> list[dict[str, Any]]:
    """The content blocks of a turn with tool use: results first (the API wants them first in a user
    turn), then the text, then the calls of an assistant turn."""
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": r.call_id, "content": r.content,
                                     "is_error": r.is_error} for r in message.tool_results]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name,
                "input": c.arguments if c.raw_arguments is None else {}} for c in message.tool_calls]
    return blocks


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
    calls = [ToolCall(id=str(b.get("id") or f"toolu_{i}"), name=str(b.get("name") or ""),
                      **({"arguments": b["input"]} if isinstance(b.get("input"), dict)
                         else {"raw_arguments": str(b.get("input"))}))
             for i, b in enumerate(content) if isinstance(b, dict) and b.get("type") == "tool_use"]
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    # Anthropic's input_tokens excludes the tokens read from or written to the cache; sopforge's
    # input_tokens is every prompt token (as OpenAI counts), with the cached ones a part of it.
    read, written = as_int(usage.get("cache_read_input_tokens")), as_int(usage.get("cache_creation_input_tokens"))
    return LLMResponse(
        text=answer,
        provider=NAME,
        model=str(body.get("model") or request.model),
        input_tokens=as_int(usage.get("input_tokens")) + read + written,
        output_tokens=as_int(usage.get("output_tokens")),
        cached_tokens=read,
        cache_write_tokens=written,
        raw=body,
        tool_calls=calls,
        stop_reason=body.get("stop_reason"),
    )
