"""Helpers shared by the tool checks (:mod:`sopforge.families.sop_tools.verify.tool_checks`, ``tool_runtime``, ``tool_judging``).

Message building (one actionable line, the first few problems quoted), problems grouped by kind,
the JSON Schema validity of a toolSpec's ``inputSchema.json`` and a dataset row typed as the
Manager reads it back from the bundle CSV.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from sopforge.parsing import one_line
from sopforge.checks import CheckResult, check
from sopforge.schema_validity import metaschema_error
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.tools import ToolSpecs, csv_cell, parse_cell

__all__ = ["CSV_FILE", "MAX_QUOTED", "typed_row"]

CSV_FILE = "test_set_with_outputs.csv"
MAX_QUOTED = 3


def _result(name: str, bad: list[str], fail: str, ok: str, *, severity: Literal["error", "warning"] = "error",
            **details: Any) -> CheckResult:
    return check(name, not bad, fail if bad else ok, severity=severity, **details)


def _few(items: list[str], sep: str = "; ") -> str:
    shown = sep.join(items[:MAX_QUOTED])
    return shown + (f"{sep}… {len(items) - MAX_QUOTED} more" if len(items) > MAX_QUOTED else "")


def _set_diff(have: list[str], want: list[str], source: str = "the graph") -> str:
    """'missing a, b; not in <source> c' (empty when the two agree)."""
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    return "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                     + ([f"not in {source} {', '.join(extra)}"] if extra else []))


def _short(value: Any, limit: int = 120) -> str:
    return one_line(json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr), limit)


class _Findings:
    """Problems grouped by kind, so a message shows each distinct problem once, with its first row."""

    def __init__(self) -> None:
        self.groups: dict[Any, tuple[str, list[str]]] = {}

    def add(self, key: Any, label: str, text: str) -> None:
        self.groups.setdefault(key, (text, []))[1].append(label)

    @property
    def rows(self) -> int:
        return len({label for _, labels in self.groups.values() for label in labels})

    def lines(self) -> list[str]:
        out = []
        for text, labels in self.groups.values():
            more = len(labels) - 1
            out.append(f"{text} ({labels[0]}" + (f" and {more} more row{'s' if more > 1 else ''})" if more else ")"))
        return out


# ----------------------------------------------------------------------------- toolspecs (JSON Schema)

def _valid_schemas(specs: ToolSpecs) -> dict[str, dict[str, Any]]:
    """name -> inputSchema.json for specs whose schema is a valid object schema."""
    found = {}
    for spec in specs.specs:
        schema = (spec.get("inputSchema") or {}).get("json") if isinstance(spec.get("inputSchema"), dict) else None
        if isinstance(spec.get("name"), str) and isinstance(schema, dict) and _schema_problem(schema) is None:
            found.setdefault(spec["name"], schema)
    return found


def _schema_problem(schema: dict[str, Any]) -> str | None:
    error = metaschema_error(schema)
    if error is not None:
        where = "/".join(map(str, error.path)) or "json"
        return f"invalid JSON Schema at {where}: {one_line(error.message, 100)}"
    remote = _remote_refs(schema)
    if remote:
        return f"only local \"$ref\" (\"#/...\") is allowed, not {remote[0]!r}"
    if schema.get("type") != "object":
        return "inputSchema.json must have \"type\": \"object\""
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        return "\"properties\" must be an object"
    extra = [r for r in schema.get("required", []) if r not in props]
    if extra:
        return f"\"required\" names {', '.join(map(str, extra))}, which \"properties\" does not define"
    return None


def _remote_refs(node: Any) -> list[str]:
    # A remote $ref would make the validator fetch it over the network, in this process.
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) and not node["$ref"].startswith("#") else []
        return own + [r for v in node.values() for r in _remote_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _remote_refs(v)]
    return []


def _validator(schema: dict[str, Any]):
    from jsonschema import validators  # loaded by the checks, not by every command that loads the family

    cls = validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def typed_row(row: dict[str, Any], schema: DataSchema) -> dict[str, Any]:
    """A dataset row as the Manager reads it: written to the CSV, then converted by schema type."""
    types = {f.name: f.type for f in schema.fields}
    # A conditional field without a value is an empty cell, read back as no value (None).
    return {k: None if v is None else parse_cell(csv_cell(v), types.get(k, "string")) for k, v in row.items()}
