"""tools stage ``run()`` with the real templates, a scripted model behind the Gateway and the real sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sopforge.errors import UserError, ValidationFailed
from sopforge.prompts import default_registry
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.dataset import Dataset, DatasetBatch, find_id_field
from sopforge.families.sop_tools.models.tools import APIDocs, ToolCode, ToolSpecs
from sopforge.families.sop_tools.stages import tools as tools_stage

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
CLASS = "PharmacyPrescriptionRefillsManager"
STUB = ("        record = self._record(prescription_id)\n        elapsed = _to_int(",
        "        return {\"early_refill_ratio\": 0.9}\n        record = self._record(prescription_id)\n"
        "        elapsed = _to_int(")


def answer(stage: str) -> str:
    return (ANSWERS / f"{stage}.txt").read_text(encoding="utf-8")


def kw(settings, llm, **extra):
    return {"llm": llm, "settings": settings, "model": "fake-1", "temperature": 0.1, **extra}


@pytest.fixture
def inputs(good_context, good_schema, good_sop, slug):
    rows = [r for n in (1, 2) for r in DatasetBatch.parse(answer(f"dataset_batch{n}"), good_schema).rows]
    dataset = Dataset(fields=[f.name for f in good_schema.existing], id_field=find_id_field(good_schema), rows=rows,
                      rows_requested=len(rows))
    return tools_stage.ToolsInputs(theme_slug=slug, context=good_context, schema=good_schema, sop=good_sop,
                                   api_graph=APIGraph.parse(answer("api_graph")), dataset=dataset)


@pytest.fixture
def good() -> list[str]:
    return [answer("api_docs"), answer("toolspecs"), answer("tool_code")]


def test_three_asks_in_order_give_the_checked_artifact(scripted, settings, inputs, good):
    llm, provider = scripted(good)
    result = tools_stage.run(inputs, **kw(settings, llm))
    artifact = result.artifact
    assert artifact.api_docs == APIDocs.parse(good[0]) and artifact.toolspecs == ToolSpecs.parse(good[1])
    assert artifact.code == ToolCode.parse(good[2], CLASS)
    assert (artifact.class_name, artifact.id_field) == (CLASS, "prescription_id")
    assert [s.step for s in artifact.steps] == ["api_docs", "toolspecs", "code"]
    assert [s.template_id for s in artifact.steps] == list(tools_stage.TEMPLATE_IDS)
    assert result.attempts == 3 and result.raw_texts == good
    assert [r.call_key for r in provider.requests] == [
        "pharmacy-prescription-refills/tools/api_docs/a1", "pharmacy-prescription-refills/tools/toolspecs/a1",
        "pharmacy-prescription-refills/tools/code/a1"]
    assert {r.stage for r in provider.requests} == {"tools"}
    assert all(c.passed for c in result.checks)
    names = [c.name for c in result.checks]
    assert names[:2] == ["tools.data.one_value_per_input", "tools.docs.names"] and "tools.specs.rows_valid" in names and names[-1] == "tools.runtime.deterministic"
    first = default_registry(settings).render(
        "sop_bench/api_docs", sop_file_contents=inputs.sop.to_prompt_text(),
        business_context=inputs.context.to_prompt_text(), sample_schema=inputs.data_schema.to_prompt_text(),
        api_graph=inputs.api_graph.to_prompt_text(), sample_data=inputs.dataset.to_prompt_text(max_rows=5))
    assert (result.template_id, result.template_hash, result.prompt_hash) == (
        "sop_bench/api_docs", first.template_hash, first.prompt_hash)
    assert provider.requests[0].messages[0].content == first.text


def test_each_prompt_carries_the_previous_answer_and_the_code_prompt_the_csv(scripted, settings, inputs, good):
    llm, provider = scripted(good)
    tools_stage.run(inputs, **kw(settings, llm))
    docs_prompt, specs_prompt, code_prompt = (r.messages[0].content for r in provider.requests)
    assert docs_prompt.count("{'prescription_id': 'RX-0045") == 5  # five sample rows, no more
    assert "<api_metadata>\n<TOOLS>\n<API>\nName: getPrescriptionRecord" in specs_prompt
    assert '"name": "determineBlockingReason"' in code_prompt and "Name: determineBlockingReason" in code_prompt
    header = ",".join(inputs.dataset.fields)
    assert f"<sample_data>\n{header}\nRX-004512,P-41584,maintenance,2024-11-02,2025-04-18,2,24,30,6,0,True,active\n" \
        in code_prompt
    assert code_prompt.count("\nRX-0045") == 5
    assert f"named {CLASS}" in code_prompt and "keyed by prescription_id" in code_prompt
    imports = code_prompt.split("Import only these modules: ")[1].split(".")[0]
    assert "csv" in imports and "pandas" not in imports and "random" not in imports


def test_a_runtime_failure_is_quoted_back_and_the_code_is_re_asked(scripted, settings, inputs, good, edit):
    stub = edit(good[2], *STUB)
    llm, provider = scripted([good[0], good[1], stub, good[2]])
    result = tools_stage.run(inputs, **kw(settings, llm))
    assert result.attempts == 4 and result.raw_texts == [good[0], good[1], stub, good[2]]
    assert result.artifact.code == ToolCode.parse(good[2], CLASS)
    again = provider.requests[3]
    assert again.call_key == "pharmacy-prescription-refills/tools/code/a2"
    assert [m.role for m in again.messages] == ["user", "assistant", "user"] and again.messages[1].content == stub
    reask = again.messages[-1].content
    assert "- tools.runtime.not_constant: tools return the same result whatever the row (a stub): " \
           "calculateEarlyRefillRatio returned {\"early_refill_ratio\": 0.9} for all" in reask
    assert "- tools.runtime.unknown_id_raises: tools must look the record up and raise ValueError" in reask
    assert result.artifact.steps[2].attempts == 2


def test_code_refused_by_the_policy_is_re_asked_without_running_it(scripted, settings, inputs, good, edit):
    bad = edit(good[2], "import csv\n", "import csv\nimport subprocess\n")
    llm, provider = scripted([good[0], good[1], bad, good[2]])
    tools_stage.run(inputs, **kw(settings, llm))
    reask = provider.requests[3].messages[-1].content
    assert "- tools.policy.processes: line 4: import of 'subprocess' is not allowed" in reask
    assert "tools.runtime" not in reask


def test_specs_that_reject_a_row_are_re_asked_at_the_toolspecs_step(scripted, settings, inputs, good, edit):
    narrow = edit(good[1], '"minimum": 0,\n              "maximum": 365,', '"minimum": 0,\n              "maximum": 90,')
    llm, provider = scripted([good[0], narrow, good[1], good[2]])
    result = tools_stage.run(inputs, **kw(settings, llm))
    assert provider.requests[2].call_key == "pharmacy-prescription-refills/tools/toolspecs/a2"
    assert "- tools.specs.rows_valid: arguments built from 1 dataset rows break their toolSpec" \
        in provider.requests[2].messages[-1].content
    assert [s.attempts for s in result.artifact.steps] == [1, 2, 1]


def test_docs_that_miss_an_api_are_re_asked(scripted, settings, inputs, good, edit):
    bad = edit(good[0], "Name: verifyPrescriberLicense", "Name: checkPrescriberLicense")
    llm, provider = scripted([bad, *good])
    tools_stage.run(inputs, **kw(settings, llm))
    assert provider.requests[1].call_key == "pharmacy-prescription-refills/tools/api_docs/a2"
    assert "- tools.docs.names: <API> blocks must be exactly the graph's APIs" in provider.requests[1].messages[-1].content


def test_code_that_always_fails_raises_naming_the_step_and_keeping_every_answer(scripted, settings, inputs, good,
                                                                                 edit):
    stub = edit(good[2], *STUB)
    llm, provider = scripted([good[0], good[1]] + [stub] * settings.max_attempts)
    with pytest.raises(ValidationFailed) as exc:
        tools_stage.run(inputs, **kw(settings, llm))
    assert str(exc.value).startswith("tools: code step: checks tools.runtime.not_constant, "
                                     "tools.runtime.unknown_id_raises failed after 3 attempts")
    assert [r["name"] for r in exc.value.report] == ["tools.runtime.not_constant", "tools.runtime.unknown_id_raises"]
    assert exc.value.raw_texts == [good[0], good[1]] + [stub] * 3
    assert len(provider.requests) == 5


def test_feedback_reaches_all_three_prompts(scripted, settings, inputs, good):
    llm, provider = scripted(good)
    tools_stage.run(inputs, **kw(settings, llm, feedback="Name the payer in the eligibility tool."))
    assert all(r.messages[0].content.endswith("address it: Name the payer in the eligibility tool.")
               for r in provider.requests)


def without_identifier(schema):
    """The schema with no field find_id_field accepts (names and descriptions no longer say identifier)."""
    fields = [f.model_copy(update={"name": f"{f.name}_x", "description": "a label"})
              if f.role == "existing" and f.type in ("string", "integer") else f for f in schema.fields]
    return schema.model_copy(update={"fields": fields})


def test_a_dataset_stored_without_its_id_field_is_keyed_by_the_schemas_identifier(scripted, settings, inputs, good):
    # The insurance trial: a dataset stored by older code says id_field: null although today's
    # find_id_field accepts the schema's claim_number; the tools stage stopped, telling the user to
    # regenerate a schema that already had the field.
    stored = inputs.model_copy(update={"dataset": inputs.dataset.model_copy(update={"id_field": None})})
    llm, provider = scripted(good)
    result = tools_stage.run(stored, **kw(settings, llm))
    assert result.artifact.id_field == inputs.dataset.id_field is not None
    assert all(c.passed for c in result.checks)


def test_a_dataset_without_an_id_field_is_a_user_error_naming_the_stage_to_rerun(scripted, settings, inputs):
    stored = inputs.dataset.model_copy(update={"id_field": None})
    no_id = inputs.model_copy(update={"dataset": stored, "data_schema": without_identifier(inputs.data_schema)})
    llm, provider = scripted([])
    with pytest.raises(UserError, match=r"no identifier field.*rerun --from schema"):
        tools_stage.run(no_id, **kw(settings, llm))
    id_field = inputs.dataset.id_field
    rows = [{**r, id_field: inputs.dataset.rows[0][id_field]} for r in stored.rows]  # one identifier, every row
    repeated = inputs.model_copy(update={"dataset": stored.model_copy(update={"rows": rows})})
    with pytest.raises(UserError, match=rf"do not hold a distinct {id_field} each.*rerun --from dataset"):
        tools_stage.run(repeated, **kw(settings, llm))
    assert provider.requests == []


def test_inputs_round_trip(inputs):
    again = tools_stage.ToolsInputs.model_validate(json.loads(inputs.model_dump_json()))
    assert again == inputs and again.data_schema == inputs.data_schema


def _one_patient_two_statuses(inputs):
    rows = [dict(r) for r in inputs.dataset.rows]
    rows[1]["patient_id"] = rows[0]["patient_id"]
    choices = next(f for f in inputs.data_schema.fields if f.name == "insurance_status").choices
    rows[1]["insurance_status"] = next(c for c in choices if c != rows[0]["insurance_status"])
    return inputs.model_copy(update={"dataset": inputs.dataset.model_copy(update={"rows": rows})})


def test_data_no_tool_can_match_stops_the_stage_before_anything_is_paid_and_points_at_the_dataset(
        scripted, settings, inputs, good):
    llm, provider = scripted(good)
    with pytest.raises(ValidationFailed) as info:
        tools_stage.run(_one_patient_two_statuses(inputs), **kw(settings, llm))
    assert provider.requests == [], "three tools.py asks would each fail tools.runtime.matches_data"
    assert str(info.value).startswith("tools: the data gives the same inputs of a read tool different values")
    [entry] = info.value.report
    assert entry["name"] == "tools.data.one_value_per_input" and entry["details"]["rerun_from"] == "dataset"


def test_a_person_who_waives_the_data_check_gets_the_tools_asked(scripted, settings, inputs, good):
    llm, provider = scripted(good + [good[2]] * 2)
    waived = settings.model_copy(update={"waivers": {"tools.data.one_value_per_input": "the tool reads a rate table"}})
    with pytest.raises(ValidationFailed, match="matches_data"):  # the data still contradicts the tool
        tools_stage.run(_one_patient_two_statuses(inputs), **kw(waived, llm))
    assert provider.requests, "the waiver let the stage ask"
