"""reference stage ``run()`` with the real template, a scripted model behind the Gateway and the real sandbox."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sopforge.errors import ValidationFailed
from sopforge.prompts import default_registry
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, ReferenceProcedure
from sopforge.families.sop_tools.stages import reference as reference_stage
from sopforge.sandbox import SandboxLimits

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BUNDLE = FIXTURES / "bundle" / "pharmacy"
ANSWERS = FIXTURES / "answers"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)
OPEN_GATES = {"min_distinct_paths": 1, "max_baseline_state_success": 1.0}
NEVER_DENY = ('    elif blocking_reason in DENY:\n        refill_decision = "deny"\n',
              '    elif blocking_reason in DENY:\n        refill_decision = "refer_to_prescriber"\n')


def kw(settings, llm, **extra):
    return {"llm": llm, "settings": settings, "model": "fake-1", "temperature": 0.1, "limits": LIMITS, **extra}


@pytest.fixture
def answer() -> str:
    return (ANSWERS / "reference_procedure.txt").read_text(encoding="utf-8")


@pytest.fixture
def graph() -> APIGraph:
    return APIGraph.parse((ANSWERS / "api_graph.txt").read_text(encoding="utf-8"))


@pytest.fixture
def rows(good_schema) -> list[dict]:
    return DatasetBatch.parse((ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8"), good_schema).rows


@pytest.fixture
def inputs(slug, good_schema, good_sop, graph, rows):
    tools = {"toolspecs": (BUNDLE / "toolspecs.json").read_text(encoding="utf-8"),
             "tool_code": (BUNDLE / "tools.py").read_text(encoding="utf-8")}
    # The fixture domain has two tool paths (a referral or not) and writes the majority outcome's records on
    # most tasks: the path and baseline gates are tested on their own (test_consequences.py), so they are
    # opened here to test the rest of the stage.
    return reference_stage.ReferenceInputs(theme_slug=slug, schema=good_schema, sop=good_sop, api_graph=graph,
                                           tools=tools, rows=rows, gates=OPEN_GATES)


def test_the_answer_fixture_holds_the_fixture_bundles_procedure(answer):
    assert ReferenceProcedure.parse(answer).source == (BUNDLE / "reference_procedure.py").read_text(encoding="utf-8")


def test_stage_accepts_a_good_procedure_and_renders_every_input(scripted, settings, inputs, answer, good_schema,
                                                                good_sop, graph):
    llm, provider = scripted([answer])
    result = reference_stage.run(inputs, **kw(settings, llm))
    gt = result.artifact
    assert isinstance(gt, GroundTruth) and len(gt.tasks) == 14 and gt.excluded == []
    assert gt.coverage["refill_decision"] == {"approve": 5, "refer_to_prescriber": 6, "deny": 3}
    assert gt.procedure == ReferenceProcedure.parse(answer)
    assert result.attempts == 1 and all(c.passed for c in result.checks)
    assert {c.name for c in result.checks} >= {"ground_truth.coverage", "ground_truth.deterministic",
                                               "ground_truth.rows_excluded", "ground_truth.known_tools"}

    [request] = provider.requests
    assert request.call_key == "pharmacy-prescription-refills/reference/main/a1"
    assert request.stage == "reference" and request.template_id == "teller/reference_procedure"
    rendered = default_registry(settings).render(
        "teller/reference_procedure", sop_file_contents=good_sop.to_prompt_text(),
        sample_schema=good_schema.to_prompt_text(), api_graph=graph.to_prompt_text(),
        toolspecs=json.dumps(inputs.tools.toolspecs, indent=2), tool_code=inputs.tools.tool_code,
        input_columns=reference_stage.render_input_columns(good_schema, gt.input_columns, inputs.rows),
        decision_fields=reference_stage.render_decision_fields(good_schema),
        write_tools=reference_stage.render_write_tools(graph), min_distinct_paths=1, max_baseline_share="100%")
    assert (result.template_hash, result.prompt_hash) == (rendered.template_hash, rendered.prompt_hash)
    prompt = request.messages[0].content
    assert prompt == rendered.text
    assert "<sop_file_contents>\n1. Purpose\n" in prompt and "5.6.2 Set `refill_decision`" in prompt
    assert "<sample_schema>\n<Existing_fields>\nprescription_id - string" in prompt
    assert '<api_graph>\napis:\n- api_name: getPrescriptionRecord' in prompt
    assert '"name": "determineBlockingReason"' in prompt and "class PharmacyRefillManager:" in prompt
    assert ("<input_columns>\n- prescription_id (string): unique identifier of the prescription "
            '(e.g., "RX-004512")\n- patient_id (string)') in prompt
    assert ('Example case, exactly as run_procedure receives it: {"prescription_id": "RX-004512", '
            '"patient_id": "P-41584", "request_date": "2025-04-18"}\n</input_columns>') in prompt
    assert ('<decision_fields>\n- refill_decision (enum): one of "approve", "refer_to_prescriber", "deny"\n'
            '</decision_fields>') in prompt


def test_an_unreached_outcome_is_re_asked_with_the_coverage_message(scripted, settings, inputs, answer, edit):
    never_deny = edit(answer, *NEVER_DENY)
    llm, provider = scripted([never_deny, answer])
    result = reference_stage.run(inputs, **kw(settings, llm))
    assert result.attempts == 2 and result.raw_texts == [never_deny, answer]
    assert result.artifact.coverage["refill_decision"]["deny"] == 3
    second = provider.requests[1]
    assert second.call_key == "pharmacy-prescription-refills/reference/main/a2"
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[1].content == never_deny
    reask = second.messages[-1].content
    assert re.search(r"^- ground_truth\.coverage: decision outcomes that no task reaches: refill_decision=deny "
                     r"\(tasks per outcome: refill_decision: approve 5, refer_to_prescriber 9, deny 0\)", reask, re.M)
    assert "ground_truth.deterministic" not in reask  # only the failing checks are quoted


def test_a_missing_code_block_is_re_asked(scripted, settings, inputs, answer):
    plan_only = answer.split("<code>")[0]
    llm, provider = scripted([plan_only, answer])
    result = reference_stage.run(inputs, **kw(settings, llm))
    assert result.attempts == 2
    assert "- reference.parse: missing <code>…</code> block" in provider.requests[1].messages[-1].content


def test_rows_that_raise_are_re_asked_with_their_reasons(scripted, settings, inputs, answer, edit):
    raising = edit(answer, '    # 5.6.2 Decision.\n',
                   '    # 5.6.2 Decision.\n    if blocking_reason != "no_block":\n'
                   '        raise KeyError(blocking_reason)\n')
    llm, provider = scripted([raising, answer])
    result = reference_stage.run(inputs, **kw(settings, llm))
    assert result.attempts == 2
    reask = provider.requests[1].messages[-1].content
    assert "- ground_truth.rows_excluded: 9 of 14 rows excluded (64%; more than the 10% allowed): " in reask
    # Rows failing for the same reason are quoted together.
    assert re.search(r"RX-004550, RX-004665: KeyError at line \d+: 'too_early'", reask)
    assert re.search(r"RX-004573, RX-004636: KeyError at line \d+: 'expired_prescription'", reask)


def test_the_stage_gives_up_after_the_attempt_budget(scripted, settings, inputs, answer, edit):
    never_deny = edit(answer, *NEVER_DENY)
    llm, _ = scripted([never_deny] * settings.max_attempts)
    with pytest.raises(ValidationFailed) as err:
        reference_stage.run(inputs, **kw(settings, llm))
    assert "reference: check ground_truth.coverage failed after 3 attempts" in str(err.value)
    assert [r["name"] for r in err.value.report] == ["ground_truth.coverage"]
    assert err.value.raw_texts == [never_deny] * 3


def test_tools_accept_a_parsed_array_and_alias_names(slug, good_schema, good_sop, graph, rows):
    specs = json.loads((BUNDLE / "toolspecs.json").read_text(encoding="utf-8"))
    flat = [s["toolSpec"] for s in specs]
    made = reference_stage.ReferenceInputs(theme_slug=slug, schema=good_schema, sop=good_sop, api_graph=graph,
                                           tools={"toolspecs_json": flat, "tools_py": "x = 1\n"}, rows=rows)
    assert made.tools.toolspecs == flat and made.tools.tool_code == "x = 1\n"
