"""What the fake server sends and receives on the wire, in both protocols (``sopforge.llm.testserver``).

The scripted actions a test queues (``reply``, ``status``, ``slow``, ``drop``, ``malformed``), the
request as the server saw it, and the JSON bodies of a completion and of an error exactly as the
Anthropic Messages API and OpenAI Chat Completions return them. The accounting a real API does
(prompt cache, rate-limit quota) is in ``sopforge.llm.testserver_emulation``; the HTTP server that
puts them together in ``sopforge.llm.testserver``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from sopforge.llm.testserver_emulation import PromptCache

__all__ = ["Action", "ReceivedRequest", "WireProtocol", "completion_body", "drop", "error_body", "estimate_tokens",
           "malformed", "prompt_blocks", "reply", "request_text", "slow", "status"]

WireProtocol = Literal["anthropic", "openai"]


@dataclass(frozen=True)
class Action:
    """One scripted reaction to one request; build it with the helper functions below."""

    kind: Literal["reply", "status", "slow", "drop", "malformed"]
    text: str = ""
    status: int = 200
    seconds: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    message: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int = 0
    body: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any] | str], ...] = ()  # (name, arguments or raw arguments text)


def reply(text: str, *, input_tokens: int | None = None, output_tokens: int | None = None,
          cached_tokens: int = 0) -> Action:
    """A 200 with a well-formed completion whose text is ``text``.

    Token counts default to ``len(chars) // 4`` of the request and the reply.
    """
    return Action("reply", text=text, input_tokens=input_tokens, output_tokens=output_tokens,
                  cached_tokens=cached_tokens)


def status(code: int, *, retry_after: float | str | None = None, retry_after_ms: float | None = None,
           message: str | None = None) -> Action:
    """An error response with the protocol's error body and optional retry headers."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    return Action("status", status=code, headers=headers, message=message)


def slow(seconds: float, text: str = "slow reply") -> Action:
    """Wait ``seconds`` before replying (exercises client timeouts and concurrency)."""
    return Action("slow", text=text, seconds=seconds)


def drop() -> Action:
    """Close the connection after reading the request, without any HTTP response."""
    return Action("drop")


def malformed(body: str = "<html>upstream proxy hiccup</html>") -> Action:
    """A 200 whose body is not JSON."""
    return Action("malformed", body=body)


@dataclass
class ReceivedRequest:
    """What the server saw: used by tests to count HTTP attempts and inspect payloads."""

    protocol: WireProtocol
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 408: "timeout_error", 413: "request_too_large",
                429: "rate_limit_error", 529: "overloaded_error"}


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's or system prompt's content as text blocks (a plain string is one block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def prompt_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(text, cache breakpoint after it) of every block the model reads, in order."""
    out = [(b.get("text", ""), "cache_control" in b) for b in _blocks(body.get("system"))]
    for message in body.get("messages") or []:
        head = f"\n[{message.get('role')}]\n"
        for block in _blocks(message.get("content")):
            out.append((head + str(block.get("text", "")), "cache_control" in block))
            head = ""
    return out


def request_text(body: dict[str, Any]) -> str:
    return "".join(text for text, _ in prompt_blocks(body))




def completion_body(protocol: str, request: dict[str, Any], action: Action, seq: int,
                    cache: PromptCache | None = None) -> dict[str, Any]:
    """The JSON a real server would return for a successful completion.

    Token counts: the action's when scripted, else about four characters per token; cached
    tokens: the action's when scripted, else what ``cache`` accounts.
    """
    model = request.get("model") or "fake-model"
    tokens_in = action.input_tokens if action.input_tokens is not None else estimate_tokens(request_text(request))
    text, cut = action.text, False
    budget = request.get("max_tokens") or request.get("max_completion_tokens")
    if isinstance(budget, int) and action.output_tokens is None and estimate_tokens(text) > budget:
        # Like the real APIs: an answer longer than max_tokens is cut there and says so.
        text, cut = text[:budget * 4], True
    tokens_out = action.output_tokens if action.output_tokens is not None else estimate_tokens(text)
    if protocol == "anthropic":
        read, written = action.cached_tokens, 0
        if cache is not None and not action.cached_tokens and action.input_tokens is None:
            read, written = cache.anthropic(prompt_blocks(request))
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if action.text or not action.tool_calls \
            else []
        content += [{"type": "tool_use", "id": f"toolu_{seq}_{i}", "name": name, "input": arguments}
                    for i, (name, arguments) in enumerate(action.tool_calls)]
        return {
            "id": f"msg_fake_{seq}", "type": "message", "role": "assistant", "model": model,
            "content": content,
            "stop_reason": "tool_use" if action.tool_calls else "max_tokens" if cut else "end_turn",
            "stop_sequence": None,
            # Anthropic's input_tokens counts only what was neither read from nor written to the cache.
            "usage": {"input_tokens": max(0, tokens_in - read - written), "output_tokens": tokens_out,
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": written},
        }
    cached = action.cached_tokens
    if cache is not None and not cached and action.input_tokens is None:
        cached = min(tokens_in, cache.openai(request_text(request)))
    message: dict[str, Any] = {"role": "assistant", "content": text if action.text or not action.tool_calls
                               else None}
    if action.tool_calls:
        message["tool_calls"] = [{"id": f"call_{seq}_{i}", "type": "function", "function": {
            "name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}
            for i, (name, arguments) in enumerate(action.tool_calls)]
    return {
        "id": f"chatcmpl-fake-{seq}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if action.tool_calls else "length" if cut else "stop",
                     "logprobs": None}],
        "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                  "total_tokens": tokens_in + tokens_out,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


def error_body(protocol: str, code: int, message: str) -> dict[str, Any]:
    """The JSON error envelope each API uses."""
    kind = _ERROR_TYPES.get(code, "api_error")
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
