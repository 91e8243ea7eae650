"""The two error families of sopforge.

User/config errors fail fast with one clear line and are never retried. Run-time errors
carry what a caller needs to decide whether to retry, re-ask, or stop the flow.
"""

from __future__ import annotations

from typing import Any


class SopforgeError(Exception):
    """Base class; ``str(err)`` is the one line shown to the user."""

    exit_code = 1


class UserError(SopforgeError):
    """Bad input or configuration: names the problem and the fix. Never retried."""

    exit_code = 2


class ProviderError(SopforgeError):
    """An LLM provider call failed.

    The message is redacted on construction: providers quote the key they were given (masked or
    not) in their error text, and this message reaches the store, the terminal and Prefect's logs.

    Attributes:
        retryable: True for 429, 5xx, timeouts and dropped connections.
        retry_after: seconds the server asked us to wait, when it said so.
        rate_limit: the rate-limit headers of the error response (``sopforge.llm.limits.RateLimitInfo``).
    """

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 status: int | None = None, rate_limit: Any = None):
        from sopforge.store.redact import redact_text  # imported late: the store imports this module

        super().__init__(redact_text(message))
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.rate_limit = rate_limit


class BudgetExceeded(SopforgeError):
    """The next LLM call could cost more than what is left of ``--max-cost``: the run stops before
    paying for it, with every finished stage kept, and ``sopforge rerun`` continues it."""

    exit_code = 5


class Interrupted(SopforgeError):
    """The process was asked to stop (SIGINT: Ctrl-C, or SIGTERM) while it ran a run; the run is stored
    as ``interrupted`` and ``sopforge rerun`` resumes it. Exits as a shell reports the signal: 130 or 143."""

    def __init__(self, message: str, *, signal_name: str):
        super().__init__(message)
        self.exit_code = 143 if signal_name == "SIGTERM" else 130


class ResponsePending(SopforgeError):
    """The exchange provider wrote a request and no response file exists yet."""

    exit_code = 3

    def __init__(self, message: str, *, request_path: str):
        super().__init__(message)
        self.request_path = request_path


class ValidationFailed(SopforgeError):
    """An artifact failed its checks after every allowed re-ask.

    Attributes:
        report: the failing checks, as dicts (name, message, severity).
    """

    def __init__(self, message: str, report: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.report = report or []


class NeedsReview(SopforgeError):
    """A review gate stopped the run: a check failed under ``--review auto``, the reviewer
    rejected the release, or nobody answered in time. The run keeps every artifact."""

    exit_code = 4


class ReviewRejected(NeedsReview):
    """A reviewer rejected an artifact the flow cannot regenerate (the release package);
    ``reason`` is their feedback."""

    def __init__(self, reason: str):
        super().__init__(f"review rejected: {reason}")
        self.reason = reason
