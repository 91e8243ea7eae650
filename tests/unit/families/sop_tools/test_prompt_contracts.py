"""Prompt and check agree (issue 19): what a template asks for is what its checks accept.

Independent answerers met instructions that could not all be met; each contract below failed on the
old template or check. Behavioural tests of the checks live beside them (test_dataset_realism,
test_write_conditions, test_tools_checks, test_instruction_manipulations, test_output_limits).
"""

from __future__ import annotations

from pathlib import Path

from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.stages.dataset import final_checks
from sopforge.families.sop_tools.models.dataset import Dataset

PROMPTS = Path(__file__).resolve().parents[4] / "prompts"


def template(name: str) -> str:
    """What the model reads: the template without its header comment (which quotes the old wording)."""
    text = (PROMPTS / name).read_text(encoding="utf-8")
    return " ".join(text.split("-#}", 1)[-1].split())


def test_the_dataset_prompt_asks_only_for_the_choice_values_the_sop_uses_and_the_check_only_warns():
    text = template("sop_bench/dataset.j2")
    assert "every allowed value of every choice field" not in text
    assert "a value that no real case of this business would take may be left out" in text
    schema = DataSchema.parse("<schema><Existing_fields>\ncase_id - string, id (e.g., \"C-1\")\n"
                              "port - enum, port of entry (e.g., \"rotterdam\") [choices: rotterdam | antwerp | "
                              "hamburg_free_zone]\n</Existing_fields><Field_to_be_obtained>\n"
                              "ok - boolean, cleared (e.g., True) [decision]\n</Field_to_be_obtained></schema>")
    rows = [{"case_id": f"C-{i * 7919 % 1000:03d}", "port": ("rotterdam", "antwerp")[i % 2]} for i in range(10)]
    checks = {c.name: c for c in final_checks(Dataset(fields=["case_id", "port"], id_field="case_id", rows=rows,
                                                      rows_requested=10), schema)}
    coverage = checks["dataset.choice_coverage"]
    assert not coverage.passed and not coverage.blocking and "port=hamburg_free_zone" in coverage.message


def test_the_dataset_prompt_spreads_numbers_by_their_kind():
    text = template("sop_bench/dataset.j2")
    assert "vary every number across rows" not in text
    assert "a parameter ([kind: parameter]" in text and "a count of events ([kind: count]) is often zero" in text
    assert "[kind: measurement | count | parameter]" in template("sop_bench/schema.j2")


def test_tools_raise_only_for_invalid_arguments_in_docs_and_code():
    docs, code = template("sop_bench/api_docs.j2"), template("sop_bench/tool_code.j2")
    assert "Errors are for invalid arguments only" in docs and "is null, which its Response note says" in docs
    assert "Raise the errors of the documentation" not in code
    assert "Raise ValueError for the other error scenarios of the documentation too" not in code
    assert "Every case on record with valid arguments gets a response" in code


def test_the_api_graph_prompt_can_say_what_the_sop_says_about_writes_and_inputs():
    text = template("teller/api_graph.j2")
    assert '"!= 0"' in text and "write when as a list of such mappings" in text
    assert "the agent must be able to know each one" in text
