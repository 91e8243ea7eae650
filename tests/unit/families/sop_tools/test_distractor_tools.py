"""Source surgery of the DistractorTools mixin and the answer parsers (no sandbox needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.parsing import ParseError
from sopforge.families.sop_tools.models.distractor_code import merge_tools_source, read_mixin
from sopforge.families.sop_tools.models.distractors import DistractorField, assign_values, parse_field_answer, parse_tools_answer
from sopforge.families.sop_tools.models.tools import ToolCode, ToolSpecs
from sopforge.families.sop_tools.verify.tool_checks import check_code_static

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
CLASS = "PharmacyPrescriptionRefillsManager"


def answer(name: str) -> str:
    return (ANSWERS / f"{name}.txt").read_text(encoding="utf-8")


def test_keep_only_cuts_dropped_methods_by_line_and_keeps_the_rest_verbatim():
    code = parse_tools_answer(answer("distractor_tools")).code
    kept = read_mixin(code).keep_only(["getWeatherForecast", "checkFormularyTier"])
    assert "def getRefillHistory" not in kept and "def calculateDaysSupplyRatio" not in kept
    assert "def _prescription_row" not in kept, "a helper only dropped tools used goes with them"
    for line in kept.splitlines():
        assert line in code.splitlines(), f"line not from the model's text: {line!r}"
    assert "_TIERS = {" in kept and "_CONDITIONS = (" in kept
    assert read_mixin(code).keep_only([]) == ""


def test_merged_source_has_one_manager_with_every_tool_and_no_dropped_one():
    parsed = parse_tools_answer(answer("distractor_tools"))
    base = ToolCode.parse(answer("tool_code"), CLASS)
    names = ["getRefillHistory", "getWeatherForecast"]
    merged = merge_tools_source(base.source, CLASS, read_mixin(parsed.code).keep_only(names), names)
    specs = ToolSpecs.parse(answer("toolspecs")).specs + [t.spec for t in parsed.tools if t.name in names]
    assert all(c.passed for c in check_code_static(ToolCode(source=merged, class_name=CLASS), ToolSpecs(specs=specs)))
    assert merged.count(f"class {CLASS}(") == 1 and f"class _{CLASS}Base:" in merged
    assert "checkFormularyTier" not in merged
    assert merge_tools_source(base.source, CLASS, parsed.code, []) == base.source


@pytest.mark.parametrize("raw, message", [
    ("no tags", "missing <distractor_toolspecs>"),
    ("<distractor_toolspecs>{}</distractor_toolspecs>", "non-empty JSON array"),
    ('<distractor_toolspecs>[{"kind": "fun", "toolSpec": {"name": "a"}}]</distractor_toolspecs>'
     "<distractor_code>class DistractorTools: pass</distractor_code>", "\"kind\" must be one of"),
    ('<distractor_toolspecs>[{"kind": "similar", "toolSpec": {"name": "a"}}]</distractor_toolspecs>'
     "<distractor_code> </distractor_code>", "is empty"),
])
def test_tool_answer_parse_errors_are_one_actionable_line(raw, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_tools_answer(raw)
    assert "\n" not in str(err.value)


def test_field_answer_parse_errors_and_seeded_assignment():
    with pytest.raises(ParseError, match="needs description"):
        parse_field_answer('<distractor_fields>[{"name": "a", "origin": "new", "type": "enum", "values": [1]}]'
                           "</distractor_fields>")
    with pytest.raises(ParseError, match="\"origin\" must be"):
        parse_field_answer('<distractor_fields>[{"name": "a", "origin": "maybe"}]</distractor_fields>')
    f = DistractorField(name="tier", origin="new", type="enum", description="d", pool=["a", "b", "c"])
    ids = [f"R{i}" for i in range(30)]
    assert assign_values(f, ids, 1) == assign_values(f, ids, 1) != assign_values(f, ids, 2)
    assert set(assign_values(f, ids, 1).values()) <= {"a", "b", "c"}
