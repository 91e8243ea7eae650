"""Error mapping and response checks shared by the HTTP providers (Anthropic, OpenAI).

Both SDKs are created with ``max_retries=0``: the gateway owns retries so that every
attempt is counted, rate-limited and recorded in one place. This module turns what the
SDKs raise into ``ProviderError`` with a ``retryable`` verdict the gateway can act on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from sopforge.errors import ProviderError
from sopforge.llm.limits import RateLimitInfo

# 408 request timeout, 409 conflict (Anthropic uses it for transient lock contention),
# 429 rate limit; every 5xx including Anthropic's 529 "overloaded" is the server's problem.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
_MAX_MESSAGE_CHARS = 500
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}

_KEY_HINTS = {401: "check the API key", 403: "the API key lacks permission for this model",
              404: "check the model name and base URL"}


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth retrying with backoff."""
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be delta-seconds or an HTTP date (RFC 9110); an unparseable value is
    ignored rather than trusted, so the gateway falls back to its own backoff.
    """
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def server_message(body: object) -> str | None:
    """The human-readable message from either API's error envelope, if any."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


def status_error(provider: str, status: int, message: str | None,
                 headers: Mapping[str, str] | None) -> ProviderError:
    """A ``ProviderError`` for an HTTP error status.

    The message carries the status and the server's own explanation, never request headers
    (that is where the API key lives).
    """
    detail = (message or "no error message in the response body")[:_MAX_MESSAGE_CHARS]
    hint = _KEY_HINTS.get(status)
    text = f"{provider} returned HTTP {status}: {detail}" + (f" ({hint})" if hint else "")
    retryable = is_retryable_status(status)
    retry_after = parse_retry_after(headers) if retryable else None
    return ProviderError(text, retryable=retryable, retry_after=retry_after, status=status,
                         rate_limit=RateLimitInfo.from_headers(headers))


def connection_error(provider: str, base_url: str | None, cause: BaseException) -> ProviderError:
    """A failed connection. Refused on a loopback address means no server is running there: retrying
    for a minute cannot help, so it fails at once with what to do (a remote refusal is retried)."""
    host = urlsplit(base_url).hostname if base_url else None
    refused = isinstance(cause, ConnectionRefusedError) or "connection refused" in str(cause).lower() \
        or "errno 111" in str(cause).lower()
    if refused and host in _LOOPBACK:
        return ProviderError(f"{provider}: nothing is listening at {base_url} (connection refused): start the "
                             "server or fix --base-url", retryable=False)
    return ProviderError(f"{provider}: connection failed: {cause}", retryable=True)


@contextmanager
def sdk_errors(provider: str, base_url: str | None, timeout: float, sdk: Any, base_error: type) -> Iterator[None]:
    """Turn what an SDK raises into ``ProviderError`` (the openai and anthropic SDKs name their
    exception classes alike); ``base_error`` is the SDK's root class."""
    try:
        yield
    except sdk.APIStatusError as err:
        message = getattr(err, "api_message", None) or server_message(err.body)
        raise status_error(provider, err.status_code, message, err.response.headers) from None
    except sdk.APITimeoutError:
        raise ProviderError(f"{provider}: no response within {timeout:g}s", retryable=True) from None
    except sdk.APIConnectionError as err:
        raise connection_error(provider, base_url, root_cause(err)) from None
    except sdk.APIResponseValidationError as err:
        raise malformed(provider, str(err), err.status_code) from None
    except base_error as err:
        raise ProviderError(f"{provider}: {type(err).__name__}: {err}", retryable=False) from None


def root_cause(err: BaseException) -> BaseException:
    """The innermost cause of an SDK connection error (httpx wraps the OS error twice)."""
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return err


def malformed(provider: str, detail: str, status: int | None = 200) -> ProviderError:
    """A 200 we cannot use: retried, because proxies and overloaded servers produce these."""
    return ProviderError(f"{provider}: malformed response body ({detail})", retryable=True, status=status)


def json_body(provider: str, text: str) -> dict[str, Any]:
    """Parse a success body, raising the retryable malformed-body error when it is not a JSON object."""
    try:
        body = json.loads(text)
    except ValueError:
        snippet = text[:80].replace("\n", " ")
        raise malformed(provider, f"not JSON: {snippet!r}") from None
    if not isinstance(body, dict):
        raise malformed(provider, f"expected a JSON object, got {type(body).__name__}")
    return body


def as_int(value: Any) -> int:
    """Token counts may be null or absent in OpenAI-compatible servers; treat those as 0."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
