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
from sopforge.llm.types import LLMRequest, LLMResponse

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
        messages.extend({"role": m.role, "content": m.content} for m in request.messages)
        # api.openai.com deprecated max_tokens (its reasoning models reject it) while most
        # compatible servers (vLLM, Ollama) only understand max_tokens: pick by endpoint.
        budget = "max_tokens" if self.base_url else "max_completion_tokens"
        return {"model": request.model, "messages": messages, "temperature": request.temperature,
                budget: request.max_tokens}

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
    )
