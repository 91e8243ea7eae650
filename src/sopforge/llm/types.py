"""Data types shared by every LLM provider, the gateway and the store.

Nothing here talks to a network; providers live in their own modules.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(value: Any) -> str:
    return sha256_text(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))


class ToolSpec(BaseModel):
    """A tool the model may call (native tool use: Anthropic ``tools``, OpenAI function calling)."""

    name: str = Field(description="Tool name.")
    description: str = Field("", description="What the tool does, as the model reads it.")
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}},
                                         description="JSON Schema of the arguments.")


class ToolCall(BaseModel):
    """One tool call the model asked for."""

    id: str = Field(description="The call's id, echoed by its result.")
    name: str = Field(description="Tool name as the model wrote it.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments, when they were a JSON object.")
    raw_arguments: str | None = Field(None, description=(
        "The arguments as written when they were not a JSON object (the caller reports that to the model)."))


class ToolResult(BaseModel):
    """What a tool call returned, sent back to the model."""

    call_id: str = Field(description="ToolCall.id of the call.")
    content: str = Field(description="The result as text (JSON for structured results).")
    is_error: bool = Field(False, description="The call failed (bad arguments, unknown tool, the tool raised).")


class Message(BaseModel):
    role: Literal["user", "assistant"] = Field(description="Chat role.")
    content: str = Field(description="Message text.")
    cache_prefix: int | None = Field(None, exclude=True, description=(
        "Characters at the start of ``content`` shared with the stage's other prompts (marked for the "
        "provider's prompt cache). Not part of the prompt's identity: it changes how the prompt is sent, "
        "never what it says."))
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls of an assistant turn.")
    tool_results: list[ToolResult] = Field(default_factory=list, description=(
        "Results of the previous assistant turn's tool calls, sent in a user turn (before ``content``)."))

    @model_serializer(mode="wrap")
    def _tool_fields_only_when_used(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A text turn dumps as {role, content}, exactly as before tool use existed: prompt hashes
        # (replay matches recordings by them), the ledger and every caller see the same thing.
        data = handler(self)
        for key in ("tool_calls", "tool_results"):
            if not data.get(key):
                data.pop(key, None)
        return data

    def payload(self) -> dict[str, Any]:
        """The message as the prompt's identity: role and content, and tool calls and results only
        when there are any (so prompts without tools hash exactly as before tools existed)."""
        return self.model_dump()


class LLMRequest(BaseModel):
    """One request to a model, with the identity needed for caching and replay."""

    system: str | None = Field(None, description="System prompt, if any.")
    messages: list[Message] = Field(description="Conversation so far; the last message is the user's.")
    model: str = Field(description="Model name as the provider knows it.")
    temperature: float = Field(0.1, description="Sampling temperature.")
    max_tokens: int = Field(8192, description="Completion budget.")
    call_key: str = Field(description="Stable key: '<theme_slug>/<stage>/<item>/a<attempt>'. Replay matches on it.")
    stage: str = Field(description="Pipeline stage that made the call.")
    attempt: int = Field(1, description="Re-ask attempt number (1 = first ask).")
    template_id: str | None = Field(None, description="Prompt template id, e.g. 'teller/context'.")
    template_hash: str | None = Field(None, description="sha256 of the template source.")
    tools: list[ToolSpec] | None = Field(None, description="Tools offered for native tool use (None: a text turn).")

    def prompt_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"system": self.system, "messages": [m.payload() for m in self.messages]}
        if self.tools is not None:
            payload["tools"] = [t.model_dump() for t in self.tools]
        return payload

    def prompt_hash(self) -> str:
        """Hash of what the model reads (system + messages): checked by replay."""
        return sha256_json(self.prompt_payload())

    def request_hash(self, provider: str) -> str:
        """Hash of everything that changes the answer: the response-cache key."""
        return sha256_json({
            "provider": provider, "model": self.model, "temperature": self.temperature,
            "max_tokens": self.max_tokens, **self.prompt_payload(),
        })


class LLMResponse(BaseModel):
    text: str = Field(description="The model's raw text answer.")
    provider: str = Field(description="Provider that answered.")
    model: str = Field(description="Model that answered (as reported by the provider when it says).")
    input_tokens: int = Field(0, description="Prompt tokens billed.")
    output_tokens: int = Field(0, description="Completion tokens billed.")
    cached_tokens: int = Field(0, description="Prompt tokens served from the provider's prompt cache (part of input_tokens).")
    cache_write_tokens: int = Field(0, description="Prompt tokens written to the provider's prompt cache (Anthropic; part of input_tokens).")
    latency_ms: float = Field(0.0, description="Wall time of the successful HTTP exchange.")
    transport_attempts: int = Field(1, description="HTTP attempts including retries.")
    cost_usd: float = Field(0.0, description="Estimated cost from the price table.")
    from_cache: bool = Field(False, description="True when served from sopforge's response cache (no new call).")
    raw: dict[str, Any] | None = Field(None, description="Raw response body, when the provider returns JSON.")
    batch_id: str | None = Field(None, description="The provider batch job that answered (batch APIs are half price).")
    rate_limit: Any = Field(None, exclude=True, description="Rate-limit headers of the response (RateLimitInfo).")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls the model asked for, in order.")
    stop_reason: str | None = Field(None, description="Why the model stopped (end_turn, tool_use, max_tokens...).")


class LLMCallRecord(BaseModel):
    """One row of the ``llm_calls`` table. Never holds secrets."""

    id: str
    run_id: str | None = None
    call_key: str
    request_hash: str
    stage: str
    family: str | None = None  # the benchmark family of the stage; None for shared stages
    attempt: int = 1
    template_id: str | None = None
    template_hash: str | None = None
    provider: str
    model: str
    params: dict[str, Any] = Field(default_factory=dict)
    prompt: dict[str, Any] = Field(default_factory=dict)
    response: str | None = None
    raw: dict[str, Any] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    batch_id: str | None = None
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    transport_attempts: int = 1
    error: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # the answer's tool calls (ToolCall dumps), None for text turns
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))


class LLMClient(Protocol):
    """The one seam for LLMs: everything outside ``sopforge.llm`` depends only on this."""

    provider: str

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Return the model's answer or raise ``ProviderError`` / ``ResponsePending``."""
        ...


class CallLedger(Protocol):
    """Where the gateway records calls and looks up cached responses (the Store implements it).

    A ledger may also offer ``claim(request_hash, *, max_wait)``: a context manager held while the
    request is sent, yielding the answer another holder recorded while this caller waited for it
    (``sopforge.store.ledger``); the gateway uses it when present.
    """

    def cached_response(self, request_hash: str) -> LLMCallRecord | None: ...

    def record_call(self, record: LLMCallRecord) -> None: ...
