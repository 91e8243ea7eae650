"""DataSchema: the fields of one SOP's data, split into existing inputs and to-be-obtained outputs.

Source: SOP-Bench C.2 (field lines) + TELLER P2 (the two partitions). The line grammar is
fixed in ``docs/formats.md``; the parser is strict so a malformed line is re-asked, never
guessed at. Decision fields become SOP-Bench output columns, so their labels must survive
pandas' NA parsing and the harness's substring matcher (``research/sopbench_format.md`` §3.2–3.3).
"""

from __future__ import annotations

import itertools
import re
from typing import Literal

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, extract_tag, one_line
from sopforge.schemas.checks import CheckResult, check

__all__ = [
    "ALLOWED_TYPES",
    "NUMERIC_TYPES",
    "NA_TOKENS",
    "MAX_FIELDS",
    "FieldSpec",
    "DataSchema",
    "check_schema",
    "normalize_label",
]

ALLOWED_TYPES: tuple[str, ...] = (
    "string", "integer", "float", "boolean", "date", "datetime", "enum",
    "list[string]", "list[integer]", "list[float]",
)
NUMERIC_TYPES: frozenset[str] = frozenset({"integer", "float"})
MAX_FIELDS = 50
SNAKE_CASE_RE = re.compile(r"^[a-z][a-z0-9_]*$")

# pandas.read_csv's default NA tokens (compared case-insensitively, so 'none' is refused too):
# a label spelled like one of these is read back as a missing value. 'unknown' is added because
# SOP-Bench's matcher treats it as a null-like prediction (sopbench_format.md §3.3).
NA_TOKENS: frozenset[str] = frozenset(t.lower() for t in (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null", "unknown",
))

_BLOCKS = (("Existing_fields", "existing"), ("Field_to_be_obtained", "to_be_obtained"))
_FORMAT_HINT = "name - type, description (e.g., example) [annotations]"
# The type is everything between ' - ' and the first comma; list types carry brackets.
_LINE_RE = re.compile(r"^(?P<name>\S+)\s+-\s+(?P<type>list\s*\[\s*\w+\s*\]|[A-Za-z_]+)\s*,\s*(?P<rest>.*\S)\s*$")
_TRAILING_ANNOTATION_RE = re.compile(r"\s*\[(?P<body>[^\[\]]*)\]\s*$")
_EXAMPLE_RE = re.compile(r"^(?P<desc>.*?)\s*\(\s*e\.g\.\s*,?\s*(?P<example>.*)\)$", re.DOTALL)
_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
_RANGE_RE = re.compile(rf"^range\s*:\s*(?P<low>{_NUMBER})\s+to\s+(?P<high>{_NUMBER})$", re.IGNORECASE)
_BULLET_RE = re.compile(r"^[-*•]\s+")


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
        for tag, role in _BLOCKS:
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
        for tag, role in _BLOCKS:
            lines = "\n".join(f.to_line() for f in self.fields if f.role == role)
            blocks.append(f"<{tag}>\n{lines}\n</{tag}>")
        return "\n".join(blocks)

    def checks(self) -> list[CheckResult]:
        """Run :func:`check_schema` on this artifact."""
        return check_schema(self)


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
    choices = minimum = maximum = None
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
        else:
            raise ParseError(f"<{tag}> line has an unknown annotation [{ann}] (allowed: choices, range, decision): {one_line(line)!r}")
        rest = rest[: a.start()]
    e = _EXAMPLE_RE.match(rest.strip())
    if not e or not e.group("desc").strip() or not e.group("example").strip():
        raise ParseError(f"<{tag}> line needs a description and '(e.g., example)': {one_line(line)!r}")
    return FieldSpec(
        name=m.group("name"), type=re.sub(r"\s+", "", m.group("type")).lower(),
        description=e.group("desc").strip().rstrip(","), example=e.group("example").strip(),
        choices=choices, minimum=minimum, maximum=maximum, role=role, decision=decision,
    )


def normalize_label(label: str) -> str:
    """Normalise a label the way SOP-Bench's matcher compares it (lower-case, ``_``/``-`` → space)."""
    return " ".join(label.lower().replace("_", " ").replace("-", " ").split())


def _result(name: str, bad: list[str], fail: str, ok: str, **details) -> CheckResult:
    return check(name, not bad, fail if bad else ok, **details)


def check_schema(schema: DataSchema) -> list[CheckResult]:
    """Checks that must hold before the SOP stage runs (DESIGN, chain row 'schema').

    Args:
        schema: A parsed data schema.

    Returns:
        One CheckResult per check, passed or not.
    """
    fields = schema.fields
    results = []

    bad_names = [f.name for f in fields if not SNAKE_CASE_RE.match(f.name)]
    results.append(_result("schema.names_snake_case", bad_names,
                           f"field names are not snake_case: {', '.join(bad_names)}; use lower_case_with_underscores",
                           "all names are snake_case", names=bad_names))

    counts: dict[str, int] = {}
    for f in fields:
        counts[f.name] = counts.get(f.name, 0) + 1
    dupes = [n for n, c in counts.items() if c > 1]
    results.append(_result("schema.names_unique", dupes,
                           f"field names used more than once: {', '.join(dupes)}; give every field its own name",
                           "names are unique", names=dupes))

    bad_types = [f"{f.name} ({f.type})" for f in fields if f.type not in ALLOWED_TYPES]
    results.append(_result("schema.types_allowed", bad_types,
                           f"unknown types: {', '.join(bad_types)}; use one of: {', '.join(ALLOWED_TYPES)}",
                           "all types are allowed", fields=bad_types))

    bad_choices = []
    for f in fields:
        if f.type == "enum" and len(set(f.choices or [])) < 2:
            bad_choices.append(f"{f.name} (enum needs at least 2 choices)")
        elif f.choices is not None and f.type not in ("enum", "string"):
            bad_choices.append(f"{f.name} (choices on a {f.type} field)")
        elif f.choices is not None and len(set(f.choices)) != len(f.choices):
            bad_choices.append(f"{f.name} (repeated choice)")
    results.append(_result("schema.enum_choices", bad_choices,
                           f"bad choices: {'; '.join(bad_choices)}; write [choices: a | b | c] on enum (or string) fields only",
                           "enum fields list their choices", fields=bad_choices))

    bad_ranges = []
    for f in fields:
        if f.minimum is None:
            continue
        if f.type not in NUMERIC_TYPES:
            bad_ranges.append(f"{f.name} (range on a {f.type} field)")
        elif f.minimum > f.maximum:
            bad_ranges.append(f"{f.name} ({f.minimum} > {f.maximum})")
    results.append(_result("schema.ranges_valid", bad_ranges,
                           f"bad ranges: {'; '.join(bad_ranges)}; ranges go on integer/float fields as [range: LOW to HIGH] with LOW <= HIGH",
                           "ranges are valid", fields=bad_ranges))

    empty = [tag for tag, role in _BLOCKS if not any(f.role == role for f in fields)]
    results.append(_result("schema.partitions_non_empty", empty,
                           f"empty partition(s): {', '.join('<' + t + '>' for t in empty)}; both must list at least one field",
                           "both partitions are non-empty", empty=empty))

    too_many = [str(len(fields))] if len(fields) > MAX_FIELDS else []
    results.append(_result("schema.field_count", too_many,
                           f"{len(fields)} fields; keep at most {MAX_FIELDS}", f"{len(fields)} fields", count=len(fields)))

    decisions = schema.decisions
    results.append(check("schema.decision_present", bool(decisions),
                         "no field is marked [decision]; mark the final answer(s) in <Field_to_be_obtained> with [decision]"
                         if not decisions else f"decision fields: {', '.join(f.name for f in decisions)}",
                         fields=[f.name for f in decisions]))

    bad_decisions = [f"{f.name} ({'an existing field' if f.role == 'existing' else f.type})"
                     for f in decisions if f.role != "to_be_obtained" or f.type not in ("enum", "boolean")]
    results.append(_result("schema.decision_fields_valid", bad_decisions,
                           f"invalid [decision] fields: {', '.join(bad_decisions)}; a decision must be an enum or boolean field in <Field_to_be_obtained>",
                           "decision fields are enum/boolean outputs", fields=bad_decisions))

    # Every choice list, not only decisions: an input cell "None" reaches the agent as "nan".
    na_labels = [f"{f.name}: {label!r}" for f in fields for label in (f.labels() if f.decision else f.choices or [])
                 if label.strip().lower() in NA_TOKENS]
    results.append(_result("schema.labels_not_na", na_labels,
                           f"labels that read as missing values: {', '.join(na_labels)}; "
                           "use a word such as not_applicable or no_insurance instead",
                           "no label is NA-like", labels=na_labels))

    overlaps = []
    for f in decisions:
        for a, b in itertools.combinations(f.labels(), 2):
            na, nb = normalize_label(a), normalize_label(b)
            if na in nb or nb in na:
                inner, outer = (a, b) if len(na) <= len(nb) else (b, a)
                overlaps.append(f"{f.name}: {inner!r} is inside {outer!r}")
    results.append(_result("schema.decision_labels_distinct", overlaps,
                           f"overlapping decision labels ({'; '.join(overlaps)}): SOP-Bench's lenient matcher accepts one for the other; "
                           "rename so no label contains another (e.g. approved | rejected, not valid | invalid)",
                           "decision labels are distinct", overlaps=overlaps))

    ids = [f.name for f in schema.existing if f.name == "id" or f.name.endswith("_id")]
    results.append(check("schema.unique_id_present", bool(ids),
                         "no existing field looks like a unique row id (name ending in _id); tools need one to look records up"
                         if not ids else f"id field(s): {', '.join(ids)}",
                         severity="warning", fields=ids))
    return results
