"""Client-side limits: requests per minute, concurrent requests, and cost from a price table.

Providers enforce their own quotas with 429s; spacing requests on our side keeps a long run
from spending its retry budget on rate-limit errors in the first place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping


class RateLimiter:
    """Spaces request starts at least ``60 / requests_per_minute`` seconds apart.

    A minimum interval (a token bucket of size one) rather than a burst allowance: APIs count
    requests over short windows too, and a steady pace is what avoids 429s. Thread-safe: each
    caller reserves the next free slot under a lock, then sleeps outside it.

    Args:
        requests_per_minute: the target rate; must be positive.
        clock: monotonic seconds (injectable for tests).
        sleep: how to wait (injectable for tests).
    """

    def __init__(self, requests_per_minute: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if requests_per_minute <= 0:
            raise ValueError("requests_per_minute must be positive")
        self.interval = 60.0 / requests_per_minute
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next_slot: float | None = None

    def acquire(self) -> float:
        """Block until this caller may start a request.

        Returns:
            Seconds waited (0 when a slot was free).
        """
        with self._lock:
            now = self._clock()
            slot = now if self._next_slot is None else max(now, self._next_slot)
            self._next_slot = slot + self.interval
        wait = slot - now
        if wait > 0:
            self._sleep(wait)
        return max(0.0, wait)


def match_price(model: str, prices: Mapping[str, tuple[float, float]]) -> tuple[str, tuple[float, float]] | None:
    """Find the price entry for a model by longest prefix.

    Providers report dated snapshots (``claude-sonnet-4-5-20250929``) while price tables list
    families; the longest prefix wins so ``gpt-4o-mini-2024-07-18`` is not priced as ``gpt-4o``.

    Returns:
        (matched key, (usd per million input, usd per million output)), or None when unknown.
    """
    best: str | None = None
    for key in prices:
        if model.startswith(key) and (best is None or len(key) > len(best)):
            best = key
    return (best, tuple(prices[best])) if best is not None else None  # type: ignore[return-value]


def estimate_cost(model: str, input_tokens: int, output_tokens: int,
                  prices: Mapping[str, tuple[float, float]]) -> float:
    """Estimated USD cost of one call; 0 for models missing from the price table.

    Prompt-cache discounts are ignored: this is an estimate for budgeting, not an invoice.
    """
    match = match_price(model, prices)
    if match is None:
        return 0.0
    price_in, price_out = match[1]
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000
