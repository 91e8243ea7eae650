"""OpenAI Chat Completions provider, through the official SDK.

Works with any OpenAI-compatible server (vLLM, Ollama, LiteLLM) by pointing ``base_url`` at
its ``/v1`` root; those servers ignore the key, so the factory passes a placeholder.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from sopforge.errors import ProviderError
from sopforge.llm.limits import RateLimitInfo
from sopforge.llm.providers._http import (
    as_int, json_body, malformed, sdk_errors,
)
from sopforge.llm.types import LLMRequest, LLMResponse, Message, ToolCall

NAME = "openai"


class OpenAIProvider:
    """Calls ``POST {base_url}/chat/completions`` once per ``send``; the gateway does retries.

    Args:
        api_key: the API key; held by the SDK client only, never logged or recorded.
        base_url: API root including ``/v1`` (``None`` = api.openai.com or ``OPENAI_BASE_URL``).
        timeout: seconds before one HTTP attempt is abandoned (then retried by the gateway).
    """

    name = NAME
    rate_limited = True
    applies_temperature = True

    def __init__(self, api_key: str, base_url: str | None, timeout: float):
        self.base_url = base_url
        self.timeout = timeout
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def _errors(self):
        """Map this SDK's exceptions to ProviderError (a context manager)."""
        return sdk_errors(NAME, self.base_url, self.timeout, openai, openai.OpenAIError)

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={self.base_url!r}, timeout={self.timeout})"

    def send(self, request: LLMRequest) -> LLMResponse:
        """Send one chat completion request.

        Args:
            request: the prompt and sampling parameters; the system prompt becomes a
                ``system`` message.

        Returns:
            The first choice's text with usage and the raw JSON body.

        Raises:
            ProviderError: on any HTTP, transport or body problem; ``retryable`` says whether
                trying again can help.
        """
        with self._errors():
            raw = self._client.chat.completions.with_raw_response.create(**self.chat_body(request))
            text, headers = raw.http_response.text, raw.http_response.headers
        response = parse_chat_completion(text, request)
        return response.model_copy(update={"rate_limit": RateLimitInfo.from_headers(headers)})

    def chat_body(self, request: LLMRequest) -> dict[str, Any]:
        """The chat completion request body of ``request`` (interactive and batched alike)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        # OpenAI caches the longest prefix it has seen (from 1024 tokens) by itself: nothing to mark.
        for m in request.messages:
            messages.extend(chat_messages(m))
        # api.openai.com deprecated max_tokens (its reasoning models reject it) while most
        # compatible servers (vLLM, Ollama) only understand max_tokens: pick by endpoint.
        budget = "max_tokens" if self.base_url else "max_completion_tokens"
        body: dict[str, Any] = {"model": request.model, "messages": messages, "temperature": request.temperature,
                                budget: request.max_tokens}
        if request.tools is not None:
            body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                               "parameters": t.input_schema}} for t in request.tools]
        return body

    # -- the Batch API (sopforge.llm.batch) --------------------------------------------------------
    def submit_batch(self, requests: dict[str, LLMRequest]) -> str:
        """Upload the requests as a JSONL file and create a batch job; returns its id."""
        lines = "".join(json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                                    "body": self.chat_body(r)}) + "\n" for cid, r in requests.items())
        with self._errors():
            uploaded = self._client.files.create(file=("sopforge-batch.jsonl", lines.encode()), purpose="batch")
            return self._client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                               completion_window="24h").id

    def batch_status(self, job_id: str) -> str:
        """``pending``, ``ended``, or the terminal status of a job that will never answer."""
        with self._errors():
            status = self._client.batches.retrieve(job_id).status
        if status == "completed":
            return "ended"
        return status if status in ("failed", "expired", "cancelled") else "pending"

    def batch_results(self, job_id: str, requests: dict[str, LLMRequest]) -> dict[str, LLMResponse | ProviderError]:
        """Each request's answer (or error) by custom id, costed later at batch prices."""
        with self._errors():
            job = self._client.batches.retrieve(job_id)
            text = self._client.files.content(job.output_file_id).text if job.output_file_id else ""
        found: dict[str, LLMResponse | ProviderError] = {}
        for line in filter(None, text.splitlines()):
            item = json.loads(line)
            request = requests.get(item.get("custom_id"))
            if request is None:
                continue
            response = item.get("response") or {}
            if item.get("error") or response.get("status_code") != 200:
                found[item["custom_id"]] = ProviderError(f"{NAME} batch {job_id}: request failed: "
                                                         f"{item.get('error') or response.get('status_code')}",
                                                         retryable=True)
            else:
                parsed = parse_chat_completion(json.dumps(response.get("body") or {}), request)
                found[item["custom_id"]] = parsed.model_copy(update={"batch_id": job_id})
        return found


def chat_messages(message: Message) -> list[dict[str, Any]]:
    """One sopforge message as chat messages: tool results become ``tool`` messages (before the
    turn's text), an assistant turn's calls its ``tool_calls``."""
    out: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": r.call_id,
                                  "content": f"ERROR: {r.content}" if r.is_error and not r.content.startswith("ERROR:")
                                  else r.content}
                                 for r in message.tool_results]
    if message.tool_calls:
        out.append({"role": "assistant", "content": message.content or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments)}}
            for c in message.tool_calls]})
    elif message.content or not message.tool_results:
        out.append({"role": message.role, "content": message.content})
    return out


def _tool_calls(message: dict[str, Any]) -> list[ToolCall]:
    calls = []
    for i, item in enumerate(message.get("tool_calls") or []):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            continue
        raw = function.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            arguments = None
        fields = {"arguments": arguments} if isinstance(arguments, dict) else {"raw_arguments": str(raw)}
        calls.append(ToolCall(id=str(item.get("id") or f"call_{i}"), name=str(function.get("name") or ""), **fields))
    return calls


def parse_chat_completion(text: str, request: LLMRequest) -> LLMResponse:
    """Turn a chat.completion success body into an ``LLMResponse``.

    Raises:
        ProviderError: retryable "malformed response body" when the body has no choice/message.
    """
    body = json_body(NAME, text)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed(NAME, "no 'choices'")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise malformed(NAME, "first choice has no 'message'")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    return LLMResponse(
        text=message.get("content") or "",
        provider=NAME,
        model=str(body.get("model") or request.model),
        input_tokens=as_int(usage.get("prompt_tokens")),
        output_tokens=as_int(usage.get("completion_tokens")),
        cached_tokens=as_int(details.get("cached_tokens")),
        raw=body,
        tool_calls=_tool_calls(message),
        stop_reason=choices[0].get("finish_reason"),
    )
