"""What a real API accounts beyond answering: prompt caching and the rate-limit quota.

Used by the fake server (``sopforge.llm.testserver``) so that the gateway's cache accounting and
adaptive limits are tested against the same signals the real APIs send.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from sopforge.llm.testserver_wire import estimate_tokens

__all__ = ["MIN_CACHEABLE_TOKENS", "PromptCache", "Quota", "RateLimit"]

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
                tokens = estimate_tokens(prefix)
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



@dataclass(frozen=True)
class RateLimit:
    """The quota the fake server enforces (per minute, like both real APIs)."""

    requests_per_minute: int = 100_000
    tokens_per_minute: int = 100_000_000


class Quota:
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
