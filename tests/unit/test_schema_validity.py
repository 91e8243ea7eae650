"""A JSON Schema's validity under its draft's metaschema, worked out once per distinct schema."""

from __future__ import annotations

import jsonschema

from sopforge import schema_validity
from sopforge.schema_validity import metaschema_error


def test_a_valid_schema_has_no_error_and_an_invalid_one_says_where():
    assert metaschema_error({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}) is None
    error = metaschema_error({"type": "object", "properties": {"n": {"type": "whole number"}}})
    assert isinstance(error, jsonschema.exceptions.SchemaError)
    assert list(error.path) == ["properties", "n", "type"] and "whole number" in error.message


def test_the_draft_named_by_the_schema_is_the_one_checked():
    # exclusiveMinimum is a boolean in draft 4 and a number from draft 6 on
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 0, "exclusiveMinimum": True}
    assert metaschema_error(draft4) is None
    assert metaschema_error({"minimum": 0, "exclusiveMinimum": True}) is not None  # 2020-12 when none is named


def test_each_distinct_schema_is_checked_once(monkeypatch):
    checked: list[object] = []
    real = schema_validity._check_against_metaschema

    def counting(schema):
        checked.append(schema)
        return real(schema)

    monkeypatch.setattr(schema_validity, "_check_against_metaschema", counting)
    monkeypatch.setattr(schema_validity, "_verdicts", {})
    first = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}
    assert [metaschema_error(dict(first)) for _ in range(3)] == [None, None, None]
    assert checked == [first]
    bad = {"type": "object", "required": "when"}
    assert metaschema_error(bad) is metaschema_error(dict(bad)) is not None
    # equal as JSON text would make these one schema; they are not the same schema
    assert metaschema_error({"minimum": 1}) is None and metaschema_error({"minimum": "1"}) is not None
    assert len(checked) == 4
