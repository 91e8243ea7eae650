"""Client-side limits: an adaptive limiter per provider and model, and cost from a price table.

Providers enforce their quotas with 429s and tell every client where it stands in response headers
(OpenAI ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``; Anthropic
``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``).
:class:`AdaptiveLimiter` uses both:

- **token buckets** for requests and tokens, sized from those headers (a bucket holds the
  minute's limit and refills at limit / 60 s, so a fresh quota allows a burst, and the level is
  re-synchronised to the server's ``remaining`` after every response). Until a server has said
  anything there is no bucket, unless ``SOPFORGE_REQUESTS_PER_MINUTE`` sets a ceiling (for
  servers that send no headers);
- a **concurrency window** that backs off multiplicatively on a 429 (halved, and everyone pauses
  for the server's retry-after) and recovers additively (+1 per window of successes), up to
  ``SOPFORGE_MAX_CONCURRENCY``: the only fixed knob.

One limiter per (provider, base URL, model) per process (:data:`LIMITERS`), shared by every stage
and gateway running at once, because the quota is the account's, not the stage's.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

__all__ = ["AdaptiveLimiter", "LimiterRegistry", "LIMITERS", "RateLimitInfo", "TokenBucket", "estimate_cost",
           "match_price"]

_DURATION = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|h|m|s)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _reset_seconds(value: str | None, now: float | None = None) -> float | None:
    """OpenAI's reset is a duration ("1s", "6m0s", "20ms"); Anthropic's an RFC 3339 time."""
    if not value:
        return None
    parts = list(_DURATION.finditer(value))
    if parts and "".join(p.group(0) for p in parts) == value.strip():
        return sum(float(p.group("n")) * _SECONDS[p.group("unit")] for p in parts)
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class RateLimitInfo:
    """Where the account stands, as one response's headers said (None: not said)."""

    requests_limit: int | None = None
    requests_remaining: int | None = None
    requests_reset: float | None = None
    tokens_limit: int | None = None
    tokens_remaining: int | None = None
    tokens_reset: float | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str] | None) -> RateLimitInfo | None:
        """Read OpenAI's or Anthropic's rate-limit headers; None when there are none."""
        if not headers:
            return None
        h = {k.lower(): v for k, v in headers.items()}
        if any(k.startswith("anthropic-ratelimit-") for k in h):
            def get(kind: str, what: str) -> str | None:
                return h.get(f"anthropic-ratelimit-{kind}-{what}")
            # Anthropic limits input tokens per minute separately; that is the one a prompt spends.
            tokens = "input-tokens" if get("input-tokens", "limit") is not None else "tokens"
        elif any(k.startswith("x-ratelimit-") for k in h):
            def get(kind: str, what: str) -> str | None:
                return h.get(f"x-ratelimit-{what}-{kind}")
            tokens = "tokens"
        else:
            return None
        return cls(requests_limit=_int(get("requests", "limit")), requests_remaining=_int(get("requests", "remaining")),
                   requests_reset=_reset_seconds(get("requests", "reset")),
                   tokens_limit=_int(get(tokens, "limit")), tokens_remaining=_int(get(tokens, "remaining")),
                   tokens_reset=_reset_seconds(get(tokens, "reset")))


class TokenBucket:
    """``capacity`` units, refilled continuously at ``rate`` per second; a request takes what it spends.

    Args:
        capacity: the most that can be spent in one burst.
        rate: units added per second.
        level: units available now (default: full).
        now: the clock's time of ``level``.
    """

    def __init__(self, capacity: float, rate: float, now: float, level: float | None = None):
        self.capacity = max(1.0, capacity)
        self.rate = max(rate, 1e-9)
        self.level = self.capacity if level is None else min(level, self.capacity)
        self._at = now

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = max(self._at, now)

    def delay(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` is available (0 when it is now). More than the capacity waits
        for a full bucket rather than forever."""
        self._refill(now)
        amount = min(amount, self.capacity)
        return 0.0 if self.level >= amount else (amount - self.level) / self.rate

    def take(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level -= min(amount, self.capacity)

    def sync(self, limit: int | None, remaining: int | None, now: float) -> None:
        """The server's word wins: its limit per minute sizes the bucket, its ``remaining`` is the level."""
        self._refill(now)
        if limit:
            self.capacity, self.rate = float(limit), limit / 60.0
        if remaining is not None:
            self.level = min(float(remaining), self.capacity)

    @classmethod
    def from_header(cls, limit: int | None, remaining: int | None, now: float) -> TokenBucket | None:
        if not limit:
            return None
        return cls(limit, limit / 60.0, now, level=remaining)


class AdaptiveLimiter:
    """Admission for one (provider, base URL, model): concurrency window + request and token buckets.

    Args:
        max_concurrency: the fixed cap; the window starts there and never exceeds it.
        requests_per_minute: optional ceiling for servers that send no rate-limit headers.
        clock, sleep: injectable for tests.
    """

    def __init__(self, max_concurrency: int, requests_per_minute: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.max_concurrency = max(1, max_concurrency)
        self.window = float(self.max_concurrency)
        self._clock, self._sleep = clock, sleep
        self._cond = threading.Condition(threading.Lock())
        self._in_flight = 0
        self._paused_until = 0.0
        self._ceiling = requests_per_minute
        # A configured ceiling is paced smoothly (a burst of one second's worth).
        self.requests: TokenBucket | None = (TokenBucket(max(1.0, requests_per_minute / 60.0),
                                                         requests_per_minute / 60.0, clock())
                                             if requests_per_minute else None)
        self.tokens: TokenBucket | None = None
        self.rate_limited = 0
        self.max_in_flight = 0

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def acquire(self, tokens: int = 0) -> float:
        """Block until a request of about ``tokens`` prompt tokens may start; returns seconds waited
        for the buckets or a pause (not for a concurrency slot)."""
        waited = 0.0
        with self._cond:
            while True:
                if self._in_flight >= max(1, int(self.window)):
                    self._cond.wait(timeout=1.0)
                    continue
                now = self._clock()
                delay = max(self._paused_until - now,
                            self.requests.delay(1, now) if self.requests else 0.0,
                            self.tokens.delay(tokens, now) if self.tokens else 0.0)
                if delay <= 0:
                    if self.requests:
                        self.requests.take(1, now)
                    if self.tokens:
                        self.tokens.take(tokens, now)
                    self._in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self._in_flight)
                    return waited
                self._cond.release()  # sleep without holding up the others' releases
                try:
                    self._sleep(delay)
                finally:
                    self._cond.acquire()
                waited += delay

    def release(self, info: RateLimitInfo | None = None, *, rate_limited: bool = False,
                retry_after: float | None = None) -> None:
        """A request ended: free its slot, learn from the headers, and adapt the window.

        Args:
            info: the response's rate-limit headers (success or error).
            rate_limited: the server answered 429: halve the window, pause everyone for
                ``retry_after`` (or a second).
            retry_after: the server's retry-after, in seconds.
        """
        with self._cond:
            now = self._clock()
            self._in_flight = max(0, self._in_flight - 1)
            if rate_limited:
                self.rate_limited += 1
                self.window = max(1.0, self.window / 2)
                self._paused_until = max(self._paused_until, now + (retry_after if retry_after is not None else 1.0))
                if self.requests:
                    self.requests.level = min(self.requests.level, 0.0)
            else:
                self.window = min(float(self.max_concurrency), self.window + 1.0 / self.window)
            if info is not None:
                self._learn(info, now)
            self._cond.notify_all()

    def _learn(self, info: RateLimitInfo, now: float) -> None:
        if info.requests_limit:
            limit = min(info.requests_limit, int(self._ceiling)) if self._ceiling else info.requests_limit
            if self.requests is None:
                self.requests = TokenBucket.from_header(limit, info.requests_remaining, now)
            else:
                self.requests.sync(limit, info.requests_remaining, now)
        if info.tokens_limit:
            if self.tokens is None:
                self.tokens = TokenBucket.from_header(info.tokens_limit, info.tokens_remaining, now)
            else:
                self.tokens.sync(info.tokens_limit, info.tokens_remaining, now)


class LimiterRegistry:
    """One :class:`AdaptiveLimiter` per (provider, base URL, model), created on first use."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._limiters: dict[tuple[str, str, str], AdaptiveLimiter] = {}

    def get(self, provider: str, base_url: str | None, model: str, *, max_concurrency: int,
            requests_per_minute: float | None) -> AdaptiveLimiter:
        key = (provider, base_url or "", model)
        with self._lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = AdaptiveLimiter(max_concurrency, requests_per_minute, clock=self._clock, sleep=self._sleep)
                self._limiters[key] = limiter
            return limiter

    def clear(self) -> None:
        with self._lock:
            self._limiters.clear()


LIMITERS = LimiterRegistry()
"""The process's limiters: every gateway (every stage running at once) shares them."""


BATCH_DISCOUNT = 0.5
"""Both batch APIs bill every token of a batched request at half the interactive price."""


def match_price(model: str, prices: Mapping[str, tuple[float, ...]]) -> tuple[str, tuple[float, ...]] | None:
    """Find the price entry for a model by longest prefix.

    Providers report dated snapshots (``claude-sonnet-4-5-20250929``) while price tables list
    families; the longest prefix wins so ``gpt-4o-mini-2024-07-18`` is not priced as ``gpt-4o``.

    Returns:
        (matched key, (usd per million input, output[, cached input, cache write])), or None.
    """
    best: str | None = None
    for key in prices:
        if model.startswith(key) and (best is None or len(key) > len(best)):
            best = key
    return (best, tuple(prices[best])) if best is not None else None


def cache_prices(model: str, price: tuple[float, ...]) -> tuple[float, float]:
    """(cached input, cache write) USD per million tokens: the table's, else each provider's rule
    (Anthropic reads at 0.1x and writes at 1.25x the input price; OpenAI reads at 0.5x, writes free)."""
    if len(price) >= 4:
        return float(price[2]), float(price[3])
    if len(price) == 3:
        return float(price[2]), float(price[0])
    if model.startswith("claude"):
        return price[0] * 0.1, price[0] * 1.25
    return price[0] * 0.5, float(price[0])


def estimate_cost(model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, tuple[float, ...]], *,
                  cached_tokens: int = 0, cache_write_tokens: int = 0, batch: bool = False) -> float:
    """Estimated USD cost of one call; 0 for models missing from the price table.

    Args:
        input_tokens: every prompt token, cached ones included (both providers' totals).
        cached_tokens: prompt tokens read from the provider's prompt cache (cache prices).
        cache_write_tokens: prompt tokens written to Anthropic's cache (1.25x).
        batch: the call went through a batch API (half price).
    """
    match = match_price(model, prices)
    if match is None:
        return 0.0
    price = match[1]
    cached_price, write_price = cache_prices(model, price)
    fresh = max(0, input_tokens - cached_tokens - cache_write_tokens)
    usd = (fresh * price[0] + cached_tokens * cached_price + cache_write_tokens * write_price
           + output_tokens * price[1]) / 1_000_000
    return usd * BATCH_DISCOUNT if batch else usd
