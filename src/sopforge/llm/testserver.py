"""A scriptable local HTTP server that speaks the Anthropic and OpenAI wire protocols.

It lets the real SDKs be tested end to end without a network: tests queue actions
(``reply``, ``status``, ``slow``, ``drop``, ``malformed``) that are consumed one per request,
and an optional ``responder`` answers once the queue is empty (flow tests answer by stage).
It binds to 127.0.0.1 only and ships in the package so later stages' tests can script it.

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
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

WireProtocol = Literal["anthropic", "openai"]
Responder = Callable[[dict[str, Any], str], str]


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


def _request_text(body: dict[str, Any]) -> str:
    parts = [body.get("system") or ""]
    for message in body.get("messages") or []:
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def completion_body(protocol: str, request: dict[str, Any], action: Action, seq: int) -> dict[str, Any]:
    """The JSON a real server would return for a successful completion."""
    model = request.get("model") or "fake-model"
    tokens_in = action.input_tokens if action.input_tokens is not None else _estimate_tokens(_request_text(request))
    tokens_out = action.output_tokens if action.output_tokens is not None else _estimate_tokens(action.text)
    if protocol == "anthropic":
        return {
            "id": f"msg_fake_{seq}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": action.text}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out,
                      "cache_read_input_tokens": action.cached_tokens, "cache_creation_input_tokens": 0},
        }
    return {
        "id": f"chatcmpl-fake-{seq}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": action.text},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                  "total_tokens": tokens_in + tokens_out,
                  "prompt_tokens_details": {"cached_tokens": action.cached_tokens}},
    }


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

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
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
        with owner._track_in_flight():
            self._act(owner, protocol, body or {})

    def _act(self, owner: FakeLLMServer, protocol: str, body: dict[str, Any]) -> None:
        action, seq = owner._next_action(body, protocol)
        if action.kind == "drop":
            self.close_connection = True
            return
        if action.kind == "malformed":
            self._send(200, action.body.encode(), "application/json")
            return
        if action.kind == "status":
            message = action.message or f"FakeLLMServer scripted HTTP {action.status}"
            self._send_json(action.status, error_body(protocol, action.status, message), action.headers)
            return
        if action.kind == "slow" and owner._stopping.wait(action.seconds):
            self.close_connection = True
            return
        self._send_json(200, completion_body(protocol, body, action, seq))

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

    Attributes:
        requests: every request received, in arrival order (``ReceivedRequest``).
        max_in_flight: the most requests handled at the same time so far.
    """

    def __init__(self, responder: Responder | None = None):
        self.responder = responder
        self.requests: list[ReceivedRequest] = []
        self.max_in_flight = 0
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
                return reply(self.responder(body, protocol)), seq
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
