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

This module is the HTTP server; what goes over the wire (actions, completion and error bodies) is
``sopforge.llm.testserver_wire`` and the accounting (prompt cache, quota) is
``sopforge.llm.testserver_emulation``. Their public names are re-exported here.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sopforge.llm.testserver_batches import BatchBackend
from sopforge.llm.testserver_emulation import MIN_CACHEABLE_TOKENS, PromptCache, Quota, RateLimit
from sopforge.llm.testserver_wire import (Action, ReceivedRequest, WireProtocol, completion_body, drop, error_body,
                                          estimate_tokens, malformed, prompt_blocks, reply, request_text, slow,
                                          status)

__all__ = ["Action", "FakeLLMServer", "MIN_CACHEABLE_TOKENS", "PromptCache", "RateLimit", "ReceivedRequest",
           "Responder", "WireProtocol", "completion_body", "drop", "error_body", "malformed", "prompt_blocks",
           "reply", "slow", "status"]

# A responder returns the reply text, or an Action (e.g. testserver_agents.tool_reply: tool calls).
Responder = Callable[[dict[str, Any], str], "str | Action"]


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
        wait = owner.quota.admit(estimate_tokens(request_text(body)))
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
        self.responder = responder
        self.latency = latency
        self.batch_seconds = batch_seconds
        self.batches = BatchBackend(self)
        self.quota = Quota(rate_limit or RateLimit())
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
