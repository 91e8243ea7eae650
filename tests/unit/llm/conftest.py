"""Fixtures for the LLM gateway tests: an in-memory ledger, a fake clock, a local server.

Helpers are handed out as fixtures (not imported) so the tests work in any pytest import mode.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sopforge.llm.providers.anthropic import AnthropicProvider
from sopforge.llm.providers.openai import OpenAIProvider
from sopforge.llm.testserver import FakeLLMServer
from sopforge.llm.types import LLMCallRecord, LLMRequest, Message
from sopforge.settings import Settings

API_KEY = "sk-test-DO-NOT-LEAK-4f9c2e"


class InMemoryLedger:
    """A ``CallLedger`` in a list; the DuckDB store implements the same two methods."""

    def __init__(self) -> None:
        self.records: list[LLMCallRecord] = []
        self._lock = threading.Lock()

    def cached_response(self, request_hash: str) -> LLMCallRecord | None:
        with self._lock:
            for record in reversed(self.records):
                if record.request_hash == request_hash and record.error is None:
                    return record
        return None

    def record_call(self, record: LLMCallRecord) -> None:
        with self._lock:
            self.records.append(record)


class FakeClock:
    """Monotonic time that only moves when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += seconds


class SleepRecorder:
    """An injected ``sleep`` that returns at once, so retry tests cost no wall time."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, seconds: float) -> None:
        with self._lock:
            self.calls.append(seconds)


def build_settings(tmp_path: Path, **overrides) -> Settings:
    """Fast, isolated settings: nothing read from the developer's environment or home."""
    values = dict(
        home=tmp_path / "home", anthropic_api_key=None, openai_api_key=None,
        anthropic_base_url=None, openai_base_url=None,
        max_retries=3, backoff_base_seconds=0.01, backoff_max_seconds=5.0,
        requests_per_minute=60_000.0, max_concurrency=4, request_timeout_seconds=5.0,
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)


def build_request(prompt: str = "Name three refill steps.", *, call_key: str = "pharmacy_refills/context/main/a1",
                 model: str = "claude-sonnet-4-5", system: str | None = "You write SOPs.", **kw) -> LLMRequest:
    return LLMRequest(system=system, messages=[Message(role="user", content=prompt)], model=model,
                      call_key=call_key, stage=call_key.split("/")[1], **kw)


def build_http_provider(protocol: str, server: FakeLLMServer, *, timeout: float = 5.0, key: str = API_KEY):
    if protocol == "anthropic":
        return AnthropicProvider(key, server.anthropic_base_url, timeout)
    return OpenAIProvider(key, server.openai_base_url, timeout)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


@pytest.fixture
def ledger() -> InMemoryLedger:
    return InMemoryLedger()


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return build_settings(tmp_path)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """``make_settings(max_retries=1, ...)``: isolated settings with overrides."""
    return lambda **overrides: build_settings(tmp_path, **overrides)


@pytest.fixture
def make_request() -> Callable[..., LLMRequest]:
    """``make_request(prompt, call_key=..., model=..., system=..., **LLMRequest fields)``."""
    return build_request


@pytest.fixture
def http_provider(server: FakeLLMServer) -> Callable[..., object]:
    """``http_provider("anthropic" | "openai", timeout=..., key=...)`` pointed at ``server``."""
    return lambda protocol, **kw: build_http_provider(protocol, server, **kw)


@pytest.fixture
def api_key() -> str:
    return API_KEY


@pytest.fixture(params=["anthropic", "openai"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param
