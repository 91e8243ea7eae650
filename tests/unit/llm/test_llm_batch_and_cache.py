"""The batch APIs, prompt-cache accounting and rate-limit headers, through the real SDKs.

Every test talks to the package's fake server over HTTP with the real ``openai`` / ``anthropic``
clients, so what is checked is what a user's run would see.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from sopforge.errors import BudgetExceeded
from sopforge.llm import Budget, Gateway, LLMRequest, Message, estimate_cost
from sopforge.llm.batch import Batcher
from sopforge.llm.limits import LimiterRegistry
from sopforge.llm.testserver import FakeLLMServer, RateLimit
from sopforge.store import Store
from sopforge.store.journal import ledger_dir

def provider(protocol: str, server: FakeLLMServer):
    from sopforge.llm.providers.anthropic import AnthropicProvider
    from sopforge.llm.providers.openai import OpenAIProvider

    if protocol == "anthropic":
        return AnthropicProvider("sk-test", server.anthropic_base_url, 5.0)
    return OpenAIProvider("sk-test", server.openai_base_url, 5.0)


PREFIX = "Business context, SOP and tools shared by every item of the stage. " * 120  # ~2k tokens


def ask(gateway: Gateway, item: str, model: str = "gpt-4o-mini") -> LLMRequest:
    return LLMRequest(messages=[Message(role="user", content=PREFIX + f"Item: {item}", cache_prefix=len(PREFIX))],
                      model=model, call_key=f"slug/stage/{item}/a1", stage="stage")


def concurrently(gateway: Gateway, requests: list[LLMRequest]):
    results: dict[str, object] = {}

    def one(request: LLMRequest) -> None:
        results[request.call_key] = gateway.complete(request)

    threads = [threading.Thread(target=one, args=(r,)) for r in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return [results[r.call_key] for r in requests]


def test_a_stage_s_concurrent_calls_become_one_batch_job_costed_at_batch_price(protocol, tmp_path, make_settings):
    with FakeLLMServer(lambda body, proto: "answer") as server:
        store = Store(tmp_path / "db.duckdb")
        settings = make_settings()
        batcher = Batcher(provider(protocol, server), store, run_id="r-1", stage="stage", poll_seconds=0.05,
                          collect_seconds=2.0)  # generous: three threads can take long to start on a loaded machine
        gateway = Gateway(batcher.backend, ledger=store, settings=settings, run_id="r-1", batcher=batcher)
        responses = concurrently(gateway, [ask(gateway, f"i{n}") for n in range(3)])
        jobs = list(server.batches.jobs.values())
    assert len(jobs) == 1 and len(jobs[0].requests) == 3
    assert [r.text for r in responses] == ["answer"] * 3
    assert {r.batch_id for r in responses} == {jobs[0].id}
    for r in responses:
        full = estimate_cost("gpt-4o-mini", r.input_tokens, r.output_tokens, settings.prices,
                             cached_tokens=r.cached_tokens, cache_write_tokens=r.cache_write_tokens)
        assert r.cost_usd == pytest.approx(full / 2)
    (job,) = store.batch_jobs("r-1")
    assert job["status"] == "ended" and job["provider"] == protocol


def _as_if_its_process_died(db_path: Path) -> None:
    """Leave the frozen run's claims as a killed process leaves them: naming a process that is gone (the
    resumed run then takes them over at once, instead of after the longest call the holder could make)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    for claim in ledger_dir(db_path).glob("claim-*"):
        owner = json.loads(claim.read_text())
        claim.write_text(json.dumps({**owner, "pid": gone.pid}))


def test_a_job_left_open_by_a_stopped_run_is_polled_not_resubmitted(protocol, tmp_path, make_settings):
    frozen = threading.Event()  # the first run stops for good while its job is in progress

    def stopped_run(gateway: Gateway) -> None:
        try:
            gateway.complete(ask(gateway, "x"))
        except Exception:  # noqa: BLE001 - woken after the test, against a closed server
            pass

    with FakeLLMServer(lambda body, proto: "answer", batch_seconds=60) as server:
        store = Store(tmp_path / "db.duckdb")
        first = Batcher(provider(protocol, server), store, run_id="r-1", stage="stage", poll_seconds=0.05,
                        collect_seconds=0.05, sleep=lambda s: frozen.wait() if server.batches.jobs else None)
        gateway = Gateway(first.backend, ledger=store, settings=make_settings(), run_id="r-1", batcher=first)
        threading.Thread(target=stopped_run, args=(gateway,), daemon=True).start()
        while not store.batch_jobs():
            threading.Event().wait(0.05)
        (job_id,) = server.batches.jobs
        _as_if_its_process_died(tmp_path / "db.duckdb")

        server.batch_seconds = 0
        resumed = Batcher(provider(protocol, server), store, run_id="r-2", stage="stage", poll_seconds=0.05,
                          collect_seconds=0.05)
        again = Gateway(resumed.backend, ledger=store, settings=make_settings(), run_id="r-2", batcher=resumed)
        response = again.complete(ask(again, "x"))
        submitted = list(server.batches.jobs)
    frozen.set()
    assert response.text == "answer" and response.batch_id == job_id
    assert submitted == [job_id]  # nothing was submitted twice
    assert [j["status"] for j in store.batch_jobs()] == ["ended"]


def test_both_providers_report_a_repeated_prefix_as_cached(protocol, tmp_path, make_settings):
    with FakeLLMServer(lambda body, proto: "ok") as server:
        gateway = Gateway(provider(protocol, server), ledger=None, settings=make_settings())
        first = gateway.complete(ask(gateway, "first"))
        second = gateway.complete(ask(gateway, "second"))
    assert first.cached_tokens == 0
    assert second.cached_tokens >= 1024 and second.cached_tokens <= second.input_tokens
    if protocol == "anthropic":  # the prefix was written to the cache by the first call (billed 1.25x)
        assert first.cache_write_tokens >= 1024
    prices = make_settings().prices
    assert second.cost_usd < estimate_cost("gpt-4o-mini", second.input_tokens, second.output_tokens, prices)


def test_rate_limit_headers_and_429s_pace_the_calls_so_all_succeed(protocol, make_settings):
    with FakeLLMServer(lambda body, proto: "ok", rate_limit=RateLimit(requests_per_minute=600)) as server:
        gateway = Gateway(provider(protocol, server), ledger=None,
                          settings=make_settings(max_concurrency=8, backoff_base_seconds=0.01, max_retries=8),
                          limiters=LimiterRegistry())
        responses = concurrently(gateway, [ask(gateway, f"q{n}") for n in range(24)])
        limiter = gateway.limiter_for("gpt-4o-mini")
        rejected = server.quota.rejected
    assert [r.text for r in responses] == ["ok"] * 24
    assert limiter.requests is not None and limiter.requests.capacity == 600  # learnt from the headers
    assert rejected <= 8  # a burst of at most the window, then paced by the bucket


def test_the_budget_stops_a_call_before_it_is_sent(tmp_path, make_settings):
    with FakeLLMServer(lambda body, proto: "ok") as server:
        budget = Budget(0.0005, run_id="r-1")  # a 2k-token prompt plus 8192 output tokens at 0.6/M is more
        gateway = Gateway(provider("openai", server), ledger=None, settings=make_settings(), budget=budget)
        with pytest.raises(BudgetExceeded, match=r"budget: stopped before call slug/stage/x/a1.*rerun r-1"):
            gateway.complete(ask(gateway, "x"))
        assert server.requests == []
