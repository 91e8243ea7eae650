"""A scriptable local HTTP server that speaks the Anthropic and OpenAI wire protocols.

It lets the real SDKs be tested end to end without a network: tests queue actions
(``reply``, ``status``, ``slow``, ``drop``, ``malformed``) that are consumed one per request,
and an optional ``responder`` answers once the queue is empty (flow tests answer by stage).
It binds to 127.0.0.1 only and ships in the package so later stages' tests can script it.

Like the real APIs it also
- sends rate-limit headers with every answer (OpenAI ``x-ratelimit-*``, Anthropic
  ``anthropic-ratelimit-*``) from a token bucket per server, and answers 429 with ``retry-after``
  when a request does not fit (``rate_limit=RateLimit(...)``; generous by default);
- accounts prompt caching: OpenAI reports the longest prefix (from 1024 tokens, in steps of 128)
  it saw before as ``prompt_tokens_details.cached_tokens``; Anthropic caches the prefix up to each
  ``cache_control`` breakpoint (from 1024 tokens) and reports ``cache_creation_input_tokens`` the
  first time and ``cache_read_input_tokens`` after;
- answers after ``latency`` seconds when asked to (benchmarks);
- serves both batch APIs (``sopforge.llm.testserver_batches``): OpenAI's files + batches,
  Anthropic's message batches.

Example:
    >>> with FakeLLMServer() as server:
    ...     server.enqueue(status(429, retry_after=1), reply("hello"))
    ...     client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from datetime import datetime, timezone
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

WireProtocol = Literal["anthropic", "openai"]
# A responder returns the reply text, or an Action (e.g. testserver_agents.tool_reply: tool calls).
Responder = Callable[[dict[str, Any], str], "str | Action"]


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


def _estimate_tokens(text: str) -> int:
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


def _request_text(body: dict[str, Any]) -> str:
    return "".join(text for text, _ in prompt_blocks(body))


MIN_CACHEABLE_TOKENS = 1024  # both providers' smallest cacheable prefix (Sonnet/Opus; GPT-4o family)


class PromptCache:
    """Both providers' prompt-cache accounting over the prompts one server has seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._openai: list[str] = []
        self._anthropic: set[str] = set()

    def openai(self, text: str) -> int:
        """Cached tokens: the longest prefix shared with an earlier prompt, in steps of 128 from 1024."""
        with self._lock:
            best = max((_common_prefix(text, seen) for seen in self._openai), default=0)
            self._openai.append(text)
        tokens = best // 4
        return 0 if tokens < MIN_CACHEABLE_TOKENS else tokens - tokens % 128

    def anthropic(self, blocks: list[tuple[str, bool]]) -> tuple[int, int]:
        """(read, written) tokens: each breakpoint's prefix is read when cached, else written."""
        read = written = 0
        prefix = ""
        with self._lock:
            for text, breakpoint in blocks:
                prefix += text
                tokens = _estimate_tokens(prefix)
                if not breakpoint or tokens < MIN_CACHEABLE_TOKENS:
                    continue
                if prefix in self._anthropic:
                    read, written = tokens, 0
                else:
                    self._anthropic.add(prefix)
                    written = tokens - read
        return read, written


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on the length of the equal prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def completion_body(protocol: str, request: dict[str, Any], action: Action, seq: int,
                    cache: PromptCache | None = None) -> dict[str, Any]:
    """The JSON a real server would return for a successful completion.

    Token counts: the action's when scripted, else about four characters per token; cached
    tokens: the action's when scripted, else what ``cache`` accounts.
    """
    model = request.get("model") or "fake-model"
    tokens_in = action.input_tokens if action.input_tokens is not None else _estimate_tokens(_request_text(request))
    text, cut = action.text, False
    budget = request.get("max_tokens") or request.get("max_completion_tokens")
    if isinstance(budget, int) and action.output_tokens is None and _estimate_tokens(text) > budget:
        # Like the real APIs: an answer longer than max_tokens is cut there and says so.
        text, cut = text[:budget * 4], True
    tokens_out = action.output_tokens if action.output_tokens is not None else _estimate_tokens(text)
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
        cached = min(tokens_in, cache.openai(_request_text(request)))
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


@dataclass(frozen=True)
class RateLimit:
    """The quota the fake server enforces (per minute, like both real APIs)."""

    requests_per_minute: int = 100_000
    tokens_per_minute: int = 100_000_000


class _Quota:
    """Token buckets for requests and tokens: refilled continuously, limit per minute."""

    def __init__(self, limit: RateLimit):
        self.limit = limit
        self._lock = threading.Lock()
        self._requests, self._tokens = float(limit.requests_per_minute), float(limit.tokens_per_minute)
        self._at = time.monotonic()
        self.rejected = 0

    def _refill(self) -> None:
        now = time.monotonic()
        self._requests = min(self.limit.requests_per_minute,
                             self._requests + (now - self._at) * self.limit.requests_per_minute / 60)
        self._tokens = min(self.limit.tokens_per_minute,
                           self._tokens + (now - self._at) * self.limit.tokens_per_minute / 60)
        self._at = now

    def admit(self, tokens: int) -> float:
        """0 when the request fits (and is counted), else the seconds until it would."""
        with self._lock:
            self._refill()
            tokens = min(tokens, self.limit.tokens_per_minute)
            if self._requests >= 1 and self._tokens >= tokens:
                self._requests -= 1
                self._tokens -= tokens
                return 0.0
            self.rejected += 1
            wait_requests = (1 - self._requests) * 60 / self.limit.requests_per_minute
            wait_tokens = (tokens - self._tokens) * 60 / self.limit.tokens_per_minute
            return max(wait_requests, wait_tokens, 0.001)

    def headers(self, protocol: str) -> dict[str, str]:
        with self._lock:
            self._refill()
            requests, tokens = int(self._requests), int(self._tokens)
        limit = self.limit
        reset_requests = (limit.requests_per_minute - requests) * 60 / limit.requests_per_minute
        reset_tokens = (limit.tokens_per_minute - tokens) * 60 / limit.tokens_per_minute
        if protocol == "anthropic":
            def at(seconds: float) -> str:
                return datetime.fromtimestamp(time.time() + seconds, timezone.utc).isoformat().replace("+00:00", "Z")
            return {"anthropic-ratelimit-requests-limit": str(limit.requests_per_minute),
                    "anthropic-ratelimit-requests-remaining": str(requests),
                    "anthropic-ratelimit-requests-reset": at(reset_requests),
                    "anthropic-ratelimit-input-tokens-limit": str(limit.tokens_per_minute),
                    "anthropic-ratelimit-input-tokens-remaining": str(tokens),
                    "anthropic-ratelimit-input-tokens-reset": at(reset_tokens),
                    "anthropic-ratelimit-tokens-limit": str(limit.tokens_per_minute),
                    "anthropic-ratelimit-tokens-remaining": str(tokens),
                    "anthropic-ratelimit-tokens-reset": at(reset_tokens)}
        return {"x-ratelimit-limit-requests": str(limit.requests_per_minute),
                "x-ratelimit-remaining-requests": str(requests),
                "x-ratelimit-reset-requests": f"{reset_requests:.3f}s",
                "x-ratelimit-limit-tokens": str(limit.tokens_per_minute),
                "x-ratelimit-remaining-tokens": str(tokens),
                "x-ratelimit-reset-tokens": f"{reset_tokens:.3f}s"}


def error_body(protocol: str, code: int, message: str) -> dict[str, Any]:
    """The JSON error envelope each API uses."""
    kind = _ERROR_TYPES.get(code, "api_error")
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as real APIs do: exercises connection reuse

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # tests read server.requests; stderr noise would hide real failures

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        handled = self.server.owner.batches.get(self.path)
        if handled is None:
            self._send_json(404, {"error": {"message": f"FakeLLMServer: unknown path {self.path}"}})
        else:
            self._reply(*handled)

    def _reply(self, code: int, payload: Any) -> None:
        if isinstance(payload, bytes):
            self._send(code, payload, "application/binary")
        else:
            self._send_json(code, payload)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        handled = self.server.owner.batches.post(self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
        if handled is not None:
            self._reply(*handled)
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if self.path.rstrip("/").endswith("/v1/messages"):
            protocol = "anthropic"
        elif self.path.rstrip("/").endswith("/chat/completions"):
            protocol = "openai"
        else:
            self._send_json(404, {"error": {"message": f"FakeLLMServer: unknown path {self.path}"}})
            return
        owner = self.server.owner
        owner._received(ReceivedRequest(protocol, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        started = time.perf_counter()
        with owner._track_in_flight():
            self._act(owner, protocol, body or {})
        with owner._lock:
            owner.service_seconds += time.perf_counter() - started

    def _act(self, owner: FakeLLMServer, protocol: str, body: dict[str, Any]) -> None:
        wait = owner.quota.admit(_estimate_tokens(_request_text(body)))
        if wait:
            headers = {**owner.quota.headers(protocol), "retry-after": str(max(1, round(wait))),
                       "retry-after-ms": str(int(wait * 1000))}
            self._send_json(429, error_body(protocol, 429, "FakeLLMServer: rate limit exceeded"), headers)
            return
        action, seq = owner._next_action(body, protocol)
        if action.kind == "drop":
            self.close_connection = True
            return
        if action.kind == "malformed":
            self._send(200, action.body.encode(), "application/json")
            return
        if action.kind == "status":
            message = action.message or f"FakeLLMServer scripted HTTP {action.status}"
            self._send_json(action.status, error_body(protocol, action.status, message),
                            {**owner.quota.headers(protocol), **action.headers})
            return
        delay = action.seconds if action.kind == "slow" else owner.latency
        if delay and owner._stopping.wait(delay):
            self.close_connection = True
            return
        self._send_json(200, completion_body(protocol, body, action, seq, owner.cache), owner.quota.headers(protocol))

    def _send_json(self, code: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(payload).encode(), "application/json", headers)

    def _send(self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(code)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (timeout test); nothing left to tell it.
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeLLMServer


class FakeLLMServer:
    """Threaded loopback server; use as a context manager.

    Args:
        responder: answers requests when the action queue is empty; receives the parsed
            request JSON and the protocol name ("anthropic" or "openai") and returns the text.
        latency: seconds every completion takes (scripted ``slow`` actions take their own).
        rate_limit: the quota to enforce with 429s and report in headers (generous by default).
        batch_seconds: how long a batch job stays in progress before its results are ready.

    Attributes:
        requests: every request received, in arrival order (``ReceivedRequest``).
        max_in_flight: the most requests handled at the same time so far.
        service_seconds: time spent answering (the server's own work and latency), summed over
            requests: what a benchmark subtracts to see the client's overhead.
        quota: the rate-limit state (``quota.rejected`` counts the 429s it answered).
        batches: the batch jobs (``batches.jobs``: id -> FakeBatch with its requests and polls).
        cache: the prompt-cache accounting.
    """

    def __init__(self, responder: Responder | None = None, *, latency: float = 0.0,
                 rate_limit: RateLimit | None = None, batch_seconds: float = 0.0):
        from sopforge.llm.testserver_batches import BatchBackend

        self.responder = responder
        self.latency = latency
        self.batch_seconds = batch_seconds
        self.batches = BatchBackend(self)
        self.quota = _Quota(rate_limit or RateLimit())
        self.cache = PromptCache()
        self.requests: list[ReceivedRequest] = []
        self.max_in_flight = 0
        self.service_seconds = 0.0
        self._in_flight = 0
        self._queue: deque[Action] = deque()
        self._lock = threading.Lock()
        self._seq = 0
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="FakeLLMServer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; interrupts any ``slow`` action in progress."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port chosen at start (raises when the server is not running)."""
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer is not running: call start() or use it as a context manager")
        return self._httpd.server_address[1]

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for ``anthropic.Anthropic(base_url=...)`` (the SDK appends /v1/messages)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """Base URL for ``openai.OpenAI(base_url=...)`` (the SDK appends /chat/completions)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------
    def enqueue(self, *actions: Action) -> FakeLLMServer:
        """Append actions; each request consumes one, in order."""
        with self._lock:
            self._queue.extend(actions)
        return self

    @property
    def pending_actions(self) -> int:
        """Scripted actions not yet consumed (a test can assert its script was used up)."""
        with self._lock:
            return len(self._queue)

    def _next_action(self, body: dict[str, Any], protocol: str) -> tuple[Action, int]:
        with self._lock:
            self._seq += 1
            seq = self._seq
            if self._queue:
                return self._queue.popleft(), seq
        if self.responder is not None:
            try:
                answer = self.responder(body, protocol)
                return (answer if isinstance(answer, Action) else reply(answer)), seq
            except Exception as err:  # noqa: BLE001 - reported to the client instead
                # Non-retryable, so the test fails at once with the responder's own error
                # instead of a dropped connection the client would retry.
                return status(400, message=f"FakeLLMServer responder raised {type(err).__name__}: {err}"), seq
        # Non-retryable on purpose: an unscripted request is a test bug and should fail fast.
        return status(400, message="FakeLLMServer: no scripted action left and no responder"), seq

    def _received(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    @contextmanager
    def _track_in_flight(self) -> Iterator[None]:
        # max_in_flight lets tests check the client's concurrency limit from the outside.
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
