"""Tag, YAML, JSON and literal extraction: what a model answer can and cannot get away with."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from sopforge.parsing import (
    ParseError,
    describe_validation_error,
    extract_all_tags,
    extract_json,
    extract_literal,
    extract_tag,
    extract_yaml,
    one_line,
    strip_code_fence,
)


def test_extract_tag_returns_stripped_content():
    assert extract_tag("before <schema>\n  a\n  b\n</schema> after", "schema") == "a\n  b"


def test_extract_tag_takes_the_last_complete_block():
    text = "<sop_analysis>I will write <SOP>draft</SOP> later</sop_analysis>\n<SOP>\nfinal\n</SOP>"
    assert extract_tag(text, "SOP") == "final"


def test_extract_tag_ignores_a_trailing_unclosed_block_after_a_complete_one():
    assert extract_tag("<task>one</task> and then <task>trunc", "task") == "one"


def test_extract_tag_missing_block_names_the_tag():
    with pytest.raises(ParseError) as exc:
        extract_tag("no tags here", "schema")
    assert str(exc.value) == "missing <schema>…</schema> block"


def test_extract_tag_unclosed_block_says_so():
    with pytest.raises(ParseError, match=r"unclosed <SOP> block"):
        extract_tag("<SOP>\n1. Purpose\n...truncated", "SOP")


def test_extract_tag_close_without_open():
    with pytest.raises(ParseError, match=r"</task> without a matching <task>"):
        extract_tag("sub_business: x</task>", "task")


def test_extract_tag_is_case_sensitive():
    with pytest.raises(ParseError, match="missing <SOP>"):
        extract_tag("<sop>text</sop>", "SOP")


def test_extract_tag_does_not_match_a_longer_tag_name():
    with pytest.raises(ParseError):
        extract_tag("<sop_analysis>x</sop_analysis>", "sop")


def test_extract_all_tags_in_order():
    assert extract_all_tags("<a>1</a><b>x</b><a>2</a>", "a") == ["1", "2"]


def test_strip_code_fence():
    assert strip_code_fence("```yaml\nkey: 1\n```") == "key: 1"
    assert strip_code_fence("key: 1") == "key: 1"


def test_extract_yaml_mapping():
    assert extract_yaml("a: 1\nb:\n  - x\n  - y", require_mapping=True) == {"a": 1, "b": ["x", "y"]}


def test_extract_yaml_inside_code_fence():
    assert extract_yaml("```yaml\na: 1\n```", require_mapping=True) == {"a": 1}


def test_extract_yaml_repairs_unquoted_colon_in_a_value():
    data = extract_yaml("task_context: The SOP must: check refills\nrequired_steps:\n  - Step: one\n",
                        require_mapping=True)
    assert data["task_context"] == "The SOP must: check refills"


def test_extract_yaml_rejects_non_mapping_when_required():
    with pytest.raises(ParseError, match="expected a YAML mapping.*got list"):
        extract_yaml("- a\n- b", require_mapping=True)
    assert extract_yaml("- a\n- b") == ["a", "b"]


def test_extract_yaml_empty_is_not_a_mapping():
    with pytest.raises(ParseError, match="got nothing"):
        extract_yaml("", require_mapping=True)


def test_extract_yaml_invalid_is_one_line_with_position():
    with pytest.raises(ParseError) as exc:
        extract_yaml("a: [1, 2\nb: 3")
    assert "\n" not in str(exc.value)
    assert str(exc.value).startswith("invalid YAML:")
    assert "line" in str(exc.value)


def test_extract_json():
    assert extract_json('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    with pytest.raises(ParseError, match="invalid JSON: .* line 1"):
        extract_json("{'a': 1}")


def test_extract_literal():
    assert extract_literal("['patient_id:P-1', 'age:4']") == ["patient_id:P-1", "age:4"]
    with pytest.raises(ParseError, match="not a Python literal"):
        extract_literal("open('x')")


def test_one_line_collapses_and_truncates():
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 300, 20) == "x" * 19 + "…"


def test_describe_validation_error_names_each_location():
    class M(BaseModel):
        a: int
        b: str

    with pytest.raises(ValidationError) as exc:
        M.model_validate({"a": "nope"})
    line = describe_validation_error(exc.value, "<task>")
    assert line.startswith("<task>: ")
    assert "a: " in line and "b: Field required" in line
    assert "\n" not in line
