"""The gateway: the one ``LLMClient`` the pipeline talks to, wrapping any provider.

It adds what every provider needs and none should re-implement: the response cache (an
identical request is never paid twice), retries with backoff that honour ``retry-after``,
client-side rate and concurrency limits, cost accounting, and a ledger record of every call
that reached a provider, successful or not.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from sopforge.errors import ProviderError, ResponsePending, UserError
from sopforge.llm.batch import Batcher
from sopforge.llm.budget import Budget
from sopforge.llm.limits import LIMITERS, AdaptiveLimiter, LimiterRegistry, estimate_cost, match_price
from sopforge.llm.types import CallLedger, LLMCallRecord, LLMRequest, LLMResponse, ToolCall
from sopforge.settings import Settings

log = logging.getLogger(__name__)

# Up to +10% on computed backoff so parallel workers that failed together do not retry together.
DEFAULT_JITTER = 0.1


class Provider(Protocol):
    """What the gateway needs from a provider (see ``sopforge.llm.providers``)."""

    name: str

    def send(self, request: LLMRequest) -> LLMResponse: ...


@dataclass(frozen=True)
class GatewayStats:
    """Counters for one gateway; read ``Gateway.stats`` for a consistent snapshot."""

    calls: int = 0
    """Calls that reached the provider (each counted once however many retries it took)."""
    failures: int = 0
    """Calls that failed after their last retry."""
    transport_attempts: int = 0
    """Provider sends including retries."""
    cache_hits: int = 0
    """Requests answered from the response cache without a new call."""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the provider served from its prompt cache."""
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_models: tuple[str, ...] = ()
    """Models missing from the price table (costed at 0)."""


class Gateway:
    """``LLMClient`` over a provider, with caching, retries, limits and accounting.

    Args:
        provider: any object with ``name`` and ``send(request)``.
        ledger: where calls are recorded and cached responses looked up; ``None`` disables
            both (useful in tests and one-off scripts).
        settings: retry, backoff, rate, concurrency and price settings.
        run_id: pipeline run the calls belong to (stored on each record).
        sleep: how to wait between retries and for rate-limit slots (injectable for tests).
        clock: monotonic seconds for rate limiting and latency (injectable for tests).
        jitter: fraction of random extra backoff (0 makes delays deterministic).
        rng: random source for jitter.
        limiters: where the adaptive limiter of each (provider, base URL, model) lives; default the
            process-wide one, so every stage running at once shares one per model (a gateway with
            an injected clock gets its own).
        budget: the run's spending cap, checked before every billed call.
        batcher: sends billed calls through the provider's batch API instead (``--batch``).
    """

    def __init__(self, provider: Provider, *, ledger: CallLedger | None, settings: Settings,
                 run_id: str | None = None, family: str | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, jitter: float = DEFAULT_JITTER,
                 rng: random.Random | None = None, limiters: LimiterRegistry | None = None,
                 budget: Budget | None = None, batcher: Batcher | None = None):
        self.backend = provider
        self.provider: str = provider.name
        self.ledger = ledger
        self.settings = settings
        self.run_id = run_id
        self.family = family
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter
        self._rng = rng or random.Random()
        if limiters is None:
            real_time = sleep is time.sleep and clock is time.monotonic
            limiters = LIMITERS if real_time else LimiterRegistry(clock=clock, sleep=sleep)
        self._limiters = limiters
        self.budget = budget
        self.batcher = batcher
        self._stats_lock = threading.Lock()
        self._stats = GatewayStats()
        self._flight_guard = threading.Lock()
        self._flights: dict[str, list[Any]] = {}

    def __repr__(self) -> str:
        return f"Gateway(provider={self.backend!r}, run_id={self.run_id!r})"

    @property
    def stats(self) -> GatewayStats:
        """A snapshot of the counters (safe to read while other threads call ``complete``)."""
        with self._stats_lock:
            return self._stats

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer a request from the cache or the provider.

        Args:
            request: the prompt, model, sampling parameters and call identity.

        Returns:
            The response; ``from_cache`` is True when no new call was made.

        Raises:
            ProviderError: the provider failed and retrying did not help (the failed call has
                been recorded).
            ResponsePending: the exchange provider is waiting for a human (not recorded).
            UserError: the provider cannot serve this request as configured (not recorded).
        """
        request_hash = request.request_hash(self.provider)
        if self.ledger is None:
            return self._call(request, request_hash)
        # Concurrent identical requests wait for the first one and then hit the cache, so a
        # parallel fan-out can never pay twice for the same answer; the ledger's claim does the
        # same across processes (a resumed run, a concurrent run of the same theme).
        with self._single_flight(request_hash):
            cached = self.ledger.cached_response(request_hash)
            if _answered(cached):
                self._count(cache_hits=1)
                return _from_record(cached)
            claim = getattr(self.ledger, "claim", None)
            if claim is None:
                return self._call(request, request_hash)
            with claim(request_hash, max_wait=self._longest_call()) as answered:
                if _answered(answered):
                    self._count(cache_hits=1)
                    return _from_record(answered)
                return self._call(request, request_hash)

    def _longest_call(self) -> float:
        """Seconds one call may take with every retry (a claim older than this is abandoned)."""
        s = self.settings
        return s.request_timeout_seconds * (s.max_retries + 1) + s.backoff_max_seconds * s.max_retries

    # -- one logical call ----------------------------------------------------------------
    def _call(self, request: LLMRequest, request_hash: str) -> LLMResponse:
        attempts = 0
        while True:
            attempts += 1
            try:
                response, latency_ms = self._send_once(request)
            except (ResponsePending, UserError):
                raise  # nothing was asked of a model: not a call, not worth retrying
            except ProviderError as err:
                delay, final = self._retry_decision(err, attempts)
                if final is not None:
                    self._record(request, request_hash, attempts=attempts, error=final)
                    if final is err:
                        raise
                    raise final from err
                log.warning("%s call %s failed (%s); retry %d/%d in %.2fs", self.provider, request.call_key,
                            err, attempts, self.settings.max_retries, delay)
                self._sleep(delay)
                continue
            except Exception as err:
                # A provider bug still may have cost money: keep the trace, then surface it.
                self._record(request, request_hash, attempts=attempts,
                             error=ProviderError(f"{type(err).__name__}: {err}", retryable=False))
                raise
            response = self._finish(request, response, attempts=attempts, latency_ms=latency_ms)
            self._record(request, request_hash, attempts=attempts, response=response)
            return response

    def limiter_for(self, model: str) -> AdaptiveLimiter:
        """The shared limiter of this provider, base URL and model."""
        return self._limiters.get(self.provider, getattr(self.backend, "base_url", None), model,
                                  max_concurrency=self.settings.max_concurrency,
                                  requests_per_minute=self.settings.requests_per_minute)

    def _send_once(self, request: LLMRequest) -> tuple[LLMResponse, float]:
        if not self._billed:
            start = self._clock()
            response = self.backend.send(request)
            return response, (self._clock() - start) * 1000.0
        prompt_tokens = _approx_prompt_tokens(request)
        reservation = None
        if self.budget is not None:  # the worst case: the whole completion budget is used
            worst = estimate_cost(request.model, prompt_tokens, request.max_tokens, self.settings.prices,
                                  batch=self.batcher is not None)
            reservation = self.budget.reserve(worst, f"call {request.call_key}")
        try:
            # The batch API has its own queue and quota: no interactive limiter for it.
            response, latency_ms = self._send_batched(request) if self.batcher is not None \
                else self._send_limited(request, prompt_tokens)
        except BaseException:
            if reservation is not None:
                self.budget.settle(reservation, 0.0)
            raise
        if reservation is not None:
            self.budget.settle(reservation, self._cost(request, response))
        return response, latency_ms

    def _send_batched(self, request: LLMRequest) -> tuple[LLMResponse, float]:
        start = self._clock()
        response = self.batcher.send(request)
        return response, (self._clock() - start) * 1000.0

    def _send_limited(self, request: LLMRequest, prompt_tokens: int) -> tuple[LLMResponse, float]:
        """One interactive send, admitted by the model's shared limiter, which learns from its outcome;
        the latency counts the exchange only, not the wait for admission."""
        limiter = self.limiter_for(request.model)
        limiter.acquire(prompt_tokens)
        start = self._clock()
        try:
            response = self.backend.send(request)
        except ProviderError as err:
            limiter.release(err.rate_limit, rate_limited=err.status == 429, retry_after=err.retry_after)
            raise
        except BaseException:
            limiter.release()
            raise
        limiter.release(response.rate_limit)
        return response, (self._clock() - start) * 1000.0

    @property
    def _billed(self) -> bool:
        # Only remote APIs bill and have quotas: replay, exchange and scripted answers are free.
        return bool(getattr(self.backend, "rate_limited", True))

    def _cost(self, request: LLMRequest, response: LLMResponse) -> float:
        prices = self.settings.prices
        priced_model = response.model if match_price(response.model, prices) else request.model
        return estimate_cost(priced_model, response.input_tokens, response.output_tokens, prices,
                             cached_tokens=response.cached_tokens, cache_write_tokens=response.cache_write_tokens,
                             batch=response.batch_id is not None)

    def _retry_decision(self, err: ProviderError, attempts: int) -> tuple[float, ProviderError | None]:
        """(delay before the next attempt, or the error to raise when giving up)."""
        cap = self.settings.backoff_max_seconds
        retries_done = attempts - 1
        if not err.retryable:
            return 0.0, err
        if retries_done >= self.settings.max_retries:
            return 0.0, _with_suffix(err, f"gave up after {attempts} attempts")
        backoff = min(cap, self.settings.backoff_base_seconds * 2 ** retries_done)
        backoff = min(cap, backoff * (1 + self._jitter * self._rng.random()))
        if err.retry_after is None:
            return backoff, None
        # The server's retry-after is a floor (retrying sooner only earns another 429), and
        # our growing backoff still applies on top when failures repeat. A wait longer than
        # the configured ceiling is not shortened, since an early retry is sure to fail:
        # the call fails now with a message saying how to allow longer waits.
        if err.retry_after > cap:
            return 0.0, _with_suffix(err, f"server asked to wait {err.retry_after:g}s, more than "
                                          f"SOPFORGE_BACKOFF_MAX_SECONDS={cap:g}; raise it to wait")
        return max(err.retry_after, backoff), None

    def _finish(self, request: LLMRequest, response: LLMResponse, *, attempts: int,
                latency_ms: float) -> LLMResponse:
        prices = self.settings.prices
        cost = self._cost(request, response)
        if self._billed and match_price(response.model, prices) is None and match_price(request.model, prices) is None:
            self._flag_unpriced(response.model)
        return response.model_copy(update={
            "transport_attempts": attempts, "latency_ms": latency_ms, "cost_usd": cost, "from_cache": False,
        })

    # -- accounting ----------------------------------------------------------------------
    def _record(self, request: LLMRequest, request_hash: str, *, attempts: int,
                response: LLMResponse | None = None, error: ProviderError | None = None) -> None:
        if response is not None:
            self._count(calls=1, transport_attempts=attempts, input_tokens=response.input_tokens,
                        output_tokens=response.output_tokens, cached_tokens=response.cached_tokens,
                        cache_write_tokens=response.cache_write_tokens, cost_usd=response.cost_usd)
        else:
            self._count(calls=1, failures=1, transport_attempts=attempts)
        if self.ledger is None:
            return
        record = LLMCallRecord(
            id=uuid.uuid4().hex,
            run_id=self.run_id,
            call_key=request.call_key,
            request_hash=request_hash,
            stage=request.stage,
            family=self.family,
            attempt=request.attempt,
            template_id=request.template_id,
            template_hash=request.template_hash,
            provider=self.provider,
            model=response.model if response is not None else request.model,
            params=self._params(request),
            prompt=request.prompt_payload(),
            response=response.text if response is not None else None,
            raw=response.raw if response is not None else None,
            input_tokens=response.input_tokens if response is not None else 0,
            output_tokens=response.output_tokens if response is not None else 0,
            cached_tokens=response.cached_tokens if response is not None else 0,
            cache_write_tokens=response.cache_write_tokens if response is not None else 0,
            batch_id=response.batch_id if response is not None else None,
            cost_usd=response.cost_usd if response is not None else 0.0,
            latency_ms=response.latency_ms if response is not None else 0.0,
            transport_attempts=attempts,
            error=str(error) if error is not None else None,
            tool_calls=[c.model_dump() for c in response.tool_calls] if response is not None and response.tool_calls
            else None,
        )
        self.ledger.record_call(record)

    def _params(self, request: LLMRequest) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": request.temperature, "max_tokens": request.max_tokens}
        if not getattr(self.backend, "applies_temperature", True):
            params["temperature_applied"] = False
        base_url = getattr(self.backend, "base_url", None)
        if base_url:
            params["base_url"] = _public_url(str(base_url))
        return params

    def _count(self, **deltas: float) -> None:
        with self._stats_lock:
            current = self._stats
            self._stats = replace(current, **{k: getattr(current, k) + v for k, v in deltas.items()})

    def _flag_unpriced(self, model: str) -> None:
        with self._stats_lock:
            if model in self._stats.unpriced_models:
                return
            self._stats = replace(self._stats, unpriced_models=(*self._stats.unpriced_models, model))
        log.warning("no price for model %r: its calls are costed at 0 (set SOPFORGE_PRICES to fix)", model)

    @contextmanager
    def _single_flight(self, key: str) -> Iterator[None]:
        with self._flight_guard:
            entry = self._flights.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._flight_guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._flights[key]


def _answered(record: LLMCallRecord | None) -> bool:
    return record is not None and record.error is None and record.response is not None


def _from_record(record: LLMCallRecord) -> LLMResponse:
    """A cached answer: same text and token counts, but nothing was spent or sent this time."""
    return LLMResponse(
        text=record.response or "",
        provider=record.provider,
        model=record.model,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        cached_tokens=record.cached_tokens,
        cache_write_tokens=record.cache_write_tokens,
        latency_ms=0.0,
        transport_attempts=0,
        cost_usd=0.0,
        from_cache=True,
        raw=record.raw,
        tool_calls=[ToolCall.model_validate(c) for c in record.tool_calls or []],
    )


def _with_suffix(err: ProviderError, note: str) -> ProviderError:
    return ProviderError(f"{err} ({note})", retryable=err.retryable, retry_after=err.retry_after,
                         status=err.status, rate_limit=err.rate_limit)


def _approx_prompt_tokens(request: LLMRequest) -> int:
    """Prompt tokens for the token bucket and the budget: about four characters each."""
    tool_text = sum(len(r.content) for m in request.messages for r in m.tool_results)
    return (len(request.system or "") + sum(len(m.content) for m in request.messages) + tool_text) // 4 + 1


def _public_url(url: str) -> str:
    """Drop user-info and query from a base URL: proxies sometimes carry tokens there."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
