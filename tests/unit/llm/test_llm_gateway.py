"""Gateway behaviour independent of HTTP: backoff, limits, caching, accounting."""

from __future__ import annotations

import threading
import time

import pytest

from sopforge.errors import ProviderError, ResponsePending
from sopforge.llm import AdaptiveLimiter, Gateway, LLMClient, RateLimitInfo, ScriptedProvider, estimate_cost, match_price
from sopforge.llm.providers import ExchangeProvider

pytestmark = pytest.mark.timeout(30)


def transient(retry_after: float | None = None) -> ProviderError:
    return ProviderError("server overloaded", retryable=True, retry_after=retry_after, status=529)


def test_gateway_satisfies_the_llm_client_protocol(settings):
    gateway: LLMClient = Gateway(ScriptedProvider(["x"]), ledger=None, settings=settings)
    assert gateway.provider == "scripted"


def test_backoff_doubles_from_the_base_and_is_capped(make_settings, make_request, sleeps):
    settings = make_settings(backoff_base_seconds=2.0, backoff_max_seconds=5.0, max_retries=4)
    provider = ScriptedProvider([transient(), transient(), transient(), "finally"])
    gateway = Gateway(provider, ledger=None, settings=settings, sleep=sleeps, jitter=0)

    assert gateway.complete(make_request()).text == "finally"
    assert sleeps.calls == [2.0, 4.0, 5.0]


def test_jitter_adds_at_most_ten_percent(make_settings, make_request, sleeps):
    settings = make_settings(backoff_base_seconds=1.0, backoff_max_seconds=60.0)
    gateway = Gateway(ScriptedProvider([transient(), transient(), "ok"]), ledger=None, settings=settings,
                      sleep=sleeps)
    gateway.complete(make_request())
    assert 1.0 <= sleeps.calls[0] <= 1.1 and 2.0 <= sleeps.calls[1] <= 2.2


def test_retry_after_is_a_floor_over_backoff(make_settings, make_request, sleeps):
    settings = make_settings(backoff_base_seconds=1.0, backoff_max_seconds=30.0)
    provider = ScriptedProvider([transient(retry_after=7), transient(retry_after=0.5), "ok"])
    gateway = Gateway(provider, ledger=None, settings=settings, sleep=sleeps, jitter=0)

    gateway.complete(make_request())

    assert sleeps.calls == [7.0, 2.0]


def test_retry_after_beyond_the_ceiling_fails_now_with_the_fix(make_settings, make_request, ledger, sleeps):
    settings = make_settings(backoff_max_seconds=10.0)
    provider = ScriptedProvider([transient(retry_after=3600), "never"])
    gateway = Gateway(provider, ledger=ledger, settings=settings, sleep=sleeps)

    with pytest.raises(ProviderError, match="SOPFORGE_BACKOFF_MAX_SECONDS"):
        gateway.complete(make_request())

    assert sleeps.calls == [] and len(provider.requests) == 1
    assert ledger.records[0].error and "3600" in ledger.records[0].error


def test_non_retryable_error_is_raised_after_one_attempt(settings, make_request, ledger, sleeps):
    provider = ScriptedProvider([ProviderError("HTTP 404: model not found", retryable=False, status=404), "x"])
    gateway = Gateway(provider, ledger=ledger, settings=settings, sleep=sleeps)

    with pytest.raises(ProviderError, match="model not found"):
        gateway.complete(make_request())

    assert len(provider.requests) == 1 and sleeps.calls == []
    assert [r.error for r in ledger.records] == ["HTTP 404: model not found"]


def test_failed_calls_are_not_served_from_cache(settings, make_request, ledger, sleeps):
    provider = ScriptedProvider([ProviderError("bad", retryable=False), "good"])
    gateway = Gateway(provider, ledger=ledger, settings=settings, sleep=sleeps)

    with pytest.raises(ProviderError):
        gateway.complete(make_request())
    assert gateway.complete(make_request()).text == "good"
    assert len(provider.requests) == 2


def test_cache_key_covers_sampling_parameters(settings, make_request, ledger):
    provider = ScriptedProvider(["cold", "warm"])
    gateway = Gateway(provider, ledger=ledger, settings=settings)

    assert gateway.complete(make_request(temperature=0.1)).text == "cold"
    assert gateway.complete(make_request(temperature=0.9)).text == "warm"
    assert gateway.complete(make_request(temperature=0.1)).from_cache


def test_cache_is_not_shared_across_providers(settings, make_request, ledger):
    Gateway(ScriptedProvider(["from a"], name="a"), ledger=ledger, settings=settings).complete(make_request())
    other = Gateway(ScriptedProvider(["from b"], name="b"), ledger=ledger, settings=settings)
    assert other.complete(make_request()).text == "from b"


def test_concurrent_identical_requests_are_paid_once(settings, make_request, ledger):
    def answer(request):
        time.sleep(0.1)  # keep the first call in flight while the others arrive
        return "shared"

    provider = ScriptedProvider(answer)
    gateway = Gateway(provider, ledger=ledger, settings=settings)
    results = []
    threads = [threading.Thread(target=lambda: results.append(gateway.complete(make_request())))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert len(provider.requests) == 1
    assert sorted(r.from_cache for r in results) == [False, True, True, True]
    assert gateway.stats.cache_hits == 3


def test_rate_limit_spaces_sends_by_the_configured_rate(make_settings, make_request, clock):
    sent_at: list[float] = []

    def answer(request):
        sent_at.append(clock())
        return "ok"

    provider = ScriptedProvider(answer, rate_limited=True)
    gateway = Gateway(provider, ledger=None, settings=make_settings(requests_per_minute=30),
                      sleep=clock.sleep, clock=clock)
    for i in range(4):
        gateway.complete(make_request(f"q{i}"))

    gaps = [b - a for a, b in zip(sent_at, sent_at[1:])]
    assert gaps == pytest.approx([2.0, 2.0, 2.0])


def test_providers_without_remote_quota_skip_the_rate_limit(make_settings, make_request, clock):
    gateway = Gateway(ScriptedProvider(["a", "b", "c"]), ledger=None, settings=make_settings(requests_per_minute=1),
                      sleep=clock.sleep, clock=clock)
    for i in range(3):
        gateway.complete(make_request(f"q{i}"))
    assert clock.sleeps == []


def test_a_configured_ceiling_gives_concurrent_callers_distinct_slots():
    clock = [50.0]
    waits: list[float] = []
    lock = threading.Lock()

    def sleep(seconds: float) -> None:
        with lock:
            clock[0] += seconds

    limiter = AdaptiveLimiter(8, requests_per_minute=60, clock=lambda: clock[0], sleep=sleep)
    for _ in range(3):
        waits.append(limiter.acquire())
        limiter.release()
    assert waits == [0.0, 1.0, 1.0]  # one per second, the first at once


def test_headers_size_the_buckets_so_a_fresh_quota_allows_a_burst():
    now = [0.0]
    limiter = AdaptiveLimiter(16, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    limiter.acquire()
    limiter.release(RateLimitInfo(requests_limit=600, requests_remaining=599))  # 10 per second, 599 left
    for _ in range(10):  # a burst: no waiting while the bucket holds requests
        assert limiter.acquire() == 0.0
        limiter.release(None)
    limiter.release(RateLimitInfo(requests_limit=600, requests_remaining=0))  # the server says: none left
    assert limiter.acquire() == pytest.approx(0.1)  # refilled at 600/min


def test_a_429_halves_the_window_pauses_everyone_and_successes_win_it_back():
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = AdaptiveLimiter(8, clock=lambda: now[0], sleep=sleep)
    limiter.acquire()
    limiter.release(rate_limited=True, retry_after=3.0)
    assert limiter.window == 4.0
    assert limiter.acquire() == pytest.approx(3.0)  # the next caller waits out the server's retry-after
    limiter.release()
    windows = []
    for _ in range(20):
        limiter.acquire()
        limiter.release()
        windows.append(limiter.window)
    assert windows == sorted(windows) and 4.0 < windows[-1] <= 8.0  # additive: about +1 per window of successes
    assert windows[2] < 5.0 < windows[3]  # +1 takes about one window (4) of successes


def test_the_window_caps_requests_in_flight():
    limiter = AdaptiveLimiter(2)
    limiter.acquire()
    limiter.acquire()
    entered = threading.Event()

    def third():
        limiter.acquire()
        entered.set()

    thread = threading.Thread(target=third)
    thread.start()
    assert not entered.wait(0.3)  # two in flight: the third waits
    limiter.release()
    assert entered.wait(2)
    thread.join()


def test_rate_limit_headers_of_both_providers_are_read():
    openai = RateLimitInfo.from_headers({"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499",
                                         "x-ratelimit-reset-requests": "120ms", "x-ratelimit-limit-tokens": "30000",
                                         "x-ratelimit-remaining-tokens": "29000", "x-ratelimit-reset-tokens": "6m0s"})
    assert (openai.requests_limit, openai.requests_remaining, openai.tokens_remaining) == (500, 499, 29000)
    assert openai.requests_reset == pytest.approx(0.12) and openai.tokens_reset == pytest.approx(360)
    anthropic = RateLimitInfo.from_headers({"anthropic-ratelimit-requests-limit": "50",
                                            "anthropic-ratelimit-requests-remaining": "49",
                                            "anthropic-ratelimit-input-tokens-limit": "30000",
                                            "anthropic-ratelimit-input-tokens-remaining": "28000",
                                            "anthropic-ratelimit-tokens-limit": "90000"})
    assert (anthropic.requests_limit, anthropic.tokens_limit, anthropic.tokens_remaining) == (50, 30000, 28000)
    assert RateLimitInfo.from_headers({"content-type": "application/json"}) is None


def test_response_pending_is_neither_retried_nor_recorded(settings, make_request, ledger, sleeps, tmp_path):
    provider = ExchangeProvider(tmp_path / "exchange")
    gateway = Gateway(provider, ledger=ledger, settings=settings, sleep=sleeps)

    with pytest.raises(ResponsePending):
        gateway.complete(make_request())

    assert ledger.records == [] and sleeps.calls == []
    assert gateway.stats.calls == 0


def test_stats_sum_tokens_and_cost_over_calls(make_settings, make_request, ledger):
    settings = make_settings(prices={"scripted-model": (1.0, 2.0)})
    gateway = Gateway(ScriptedProvider(["a" * 400, "b" * 800]), ledger=ledger, settings=settings)

    first = gateway.complete(make_request("x" * 4000, system=None, model="scripted-model"))
    second = gateway.complete(make_request("y" * 8000, system=None, model="scripted-model"))

    stats = gateway.stats
    assert (stats.input_tokens, stats.output_tokens) == (3000, 300)
    assert stats.cost_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert stats.cost_usd == pytest.approx((3000 * 1.0 + 300 * 2.0) / 1e6)


def test_unknown_model_of_a_billed_provider_costs_nothing_and_is_flagged(settings, make_request):
    gateway = Gateway(ScriptedProvider(["ok"], rate_limited=True), ledger=None, settings=settings)
    response = gateway.complete(make_request(model="mystery-model-7b"))
    assert response.cost_usd == 0.0
    assert gateway.stats.unpriced_models == ("mystery-model-7b",)


def test_free_providers_are_never_flagged_as_unpriced(settings, make_request):
    """Replay, exchange and scripted answers cost nothing; warning about their price is noise."""
    gateway = Gateway(ScriptedProvider(["ok"]), ledger=None, settings=settings)
    gateway.complete(make_request(model="recorded"))
    assert gateway.stats.unpriced_models == ()


def test_price_lookup_prefers_the_longest_prefix():
    prices = {"gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6)}
    assert match_price("gpt-4o-mini-2024-07-18", prices) == ("gpt-4o-mini", (0.15, 0.6))
    assert match_price("gpt-4o-2024-08-06", prices) == ("gpt-4o", (2.5, 10.0))
    assert match_price("llama3", prices) is None
    assert estimate_cost("gpt-4o", 2_000_000, 1_000_000, prices) == pytest.approx(15.0)


def test_recorded_params_never_include_credentials_in_the_base_url(settings, make_request, ledger):
    provider = ScriptedProvider(["ok"])
    provider.base_url = "https://user:hunter2@llm.internal:8443/v1?api_key=hunter3"
    Gateway(provider, ledger=ledger, settings=settings).complete(make_request())

    params = ledger.records[0].params
    assert params["base_url"] == "https://llm.internal:8443/v1"
    assert "hunter" not in ledger.records[0].model_dump_json()


def test_record_identifies_the_call(settings, make_request, ledger):
    request = make_request(template_id="teller/context", template_hash="t" * 64, attempt=2)
    Gateway(ScriptedProvider(["ok"]), ledger=ledger, settings=settings, run_id="r42").complete(request)

    [record] = ledger.records
    assert record.run_id == "r42" and record.call_key == request.call_key and record.stage == "context"
    assert (record.template_id, record.template_hash, record.attempt) == ("teller/context", "t" * 64, 2)
    assert record.request_hash == request.request_hash("scripted")
    assert record.prompt == request.prompt_payload()
    assert record.params["temperature"] == pytest.approx(0.1)
