"""context → schema → sop stage ``run()`` functions with the real templates and a scripted model."""

from __future__ import annotations

import json

import pytest

from sopforge.errors import ValidationFailed
from sopforge.prompts import default_registry
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.context import stage as context_stage
from sopforge.families.sop_tools.stages import schema as schema_stage
from sopforge.families.sop_tools.stages import sop as sop_stage


def kw(settings, llm, **extra):
    return {"llm": llm, "settings": settings, "model": "fake-1", "temperature": 0.1, **extra}


def test_context_stage_accepts_a_good_answer(scripted, settings, context_answer, theme, slug):
    llm, provider = scripted([context_answer])
    result = context_stage.run(context_stage.ContextInputs(theme=theme, theme_slug=slug), **kw(settings, llm))
    assert isinstance(result.artifact, BusinessContext)
    assert result.artifact.theme == theme
    assert result.attempts == 1 and result.raw_texts == [context_answer]
    rendered = default_registry(settings).render("teller/context", business_theme=theme)
    assert (result.template_id, result.template_hash, result.prompt_hash) == (
        "teller/context", rendered.template_hash, rendered.prompt_hash)
    [request] = provider.requests
    assert request.call_key == "pharmacy-prescription-refills/context/main/a1"
    assert request.stage == "context" and request.template_id == "teller/context"
    assert request.messages[0].content == rendered.text
    assert f"<business_theme>\n{theme}\n</business_theme>" in rendered.text


def test_context_stage_re_asks_after_a_bad_answer(scripted, settings, context_answer, theme, slug):
    truncated = context_answer[: context_answer.index("<task>")]
    llm, provider = scripted([truncated, context_answer])
    result = context_stage.run(context_stage.ContextInputs(theme=theme, theme_slug=slug), **kw(settings, llm))
    assert result.attempts == 2
    assert result.raw_texts == [truncated, context_answer]
    second = provider.requests[1]
    assert second.call_key == "pharmacy-prescription-refills/context/main/a2"
    assert "- context.parse: missing <task>…</task> block" in second.messages[-1].content


def test_context_stage_re_asks_on_a_failed_check(scripted, settings, context_answer, theme, slug, edit):
    bad = edit(context_answer, 'sub_business: "Routine Refill Authorization"', 'sub_business: "Refill Desk"')
    llm, provider = scripted([bad, context_answer])
    result = context_stage.run(context_stage.ContextInputs(theme=theme, theme_slug=slug), **kw(settings, llm))
    assert result.attempts == 2
    assert "- context.task_sub_business_known: task.sub_business 'Refill Desk'" in provider.requests[1].messages[-1].content


def test_schema_stage_renders_the_context_and_re_asks(scripted, settings, schema_answer, good_context, slug, edit):
    bad = edit(schema_answer, "approve | refer_to_prescriber | deny", "approve | refer_to_prescriber | None")
    llm, provider = scripted([bad, schema_answer])
    result = schema_stage.run(schema_stage.SchemaInputs(theme_slug=slug, context=good_context), **kw(settings, llm))
    assert isinstance(result.artifact, DataSchema)
    assert result.attempts == 2 and result.template_id == "sop_bench/schema"
    first_prompt = provider.requests[0].messages[0].content
    assert good_context.task.sop_title in first_prompt
    assert "Required steps:\n1. Match the refill request" in first_prompt
    assert "## 8. Best Practices" in first_prompt
    assert provider.requests[1].call_key == "pharmacy-prescription-refills/schema/main/a2"
    assert "- schema.labels_not_na: labels that read as missing values: refill_decision: 'None'" in \
        provider.requests[1].messages[-1].content


def test_sop_stage_accepts_and_grounds_in_the_schema(scripted, settings, sop_answer, good_context, good_schema, slug):
    llm, provider = scripted([sop_answer])
    inputs = sop_stage.SOPInputs(theme_slug=slug, context=good_context, schema=good_schema)
    result = sop_stage.run(inputs, **kw(settings, llm))
    assert isinstance(result.artifact, SOPDocument)
    assert result.artifact.title == good_context.task.sop_title
    assert all(c.passed for c in result.checks)
    prompt = provider.requests[0].messages[0].content
    assert "<sample_schema>\n<Existing_fields>\nprescription_id - string" in prompt
    assert provider.requests[0].call_key == "pharmacy-prescription-refills/sop/main/a1"


def test_sop_stage_always_bad_raises_naming_the_check(scripted, settings, sop_answer, good_context, good_schema, slug):
    bad = sop_answer
    for phrase in ["more than 180", "more than 365", "at least 1", "< 0.80", "< 0.85", "> 7"]:
        bad = bad.replace(phrase, "over the limit")
    llm, provider = scripted([bad] * settings.max_attempts)
    inputs = sop_stage.SOPInputs(theme_slug=slug, context=good_context, schema=good_schema)
    with pytest.raises(ValidationFailed) as exc:
        sop_stage.run(inputs, **kw(settings, llm))
    assert str(exc.value).startswith("sop: check sop.thresholds_present failed after 3 attempts: "
                                     "no quantitative threshold in 5. Main Procedure")
    assert [r["name"] for r in exc.value.report] == ["sop.thresholds_present"]
    assert exc.value.raw_texts == [bad] * 3
    assert [r.call_key for r in provider.requests] == [
        f"pharmacy-prescription-refills/sop/main/a{i}" for i in (1, 2, 3)]


def test_sop_stage_puts_reviewer_feedback_in_the_prompt(scripted, settings, sop_answer, good_context, good_schema, slug):
    llm, provider = scripted([sop_answer])
    inputs = sop_stage.SOPInputs(theme_slug=slug, context=good_context, schema=good_schema)
    sop_stage.run(inputs, **kw(settings, llm, feedback="Handle partial refills for Schedule III-V."))
    prompt = provider.requests[0].messages[0].content
    assert prompt.endswith("Reviewer feedback on the previous version, address it: "
                           "Handle partial refills for Schedule III-V.")


def test_feedback_changes_the_request_so_the_cache_cannot_replay_the_rejected_answer(
        scripted, settings, schema_answer, good_context, slug):
    llm, provider = scripted([schema_answer, schema_answer])
    inputs = schema_stage.SchemaInputs(theme_slug=slug, context=good_context)
    schema_stage.run(inputs, **kw(settings, llm))
    schema_stage.run(inputs, **kw(settings, llm, feedback="Add a field for the pharmacy location."))
    a, b = provider.requests
    assert a.request_hash("scripted") != b.request_hash("scripted")


def test_stage_result_serialises_the_artifact(scripted, settings, schema_answer, good_context, slug):
    llm, _ = scripted([schema_answer])
    result = schema_stage.run(schema_stage.SchemaInputs(theme_slug=slug, context=good_context), **kw(settings, llm))
    dumped = json.loads(result.model_dump_json())
    assert dumped["artifact"]["fields"][0]["name"] == "prescription_id"
    assert DataSchema.model_validate(dumped["artifact"]) == result.artifact


def test_sop_inputs_accept_schema_by_name(good_context, good_schema, slug):
    inputs = sop_stage.SOPInputs(theme_slug=slug, context=good_context, schema=good_schema)
    assert inputs.data_schema is good_schema or inputs.data_schema == good_schema
    assert sop_stage.SOPInputs.model_validate(inputs.model_dump()).data_schema == good_schema
