"""Make what sopforge stores or prints safe: JSON-only values and no secrets.

The store is shared, exported and queried by hand, and errors reach terminals, logs and the
Prefect UI, so a secret that reaches any of them leaks. Secrets are recognised by type
(pydantic ``SecretStr``/``SecretBytes``), by key name (a caller may have already unwrapped a key
into a plain string), and in free text by shape: providers quote the key they were given in
their error messages, often half-masked (``Incorrect API key provided: sk-canar**********Z123``),
and even a masked key tells a reader its prefix, length and last characters.

This module imports nothing from sopforge, so any layer (errors, the LLM providers, the CLI) can
use :func:`redact_text` without import cycles.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr

REDACTED = "[redacted]"

# Deliberately not a bare "token": max_tokens and input_tokens are ordinary parameters.
_SECRET_KEY = re.compile(
    r"(api[_-]?key|secret|passw(or)?d|authori[sz]ation|credential|private[_-]?key|"
    r"(access|auth|bearer|refresh|session|id)[_-]?token)",
    re.IGNORECASE,
)


# Key-like fragments in free text, masked or not. Each alternative is a shape providers and
# proxies use; a fragment must be long enough that ordinary words never match.
_KEY_LIKE = re.compile(
    r"\bBearer\s+[A-Za-z0-9_\-.=+/]{8,}"                      # Authorization header values
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_\-*]{6,}"                     # OpenAI, Anthropic (sk-ant-...), Stripe
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"                          # AWS access key ids
    r"|\bAIza[0-9A-Za-z_\-]{20,}"                              # Google API keys
    r"|\b(?:ghp|gho|ghu|ghs|ghr|github_pat|glpat|hf|xox[abposr])_[A-Za-z0-9_\-]{10,}"  # GitHub, GitLab, HF, Slack
    r"|[A-Za-z0-9_\-]{2,}\*{3,}[A-Za-z0-9_\-]{2,}"             # any masked secret: prefix****suffix
)
# ``api_key=…``, ``"x-api-key": "…"``, ``password: …``: the value after a secret's name.
_NAMED_SECRET = re.compile(
    r"(?i)(\b[\w-]*(?:api[_-]?key|secret|passw(?:or)?d|private[_-]?key|(?:access|auth|refresh|session)[_-]?token)"
    r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&]+)")


def redact_text(text: str) -> str:
    """``text`` with every key-like fragment replaced by ``[redacted]``.

    Args:
        text: Free text from outside sopforge: a provider's error message, a traceback line.

    Returns:
        The same text; only fragments shaped like credentials are replaced.
    """
    if not text:
        return text
    text = _KEY_LIKE.sub(REDACTED, text)
    return _NAMED_SECRET.sub(lambda m: m.group(1) + (m.group(2) if m.group(2) == REDACTED else REDACTED), text)


def is_secret_key(key: str) -> bool:
    """True when a config key names a secret (``api_key``, ``OPENAI_API_KEY``, ``password``...)."""
    return bool(_SECRET_KEY.search(key))


def scrub(value: Any) -> Any:
    """Return ``value`` as plain JSON data with every secret replaced by ``"[redacted]"``.

    Args:
        value: Configuration: dicts, lists, scalars, pydantic models, paths, enums, dates.

    Returns:
        A structure of dict/list/str/int/float/bool/None that ``json.dumps`` accepts.
    """
    if isinstance(value, (SecretStr, SecretBytes)):
        return REDACTED
    if isinstance(value, BaseModel):
        # Dump field by field so SecretStr fields are seen as such, not as '**********'.
        return scrub({name: getattr(value, name) for name in type(value).model_fields})
    if isinstance(value, Mapping):
        return {str(k): (REDACTED if is_secret_key(str(k)) and v is not None else scrub(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [scrub(v) for v in value]
    if isinstance(value, Enum):
        return scrub(value.value)
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        # NaN/Infinity are not JSON; keep them readable rather than failing the run.
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    return redact_text(str(value))
