"""Make run configuration safe to store: JSON-only values and no secrets.

The store is shared, exported and queried by hand, so a secret that reaches it leaks. Secrets
are recognised by type (pydantic ``SecretStr``/``SecretBytes``) and by key name, because a
caller may have already unwrapped a key into a plain string.
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
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        # NaN/Infinity are not JSON; keep them readable rather than failing the run.
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    return str(value)
