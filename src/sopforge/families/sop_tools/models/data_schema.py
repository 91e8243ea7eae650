"""DataSchema: the fields of one SOP's data, split into existing inputs and to-be-obtained outputs.

Source: SOP-Bench C.2 (field lines) + TELLER P2 (the two partitions). The line grammar is
fixed in ``docs/formats.md``; the parser is strict so a malformed line is re-asked, never
guessed at. Decision fields become SOP-Bench output columns, so their labels must survive
pandas' NA parsing and the harness's substring matcher (``research/sopbench_format.md`` §3.2–3.3).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, extract_tag, one_line
from sopforge.labels import NA_TOKENS

__all__ = [
    "ALLOWED_TYPES",
    "NUMERIC_TYPES",
    "NA_TOKENS",
    "MAX_FIELDS",
    "NUMBER_KINDS",
    "Correlation",
    "FieldCondition",
    "FieldSpec",
    "DataSchema",
]

ALLOWED_TYPES: tuple[str, ...] = (
    "string", "integer", "float", "boolean", "date", "datetime", "enum",
    "list[string]", "list[integer]", "list[float]",
)
NUMERIC_TYPES: frozenset[str] = frozenset({"integer", "float"})
MAX_FIELDS = 50
SNAKE_CASE_RE = re.compile(r"^[a-z][a-z0-9_]*$")


BLOCKS = (("Existing_fields", "existing"), ("Field_to_be_obtained", "to_be_obtained"))
_FORMAT_HINT = "name - type, description (e.g., example) [annotations]"
# The type is everything between ' - ' and the first comma; list types carry brackets.
_LINE_RE = re.compile(r"^(?P<name>\S+)\s+-\s+(?P<type>list\s*\[\s*\w+\s*\]|[A-Za-z_]+)\s*,\s*(?P<rest>.*\S)\s*$")
_TRAILING_ANNOTATION_RE = re.compile(r"\s*\[(?P<body>[^\[\]]*)\]\s*$")
_EXAMPLE_RE = re.compile(r"^(?P<desc>.*?)\s*\(\s*e\.g\.\s*,?\s*(?P<example>.*)\)$", re.DOTALL)
_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
_RANGE_RE = re.compile(rf"^range\s*:\s*(?P<low>{_NUMBER})\s+to\s+(?P<high>{_NUMBER})$", re.IGNORECASE)
_BULLET_RE = re.compile(r"^[-*•]\s+")
# [present_if: lost_bag_reported = True] / [present_if: alert_level = moderate | severe]
_PRESENT_IF_RE = re.compile(r"^present_if\s*:\s*(?P<field>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<values>.+)$", re.IGNORECASE)
# [correlates: last_days_supply +] / [correlates: age_years -]
_CORRELATES_RE = re.compile(r"^correlates\s*:\s*(?P<field>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<sign>[+-])$", re.IGNORECASE)
_KIND_RE = re.compile(r"^kind\s*:\s*(?P<kind>[a-z_]+)$", re.IGNORECASE)
_ANNOTATIONS = "choices, range, decision, present_if, correlates, kind"
#: What a number is, which decides what a realistic spread of it looks like (issue 19): a measurement
#: varies from case to case; a count of events is often zero; a parameter is set by policy or
#: configuration (a threshold, a rate, a limit), the same for everyone or fixed per category.
NUMBER_KINDS: tuple[str, ...] = ("measurement", "count", "parameter")
NumberKind = Literal["measurement", "count", "parameter"]


class FieldCondition(BaseModel):
    """When a conditional field has a value: ``field`` holds one of ``values`` (``[present_if: ...]``).

    On every other row the field has no value (``None`` in the rows, an empty CSV cell), instead of
    a placeholder a model would otherwise invent (an all-zero tag number).
    """

    field: str = Field(description="The choice or boolean field the presence depends on.")
    values: list[str] = Field(description="Its values (booleans as 'true'/'false') on which this field has a value.")

    def holds(self, row: dict) -> bool:
        """Whether ``row`` is one on which the conditional field must have a value."""
        value = row.get(self.field)
        label = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return label.lower() in {v.lower() for v in self.values}

    def text(self) -> str:
        return f"{self.field} = " + " | ".join(self.values)


class Correlation(BaseModel):
    """A rank correlation the data must show with another numeric field (``[correlates: field +]``)."""

    field: str = Field(description="The other numeric (or date) field.")
    sign: Literal["+", "-"] = Field(description="'+': both rise together; '-': one falls as the other rises.")


class FieldSpec(BaseModel):
    """One data field, parsed from a schema line."""

    name: str = Field(description="Field name; snake_case is required by the checks.")
    type: str = Field(description="Declared type, lower-cased; one of ALLOWED_TYPES to pass the checks.")
    description: str = Field(description="What the field holds.")
    example: str = Field(description="Example value exactly as written after 'e.g.,' (quotes kept).")
    choices: list[str] | None = Field(None, description="Allowed values from [choices: a | b]; required for enum.")
    minimum: int | float | None = Field(None, description="Inclusive lower bound from [range: LOW to HIGH].")
    maximum: int | float | None = Field(None, description="Inclusive upper bound from [range: LOW to HIGH].")
    role: Literal["existing", "to_be_obtained"] = Field(
        description="'existing': known input of a task; 'to_be_obtained': produced by following the SOP.")
    decision: bool = Field(False, description="True for a final answer the agent must produce ([decision]).")
    present_if: FieldCondition | None = Field(
        None, description="Conditional field: it has a value only on rows where the condition holds ([present_if]).")
    correlates: Correlation | None = Field(None, description="Declared correlation with another field ([correlates]).")
    kind: NumberKind | None = Field(None, description=(
        "Integer and float fields ([kind: ...]): 'measurement' varies from case to case, 'count' counts events and "
        "is often zero, 'parameter' is set by policy or configuration (the same for all cases, or fixed per "
        "category such as a threshold per country). None: not stated (treated as a measurement)."))

    def labels(self) -> list[str]:
        """Values a decision field can take: its choices, or true/false for a boolean."""
        if self.type == "boolean":
            return ["true", "false"]
        return list(self.choices or [])

    def to_line(self) -> str:
        """Render the field back in the schema line grammar."""
        line = f"{self.name} - {self.type}, {self.description} (e.g., {self.example})"
        if self.choices is not None:
            line += " [choices: " + " | ".join(self.choices) + "]"
        if self.minimum is not None and self.maximum is not None:
            line += f" [range: {self.minimum} to {self.maximum}]"
        if self.present_if is not None:
            line += f" [present_if: {self.present_if.text()}]"
        if self.correlates is not None:
            line += f" [correlates: {self.correlates.field} {self.correlates.sign}]"
        if self.kind is not None:
            line += f" [kind: {self.kind}]"
        if self.decision:
            line += " [decision]"
        return line


class DataSchema(BaseModel):
    """The data fields of one SOP: existing inputs first, then to-be-obtained outputs."""

    fields: list[FieldSpec] = Field(description="All fields in the order written; each carries its role.")

    @classmethod
    def parse(cls, raw_text: str) -> DataSchema:
        """Parse a ``<schema>`` block holding ``<Existing_fields>`` and ``<Field_to_be_obtained>``.

        Args:
            raw_text: The model's full answer.

        Returns:
            The parsed schema; run :func:`check_schema` for the semantic checks.

        Raises:
            ParseError: A block is missing or a non-blank line does not match the grammar.
        """
        body = extract_tag(raw_text, "schema")
        fields = []
        for tag, role in BLOCKS:
            for line in extract_tag(body, tag).splitlines():
                if line.strip():
                    fields.append(_parse_line(line, tag, role))
        return cls(fields=fields)

    @property
    def existing(self) -> list[FieldSpec]:
        """Fields known before the SOP runs (task inputs)."""
        return [f for f in self.fields if f.role == "existing"]

    @property
    def to_be_obtained(self) -> list[FieldSpec]:
        """Fields the SOP derives (intermediate values and decisions)."""
        return [f for f in self.fields if f.role == "to_be_obtained"]

    @property
    def decisions(self) -> list[FieldSpec]:
        """Fields marked ``[decision]``: the final answers of a task."""
        return [f for f in self.fields if f.decision]

    @property
    def names(self) -> list[str]:
        """All field names in order."""
        return [f.name for f in self.fields]

    def field(self, name: str) -> FieldSpec:
        """Return the field called ``name``.

        Raises:
            KeyError: No such field.
        """
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"no field named {name!r} in the schema")

    def to_prompt_text(self) -> str:
        """Render both partitions in the schema format, the ``sample_schema`` of the SOP template."""
        blocks = []
        for tag, role in BLOCKS:
            lines = "\n".join(f.to_line() for f in self.fields if f.role == role)
            blocks.append(f"<{tag}>\n{lines}\n</{tag}>")
        return "\n".join(blocks)


def _number(text: str) -> int | float:
    text = text.replace(",", "")
    return float(text) if "." in text else int(text)


def _parse_line(line: str, tag: str, role: str) -> FieldSpec:
    text = _BULLET_RE.sub("", line.strip())
    bad = f"<{tag}> line does not match '{_FORMAT_HINT}': {one_line(line)!r}"
    m = _LINE_RE.match(text)
    if not m:
        raise ParseError(bad)
    rest = m.group("rest")
    choices = minimum = maximum = present_if = correlates = number_kind = None
    decision = False
    seen: set[str] = set()
    while (a := _TRAILING_ANNOTATION_RE.search(rest)) is not None:
        ann = a.group("body").strip()
        kind = ann.split(":", 1)[0].strip().lower()
        if kind in seen:
            raise ParseError(f"<{tag}> line repeats the [{kind}] annotation: {one_line(line)!r}")
        seen.add(kind)
        if kind == "decision" and ":" not in ann:
            decision = True
        elif kind == "choices" and ":" in ann:
            choices = [c.strip().strip("\"'`") for c in ann.split(":", 1)[1].split("|")]
            if any(not c for c in choices):
                raise ParseError(f"<{tag}> line has an empty choice in [{ann}]; separate values with ' | ': {one_line(line)!r}")
        elif kind == "range":
            r = _RANGE_RE.match(ann)
            if not r:
                raise ParseError(f"<{tag}> line has a malformed [{ann}]; write [range: LOW to HIGH] with numbers: {one_line(line)!r}")
            minimum, maximum = _number(r.group("low")), _number(r.group("high"))
        elif kind == "present_if":
            p = _PRESENT_IF_RE.match(ann)
            values = [v.strip().strip("\"'`") for v in p.group("values").split("|")] if p else []
            if not p or any(not v for v in values):
                raise ParseError(f"<{tag}> line has a malformed [{ann}]; write [present_if: other_field = value] or "
                                 f"[present_if: other_field = a | b]: {one_line(line)!r}")
            present_if = FieldCondition(field=p.group("field"), values=[_bool_label(v) for v in values])
        elif kind == "correlates":
            c = _CORRELATES_RE.match(ann)
            if not c:
                raise ParseError(f"<{tag}> line has a malformed [{ann}]; write [correlates: other_field +] or "
                                 f"[correlates: other_field -]: {one_line(line)!r}")
            correlates = Correlation(field=c.group("field"), sign=c.group("sign"))
        elif kind == "kind":
            k = _KIND_RE.match(ann)
            if not k or k.group("kind").lower() not in NUMBER_KINDS:
                raise ParseError(f"<{tag}> line has a malformed [{ann}]; write [kind: measurement], [kind: count] or "
                                 f"[kind: parameter]: {one_line(line)!r}")
            number_kind = k.group("kind").lower()
        else:
            raise ParseError(f"<{tag}> line has an unknown annotation [{ann}] (allowed: {_ANNOTATIONS}): "
                             f"{one_line(line)!r}")
        rest = rest[: a.start()]
    e = _EXAMPLE_RE.match(rest.strip())
    if not e or not e.group("desc").strip() or not e.group("example").strip():
        raise ParseError(f"<{tag}> line needs a description and '(e.g., example)': {one_line(line)!r}")
    return FieldSpec(
        name=m.group("name"), type=re.sub(r"\s+", "", m.group("type")).lower(),
        description=e.group("desc").strip().rstrip(","), example=e.group("example").strip(),
        choices=choices, minimum=minimum, maximum=maximum, role=role, decision=decision,
        present_if=present_if, correlates=correlates, kind=number_kind,
    )


def _bool_label(value: str) -> str:
    # True/False as written in the schema examples; condition labels compare case-insensitively.
    return value.lower() if value.lower() in ("true", "false") else value
