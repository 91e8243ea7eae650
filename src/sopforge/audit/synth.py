"""Arguments for the parameters a CSV row does not hold, so the audit can call every tool.

Published folders have tools whose required parameters are not CSV columns (an image path, a
list of problem types an earlier tool returns). An audit that calls only the tools it can feed
from the CSV never sees the stubs among the others. Values come, in this order, from:

1. the row: a CSV column of the same name (the oracle's arguments, ``checks_specs``);
2. the dependency graph: a field of the same name that another tool returned on the same row;
3. the toolspec: ``enum``/``const``/``examples``/``default``, then the ``format`` (date, email,
   uri, ...) and bounds of the type, varied with the row so that distinct rows pass distinct
   values (a tool whose result does not change with them is then visible).

Values of kind 3 are made up: a tool that computes from them cannot be expected to reproduce
the row's CSV cells, so the runtime checks weigh their calls accordingly (see ``checks_runtime``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["alternative", "synthesize"]

_MAX_DEPTH = 4


def _pick(options: list, index: int) -> Any:
    return options[index % len(options)]


def synthesize(name: str, schema: Any, index: int, depth: int = 0) -> Any:
    """A value for parameter ``name`` of JSON Schema ``schema``, varied by ``index`` (the row).

    Args:
        name: the parameter's name (used in made-up strings, so they read as what they stand for).
        schema: its property schema from inputSchema.json (anything: an unusable schema gives a string).
        index: the row number; consecutive rows get distinct values where the schema allows.
        depth: nesting depth (arrays and objects), capped.

    Returns:
        A JSON value valid for the schema's type, enum and bounds where these say enough.
    """
    schema = schema if isinstance(schema, dict) else {}
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _pick(schema["enum"], index)
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return _pick(schema["examples"], index)
    if "example" in schema:
        return schema["example"]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            usable = [s for s in schema[key] if isinstance(s, dict) and s.get("type") != "null"] or schema[key]
            return synthesize(name, usable[0], index, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return int(_bounded(schema, index + 1))
    if kind == "number":
        return float(_bounded(schema, index + 1.5))
    if kind == "boolean":
        return index % 2 == 0
    if kind == "null":
        return None
    if kind == "array":
        if depth >= _MAX_DEPTH:
            return []
        count = max(2, int(schema.get("minItems", 2) or 2))  # two items: a list whose order can change
        most = schema.get("maxItems")
        count = min(count, 3, most) if isinstance(most, int) and not isinstance(most, bool) else min(count, 3)
        return [synthesize(name, schema.get("items"), index + i, depth + 1) for i in range(count)]
    if kind == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)] or list(props)
        if depth >= _MAX_DEPTH:
            return {}
        return {r: synthesize(r, props.get(r), index, depth + 1) for r in required[:8]}
    if "default" in schema:
        return schema["default"]
    return _string(name, schema, index)


def _bounded(schema: dict, value: float) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    low = low if isinstance(low, (int, float)) and not isinstance(low, bool) else None
    high = high if isinstance(high, (int, float)) and not isinstance(high, bool) else None
    if low is not None and high is not None and high > low:
        span = high - low
        return low + (value % (span + 1) if isinstance(low, int) and isinstance(high, int) else (value % 10) * span / 10)
    if low is not None:
        return low + value
    if high is not None:
        return high - value
    return value


def _string(name: str, schema: dict, index: int) -> str:
    fmt = schema.get("format")
    day = dt.date(2024, 1, 1) + dt.timedelta(days=index)
    if fmt == "date":
        return day.isoformat()
    if fmt == "date-time":
        return f"{day.isoformat()}T09:00:00Z"
    if fmt == "time":
        return f"{9 + index % 8:02d}:00:00"
    if fmt == "email":
        return f"{name.lower()}{index + 1}@example.com"
    if fmt in ("uri", "url", "iri"):
        return f"https://example.com/{name}/{index + 1}"
    if fmt == "uuid":
        return f"00000000-0000-4000-8000-{index + 1:012d}"
    return f"{name}-{index + 1:03d}"


def alternative(name: str, schema: Any, index: int, current: Any) -> Any:
    """Another value of the same kind as ``current``, for varying one parameter alone.

    Synthesizes for nearby rows until a different value comes out; None when the schema
    allows only one value (``const``, a one-element enum).
    """
    for step in range(1, 8):
        value = synthesize(name, schema, index + step)
        if value != current:
            return value
    return None
