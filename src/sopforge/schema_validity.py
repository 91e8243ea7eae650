"""Whether a JSON Schema is valid under its draft's metaschema, worked out once per distinct schema.

The tools gate, the distractor checks, the package's audit and ``sopforge audit`` check the same
toolspecs' input schemas again and again, and each check of a 2020-12 schema walks that draft's whole
metaschema (dynamic references included): about 0.6 CPU-s of an offline sop_tools generation (py-spy)
before the verdicts were kept.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import SchemaError

__all__ = ["metaschema_error"]

_KEPT = 1024
_verdicts: dict[str, SchemaError | None] = {}
_lock = threading.Lock()


def metaschema_error(schema: dict[str, Any]) -> SchemaError | None:
    """The error ``check_schema`` raises for ``schema`` under its ``$schema`` draft (2020-12 when it names
    none), or None when the schema is valid. The error is shared between callers: read it, do not change it."""
    key = repr(schema)  # exact for JSON data: 1, 1.0, True and "1" all print differently
    with _lock:
        if key in _verdicts:
            return _verdicts[key]
    verdict = _check_against_metaschema(schema)
    with _lock:
        if len(_verdicts) >= _KEPT:
            _verdicts.clear()
        _verdicts[key] = verdict
    return verdict


def _check_against_metaschema(schema: dict[str, Any]) -> SchemaError | None:
    import jsonschema  # 0.1 s: loaded by the first check, not by every command that loads a family

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc
    return None
