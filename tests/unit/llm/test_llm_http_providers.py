"""The real Anthropic and OpenAI SDKs, through the gateway, against the local fake server."""

from __future__ import annotations

import threading

import pytest

from sopforge.errors import ProviderError
from sopforge.llm.gateway import Gateway
from sopforge.llm.testserver import drop, malformed, reply, slow, status

pytestmark = pytest.mark.timeout(30)

MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}


@pytest.fixture
def gateway_for(http_provider):
    """``gateway_for(protocol, settings, ledger=None, sleeps=None, timeout=5.0)``."""
    def build(protocol, settings, ledger=None, sleeps=None, timeout=5.0):
        extra = {"sleep": sleeps} if sleeps is not None else {}
        return Gateway(http_provider(protocol, timeout=timeout), ledger=ledger, settings=settings,
                       run_id="run-1", **extra)
    return build


@pytest.fixture
def request_for(make_request):
    """``request_for(protocol, prompt=..., **LLMRequest fields)`` with that protocol's model."""
    def build(protocol, prompt="Name three refill steps.", **kw):
        return make_request(prompt, model=MODELS[protocol], **kw)
    return build


def test_success_maps_text_usage_and_raw(protocol, server, settings, ledger, sleeps, gateway_for, request_for):
    server.enqueue(reply("Step 1: verify the prescription.", input_tokens=120, output_tokens=30, cached_tokens=40))
    gateway = gateway_for(protocol, settings, ledger, sleeps)

    response = gateway.complete(request_for(protocol))

    assert response.text == "Step 1: verify the prescription."
    assert response.provider == protocol
    assert response.model == MODELS[protocol]
    assert (response.input_tokens, response.output_tokens, response.cached_tokens) == (120, 30, 40)
    assert response.transport_attempts == 1 and not response.from_cache
    assert response.raw is not None and response.raw["usage"]
    [record] = ledger.records
    assert record.response == response.text and record.error is None and record.run_id == "run-1"
    assert record.params["base_url"].startswith("http://127.0.0.1:")
    assert record.params["max_tokens"] == 8192
    assert sleeps.calls == []


def test_wire_payload_carries_system_prompt_and_budget(protocol, server, settings, gateway_for, request_for):
    server.enqueue(reply("ok"))
    gateway_for(protocol, settings).complete(request_for(protocol, max_tokens=321))

    body = server.requests[0].json
    if protocol == "anthropic":
        assert server.requests[0].path == "/v1/messages"
        # The system prompt and the first user message are marked for Anthropic's prompt cache.
        assert body["system"] == [{"type": "text", "text": "You write SOPs.", "cache_control": {"type": "ephemeral"}}]
        assert body["messages"] == [{"role": "user", "content": [
            {"type": "text", "text": "Name three refill steps.", "cache_control": {"type": "ephemeral"}}]}]
        # API version 2026-10-21 rejects sampling parameters, so none is sent.
        assert "temperature" not in body
    else:
        assert server.requests[0].path == "/v1/chat/completions"
        assert body["messages"][0] == {"role": "system", "content": "You write SOPs."}
        assert body["messages"][1]["role"] == "user"
        assert body["temperature"] == pytest.approx(0.1)
    assert body["max_tokens"] == 321


def test_429_waits_at_least_retry_after_then_succeeds(protocol, server, settings, ledger, sleeps, gateway_for,
                                                     request_for):
    server.enqueue(status(429, retry_after=1), reply("after the limit"))
    gateway = gateway_for(protocol, settings, ledger, sleeps)

    response = gateway.complete(request_for(protocol))

    assert response.text == "after the limit"
    assert len(server.requests) == 2
    assert max(sleeps.calls) >= 1.0
    assert response.transport_attempts == 2
    [record] = ledger.records
    assert record.transport_attempts == 2 and record.error is None


@pytest.mark.parametrize("failure", [status(500), status(529), status(408), drop(), malformed(),
                                     malformed('{"id": "gateway-timeout-page"}')],
                         ids=["http500", "overloaded529", "http408", "dropped", "malformed", "json_without_content"])
def test_transient_failure_is_retried(protocol, failure, server, settings, ledger, sleeps, gateway_for, request_for):
    server.enqueue(failure, reply("recovered"))
    gateway = gateway_for(protocol, settings, ledger, sleeps)

    response = gateway.complete(request_for(protocol))

    assert response.text == "recovered"
    assert len(server.requests) == 2
    assert len(sleeps.calls) == 1
    assert len(ledger.records) == 1 and ledger.records[0].transport_attempts == 2


def test_malformed_body_error_names_the_problem(protocol, server, sleeps, gateway_for, request_for, make_settings):
    server.enqueue(malformed(), malformed())
    gateway = gateway_for(protocol, make_settings(max_retries=1), sleeps=sleeps)

    with pytest.raises(ProviderError, match="malformed response body") as info:
        gateway.complete(request_for(protocol))
    assert info.value.retryable


def test_slow_response_times_out_and_is_retried(protocol, server, settings, sleeps, gateway_for, request_for):
    server.enqueue(slow(2.0, "too late"), reply("in time"))
    gateway = gateway_for(protocol, settings, sleeps=sleeps, timeout=0.25)

    response = gateway.complete(request_for(protocol))

    assert response.text == "in time"
    assert len(server.requests) == 2


def test_bad_request_fails_at_once_with_status_and_server_message(protocol, server, settings, ledger, sleeps,
                                                                  gateway_for, request_for):
    server.enqueue(status(400, message="max_tokens: must be at most 64000"), reply("never sent"))
    gateway = gateway_for(protocol, settings, ledger, sleeps)

    with pytest.raises(ProviderError) as info:
        gateway.complete(request_for(protocol))

    assert not info.value.retryable and info.value.status == 400
    assert "400" in str(info.value) and "max_tokens: must be at most 64000" in str(info.value)
    assert len(server.requests) == 1 and sleeps.calls == []
    [record] = ledger.records
    assert record.error and "400" in record.error and record.response is None


def test_retries_exhausted_raises_and_records_the_failure(protocol, server, ledger, sleeps, gateway_for, request_for,
                                                         make_settings):
    settings = make_settings(max_retries=2)
    server.enqueue(status(503), status(503), status(503), reply("too late"))
    gateway = gateway_for(protocol, settings, ledger, sleeps)

    with pytest.raises(ProviderError, match="gave up after 3 attempts") as info:
        gateway.complete(request_for(protocol))

    assert info.value.status == 503 and info.value.retryable
    assert len(server.requests) == 3
    [record] = ledger.records
    assert record.error and "503" in record.error
    assert record.transport_attempts == 3
    stats = gateway.stats
    assert (stats.calls, stats.failures, stats.transport_attempts) == (1, 1, 3)


def test_identical_request_is_served_from_cache(protocol, server, settings, ledger, sleeps, gateway_for, request_for):
    server.enqueue(reply("paid once", input_tokens=100, output_tokens=10))
    gateway = gateway_for(protocol, settings, ledger, sleeps)

    first = gateway.complete(request_for(protocol))
    second = gateway.complete(request_for(protocol))

    assert len(server.requests) == 1
    assert not first.from_cache and second.from_cache
    assert second.text == "paid once" and second.cost_usd == 0.0 and second.transport_attempts == 0
    assert len(ledger.records) == 1
    assert gateway.stats.cache_hits == 1 and gateway.stats.calls == 1


def test_cost_comes_from_the_price_table_by_longest_prefix(protocol, server, ledger, gateway_for, make_settings,
                                                          make_request):
    prices = {"claude-sonnet-4-5": (3.0, 15.0), "claude": (99.0, 99.0),
              "gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6)}
    settings = make_settings(prices=prices)
    server.enqueue(reply("ok", input_tokens=1_000_000, output_tokens=2_000_000))
    model = {"anthropic": "claude-sonnet-4-5-20250929", "openai": "gpt-4o-mini-2024-07-18"}[protocol]
    gateway = gateway_for(protocol, settings, ledger)

    response = gateway.complete(make_request(model=model))

    expected = {"anthropic": 3.0 + 30.0, "openai": 0.15 + 1.2}[protocol]
    assert response.cost_usd == pytest.approx(expected)
    assert ledger.records[0].cost_usd == pytest.approx(expected)
    assert gateway.stats.cost_usd == pytest.approx(expected)


@pytest.mark.parametrize("outcome", ["success", "auth_failure"])
def test_api_key_is_sent_but_never_recorded(protocol, outcome, server, settings, ledger, sleeps, gateway_for,
                                            request_for, api_key):
    server.enqueue(reply("fine") if outcome == "success" else status(401, message="invalid x-api-key"))
    gateway = gateway_for(protocol, settings, ledger, sleeps)

    try:
        gateway.complete(request_for(protocol))
    except ProviderError as err:
        assert api_key not in str(err)

    assert api_key in server.requests[0].headers.get("authorization", "")
    [record] = ledger.records
    assert api_key not in record.model_dump_json()
    assert api_key not in repr(gateway) + repr(gateway.backend)


def test_concurrency_limit_caps_requests_in_flight(protocol, server, gateway_for, request_for, make_settings):
    settings = make_settings(max_concurrency=2)
    server.enqueue(*[slow(0.15, f"answer {i}") for i in range(6)])
    gateway = gateway_for(protocol, settings)
    answers: list[str] = []
    errors: list[BaseException] = []

    def ask(i: int) -> None:
        try:
            answers.append(gateway.complete(request_for(protocol, f"question {i}")).text)
        except BaseException as err:  # surfaced below: a thread's exception is otherwise lost
            errors.append(err)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert errors == []
    assert len(answers) == 6
    assert server.max_in_flight == 2
