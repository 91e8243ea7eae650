"""Checks a data schema must pass before the SOP stage runs (DESIGN, chain row 'schema')."""

from __future__ import annotations

import itertools

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import (
    ALLOWED_TYPES, BLOCKS, MAX_FIELDS, NUMERIC_TYPES, SNAKE_CASE_RE, DataSchema,
)
from sopforge.families.sop_tools.verify.csv_checks import schema_values_check
from sopforge.families.sop_tools.models.dataset import find_id_field
from sopforge.labels import NA_TOKENS, normalize_label

_ORDERED_TYPES = frozenset({"integer", "float", "date"})

__all__ = ["check_schema"]


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

    empty = [tag for tag, role in BLOCKS if not any(f.role == role for f in fields)]
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

    results.append(schema_values_check(schema))
    results += _annotation_checks(schema)

    # An error, asked again here: without an identifier the tools stage cannot look a record up and
    # would stop the run after the dataset was paid for.
    id_field = find_id_field(schema)
    results.append(check("schema.unique_id_present", id_field is not None,
                         "no existing field identifies a row: add a unique identifier field (a string such as "
                         "claim_id or claim_number, described as the unique identifier of the record); tools look "
                         "records up by it" if id_field is None else f"row identifier: {id_field}",
                         fields=[id_field] if id_field else []))
    return results


def _annotation_checks(schema: DataSchema) -> list[CheckResult]:
    """``schema.conditional_fields``, ``schema.correlations`` and ``schema.number_kinds``: what [present_if],
    [correlates] and [kind] refer to."""
    by_name = {f.name: f for f in schema.fields}
    conditional = []
    for f in schema.fields:
        cond = f.present_if
        if cond is None:
            continue
        other = by_name.get(cond.field)
        if f.role != "existing" or f.decision:
            conditional.append(f"{f.name}: only an existing field can be conditional (the procedure derives "
                               "every to-be-obtained field)")
        elif f.name == find_id_field(schema):
            conditional.append(f"{f.name}: the row identifier must have a value on every row")
        elif other is None or other.role != "existing" or cond.field == f.name:
            conditional.append(f"{f.name}: [present_if] must name another existing field, not {cond.field!r}")
        elif not other.labels() or other.present_if is not None:
            conditional.append(f"{f.name}: {cond.field} must be an enum or boolean field with a value on every row")
        elif unknown := [v for v in cond.values if v.lower() not in {x.lower() for x in other.labels()}]:
            conditional.append(f"{f.name}: {', '.join(unknown)} is not a value of {cond.field} "
                               f"({' | '.join(other.labels())})")
    correlations = []
    for f in schema.fields:
        corr = f.correlates
        if corr is None:
            continue
        other = by_name.get(corr.field)
        if f.role != "existing" or f.type not in _ORDERED_TYPES:
            correlations.append(f"{f.name}: only existing integer, float or date fields can declare a correlation")
        elif other is None or other.role != "existing" or other.type not in _ORDERED_TYPES or other.name == f.name:
            correlations.append(f"{f.name}: {corr.field!r} must be another existing integer, float or date field")
    kinds = [f"{f.name} ({f.type})" for f in schema.fields if f.kind is not None and f.type not in ("integer", "float")]
    return [
        _result("schema.number_kinds", kinds,
                f"[kind: ...] on fields that are not numbers: {', '.join(kinds)}; it says what an integer or float "
                "is (measurement, count or parameter): remove it from other types",
                "[kind] annotations are on numeric fields", fields=kinds),
        _result("schema.conditional_fields", conditional,
                f"bad [present_if] annotations: {'; '.join(conditional)}; write [present_if: other_field = value] on "
                "an existing field that has no value on some rows, naming an existing enum or boolean field",
                "conditional fields name a valid condition", fields=conditional),
        _result("schema.correlations", correlations,
                f"bad [correlates] annotations: {'; '.join(correlations)}",
                "declared correlations name existing ordered fields", fields=correlations),
    ]
