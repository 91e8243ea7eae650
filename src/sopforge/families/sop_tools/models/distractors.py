"""Distractor tools and data fields: the artifact of the distractors stage and the parsers of its two answers.

SOP-Bench §3.3.2 adds "semantically similar but functionally redundant" tools and "distractor
variables that appear relevant but are not required" by hand, and never checks them; TELLER
adds in-domain and off-domain distractor APIs. Here each one is generated, verified and either
kept or dropped with a reason (issue 5), and only kept items reach an export.

Answer formats (docs/hardening/distractors.md):

* ``<distractor_toolspecs>``: a JSON array of ``{"kind": ..., "toolSpec": {...}}``; ``kind`` sits
  beside ``toolSpec`` so the spec itself is exactly what toolspecs.json will hold.
* ``<distractor_code>``: Python source with one class ``DistractorTools`` (one method per tool).
* ``<distractor_fields>``: a JSON array of ``{"name", "origin": "new", "type", "description",
  "values": [pool]}``, ``{"name", "origin": "new", "type", "description", "depends_on": field,
  "values_by": {value: [pool]}}`` (values that must agree with the row, e.g. a specialty with the
  drug class) or ``{"name", "origin": "existing", "why"}``. Row values of a new field are drawn
  from its pool (the row's own pool with ``depends_on``) with ``random.Random(f"{seed}:{name}")``
  (:func:`assign_values`).
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, extract_json, extract_tag, strip_code_fence
from sopforge.families.sop_tools.models.distractor_code import merge_tools_source
from sopforge.funnel import DroppedItem, FunnelRow

__all__ = [
    "CODE_TAG", "FIELDS_TAG", "KINDS", "ORIGINS", "SPECS_TAG", "DistractorField", "DistractorSet", "DistractorTool",
    "ToolsAnswer", "assign_values", "parse_field_answer", "parse_tools_answer",
]

SPECS_TAG, CODE_TAG, FIELDS_TAG = "distractor_toolspecs", "distractor_code", "distractor_fields"
ToolKind = Literal["similar", "redundant", "subtly_different", "off_domain"]
KINDS: tuple[str, ...] = ("similar", "redundant", "subtly_different", "off_domain")
ORIGINS: tuple[str, ...] = ("new", "existing")


class DistractorTool(BaseModel):
    """One proposed distractor tool and its fate."""

    name: str = Field(description="Tool name (the toolSpec name and the DistractorTools method).")
    kind: ToolKind = Field(description="similar / redundant / subtly_different (in-domain look-alikes) or off_domain.")
    spec: dict[str, Any] = Field(description="The Bedrock toolSpec (name, description, inputSchema.json), as exported.")
    kept: bool = Field(False, description="Passed every check and is exported.")
    reason: str = Field("", description="Why it was dropped; empty when kept.")


class DistractorField(BaseModel):
    """One proposed distractor data column and its fate."""

    name: str = Field(description="Column name (snake_case).")
    origin: Literal["new", "existing"] = Field(description="'new': a column added by this stage; 'existing': a "
                                                           "schema field claimed to drive no decision.")
    type: str = Field(description="Schema type of the column (string, integer, float, boolean, date, enum, ...).")
    description: str = Field(description="What the column holds (new) or why it looks relevant (existing).")
    pool: list[Any] = Field(default_factory=list, description="The model's pool of plausible values (new fields).")
    depends_on: str | None = Field(None, description=(
        "An existing enum or boolean field the plausible values depend on (a drug's specialty on its class); "
        "each row then draws from the pool of its own value."))
    pools: dict[str, list[Any]] = Field(default_factory=dict, description=(
        "With depends_on: the value of that field (booleans as 'true'/'false') -> the pool for such rows."))
    values: dict[str, Any] = Field(default_factory=dict,
                                   description="Row id -> value, drawn from pool with a seeded RNG (new fields only).")
    kept: bool = Field(False, description="Verified by perturbation and exported.")
    reason: str = Field("", description="Why it was dropped, or what verification showed when kept.")
    changed_tasks: list[str] = Field(default_factory=list,
                                     description="Tasks whose answer changed when the column was perturbed.")


class DistractorSet(BaseModel):
    """The distractors stage artifact: every proposed tool and field with its fate, and the kept mixin code."""

    tools: list[DistractorTool] = Field(default_factory=list, description="Every proposed tool, kept or not.")
    fields: list[DistractorField] = Field(default_factory=list, description="Every proposed field, kept or not.")
    code: str = Field("", description="Source of the DistractorTools mixin with only the kept tools ('' if none).")
    seed: int = Field(0, description="Seed of the value assignment and of the perturbations.")
    funnel: list[FunnelRow] = Field(default_factory=list, description="Counts per component and type.")
    drops: list[DroppedItem] = Field(default_factory=list, description="Every dropped item with its reason.")

    def kept_tools(self) -> list[DistractorTool]:
        """Tools that passed verification, in answer order."""
        return [t for t in self.tools if t.kept]

    def kept_fields(self) -> list[DistractorField]:
        """Fields that passed verification, in answer order."""
        return [f for f in self.fields if f.kept]

    def distractor_columns(self) -> list[str]:
        """Names of the kept fields, new and existing (metadata: which columns are distractors)."""
        return [f.name for f in self.kept_fields()]

    def exported_toolspecs(self, base_specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The ``with_distractors`` registry: the base entries unchanged, then ``{"toolSpec": spec}`` per kept tool."""
        return [*base_specs, *({"toolSpec": t.spec} for t in self.kept_tools())]

    def merged_tools_source(self, base_source: str, class_name: str) -> str:
        """tools.py whose Manager also exposes the kept distractor tools (``base_source`` if none is kept)."""
        return merge_tools_source(base_source, class_name, self.code, [t.name for t in self.kept_tools()])

    def rows_with_fields(self, rows: list[dict[str, Any]], id_field: str) -> list[dict[str, Any]]:
        """``rows`` with the value of every kept new field added (existing distractor fields are already there)."""
        added = [f for f in self.kept_fields() if f.origin == "new"]
        return [{**row, **{f.name: f.values.get(str(row.get(id_field))) for f in added}} for row in rows]


# --------------------------------------------------------------------------------------- parsers

class ToolsAnswer(BaseModel):
    """The parsed distractor-tools answer: the proposed tools (not yet verified) and the code."""

    tools: list[DistractorTool]
    code: str


def parse_tools_answer(raw_text: str) -> ToolsAnswer:
    """Read ``<distractor_toolspecs>`` and ``<distractor_code>`` (docs/hardening/distractors.md).

    Only the shape is judged here; names, specs and code are verified per tool later.

    Raises:
        ParseError: A block is missing, the JSON is not an array of {"kind", "toolSpec"} objects,
            a kind is unknown, a toolSpec has no name, or the code block is empty.
    """
    data = extract_json(extract_tag(raw_text, SPECS_TAG))
    if not isinstance(data, list) or not data:
        raise ParseError(f"<{SPECS_TAG}> must hold a non-empty JSON array of {{\"kind\": ..., \"toolSpec\": ...}}")
    tools = []
    for i, element in enumerate(data):
        spec = element.get("toolSpec") if isinstance(element, dict) else None
        if not isinstance(spec, dict):
            raise ParseError(f"<{SPECS_TAG}> element {i} must be an object with a \"toolSpec\" object beside \"kind\"")
        name = spec.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ParseError(f"<{SPECS_TAG}> element {i}: the toolSpec needs a \"name\" string")
        kind = element.get("kind")
        if kind not in KINDS:
            raise ParseError(f"<{SPECS_TAG}> element {i} ({name}): \"kind\" must be one of {', '.join(KINDS)}, "
                             f"not {kind!r}")
        tools.append(DistractorTool(name=name.strip(), kind=kind, spec=spec))
    code = strip_code_fence(extract_tag(raw_text, CODE_TAG))
    if not code.strip():
        raise ParseError(f"<{CODE_TAG}> is empty; write the DistractorTools class inside it")
    return ToolsAnswer(tools=tools, code=code.rstrip() + "\n")


def parse_field_answer(raw_text: str) -> list[DistractorField]:
    """Read ``<distractor_fields>`` into unverified fields (values not yet assigned).

    Raises:
        ParseError: Not a JSON array of objects, an unknown origin, a missing name, or a new
            field without a type, a description or a non-empty list of values.
    """
    data = extract_json(extract_tag(raw_text, FIELDS_TAG))
    if not isinstance(data, list) or not data:
        raise ParseError(f"<{FIELDS_TAG}> must hold a non-empty JSON array of field objects")
    fields = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise ParseError(f"<{FIELDS_TAG}> element {i} must be an object with a \"name\" string")
        name, origin = item["name"].strip(), item.get("origin")
        if origin not in ORIGINS:
            raise ParseError(f"<{FIELDS_TAG}> element {i} ({name}): \"origin\" must be \"new\" or \"existing\", "
                             f"not {origin!r}")
        if origin == "existing":
            fields.append(DistractorField(name=name, origin="existing", type="", description=str(item.get("why", ""))))
            continue
        missing = [k for k in ("type", "description") if not isinstance(item.get(k), str) or not item[k].strip()]
        depends_on = item.get("depends_on")
        if depends_on is not None:
            by_value = item.get("values_by")
            if not isinstance(depends_on, str) or not isinstance(by_value, dict) or not by_value or not all(
                    isinstance(v, list) and v for v in by_value.values()):
                raise ParseError(f"<{FIELDS_TAG}> element {i} ({name}): with \"depends_on\", give \"values_by\": "
                                 "{\"<value of that field>\": [values], ...}, a non-empty list per value")
            if missing:
                raise ParseError(f"<{FIELDS_TAG}> element {i} ({name}): a new field needs {', '.join(missing)}")
            pools = {_label(k): list(v) for k, v in by_value.items()}
            fields.append(DistractorField(name=name, origin="new", type=item["type"].strip().lower(),
                                          description=item["description"].strip(), depends_on=depends_on.strip(),
                                          pools=pools, pool=[x for v in pools.values() for x in v]))
            continue
        if missing or not isinstance(item.get("values"), list) or not item["values"]:
            missing += [] if isinstance(item.get("values"), list) and item["values"] else ["values (a non-empty list)"]
            raise ParseError(f"<{FIELDS_TAG}> element {i} ({name}): a new field needs {', '.join(missing)}")
        fields.append(DistractorField(name=name, origin="new", type=item["type"].strip().lower(),
                                      description=item["description"].strip(), pool=item["values"]))
    return fields


def _label(value: Any) -> str:
    """A condition value as the schema labels it (booleans 'true'/'false', the rest as written)."""
    text = str(value).strip()
    return text.lower() if text.lower() in ("true", "false") else text


def assign_values(field: DistractorField, row_ids: list[str], seed: int,
                  conditions: list[Any] | None = None) -> dict[str, Any]:
    """One value per row, drawn with ``random.Random(f"{seed}:{name}")`` (reproducible).

    Args:
        field: A new field with its pool (or its pools by the value of ``depends_on``).
        row_ids: The rows' ids, in order.
        seed: The stage's seed.
        conditions: With ``depends_on``, each row's value of that field, in the same order: the row
            draws from its own value's pool, so the value is consistent with the row.
    """
    rng = random.Random(f"{seed}:{field.name}")
    if field.depends_on is None or conditions is None:
        return {row_id: rng.choice(field.pool) for row_id in row_ids}
    return {row_id: rng.choice(field.pools[_label(("true" if c else "false") if isinstance(c, bool) else c)])
            for row_id, c in zip(row_ids, conditions, strict=True)}
