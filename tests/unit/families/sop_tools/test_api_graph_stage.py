"""api_graph stage ``run()`` with the real template and a scripted model behind the Gateway."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sopforge.errors import ValidationFailed
from sopforge.prompts import default_registry
from sopforge.families.sop_tools.models.api_graph import API_NAME_RE, APIGraph
from sopforge.families.sop_tools.stages import api_graph as api_graph_stage

GRAPH_ANSWER = Path(__file__).resolve().parents[3] / "fixtures" / "answers" / "api_graph.txt"
CYCLE_EDIT = ("    direct_dependencies: []\n",
              '    direct_dependencies:\n      - dependent_api: "determineBlockingReason"\n'
              '        dependency_type: "temporal_dependency"\n'
              '        dependency_reason: "Re-reads the record after the decision support step."\n')


def kw(settings, llm, **extra):
    return {"llm": llm, "settings": settings, "model": "fake-1", "temperature": 0.1, **extra}


@pytest.fixture
def graph_answer() -> str:
    return GRAPH_ANSWER.read_text(encoding="utf-8")


@pytest.fixture
def inputs(good_context, good_schema, good_sop, slug):
    return api_graph_stage.APIGraphInputs(theme_slug=slug, context=good_context, schema=good_schema, sop=good_sop)


def test_stage_accepts_a_good_answer_and_renders_every_input(scripted, settings, inputs, graph_answer,
                                                             good_context, good_schema, good_sop):
    llm, provider = scripted([graph_answer])
    result = api_graph_stage.run(inputs, **kw(settings, llm))
    assert isinstance(result.artifact, APIGraph)
    assert result.artifact.topological_order()[0] == "getPrescriptionRecord"
    assert result.attempts == 1 and result.raw_texts == [graph_answer]
    assert all(c.passed for c in result.checks) and len(result.checks) == 20
    rendered = default_registry(settings).render(
        "teller/api_graph", sop_title=good_context.task.sop_title, business_context=good_context.to_prompt_text(),
        sample_schema=good_schema.to_prompt_text(), sop_file_contents=good_sop.to_prompt_text())
    assert (result.template_id, result.template_hash, result.prompt_hash) == (
        "teller/api_graph", rendered.template_hash, rendered.prompt_hash)
    [request] = provider.requests
    assert request.call_key == "pharmacy-prescription-refills/api_graph/main/a1"
    assert request.stage == "api_graph" and request.template_id == "teller/api_graph"
    prompt = request.messages[0].content
    assert prompt == rendered.text
    assert f"<sop_title>\n{good_context.task.sop_title}\n</sop_title>" in prompt
    assert "<sample_schema>\n<Existing_fields>\nprescription_id - string" in prompt
    assert "[decision]\n</Field_to_be_obtained>\n</sample_schema>" in prompt
    assert "<sop_file_contents>\n1. Purpose\nThis procedure" in prompt
    assert "5.6.2 Set `refill_decision`" in prompt and "## 8. Best Practices" in prompt


def test_stage_re_asks_on_a_cycle_and_succeeds(scripted, settings, inputs, graph_answer, edit):
    cyclic = edit(graph_answer, *CYCLE_EDIT)
    llm, provider = scripted([cyclic, graph_answer])
    result = api_graph_stage.run(inputs, **kw(settings, llm))
    assert result.attempts == 2 and result.raw_texts == [cyclic, graph_answer]
    assert result.artifact == APIGraph.parse(graph_answer)
    second = provider.requests[1]
    assert second.call_key == "pharmacy-prescription-refills/api_graph/main/a2"
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[1].content == cyclic
    reask = second.messages[-1].content
    assert re.search(r"- api_graph\.acyclic: dependency cycle: (\w+ -> )+\w+;", reask)
    assert "getPrescriptionRecord" in reask and "determineBlockingReason" in reask


def test_stage_re_asks_on_malformed_yaml_quoting_the_line(scripted, settings, inputs, graph_answer, edit):
    broken = edit(graph_answer, '    purpose: "Coverage (5.5.3): a lapsed coverage blocks the refill."',
                  "    purpose: Coverage (5.5.3): a lapsed coverage blocks the refill.")
    llm, provider = scripted([broken, graph_answer])
    result = api_graph_stage.run(inputs, **kw(settings, llm))
    assert result.attempts == 2
    assert "- api_graph.parse: <api_dependency_graph>: invalid YAML at line " in provider.requests[1].messages[-1].content


def test_warnings_do_not_block_and_are_kept(scripted, settings, inputs, graph_answer, edit):
    inverted = edit(graph_answer, 'sop_steps: ["5.2.1"]', 'sop_steps: ["5.6.2"]')
    llm, _ = scripted([inverted])
    result = api_graph_stage.run(inputs, **kw(settings, llm))
    assert result.attempts == 1
    [warning] = [c for c in result.checks if not c.passed]
    assert (warning.name, warning.severity) == ("api_graph.sop_order", "warning")


def test_stage_always_bad_raises_naming_the_check(scripted, settings, inputs, graph_answer, edit):
    bad = edit(graph_answer, '      - name: "blocking_reason"\n        data_type: "enum"\n        destination: "storage"\n',
               '      - name: "refill_decision"\n        data_type: "enum"\n        destination: "storage"\n')
    llm, provider = scripted([bad] * settings.max_attempts)
    with pytest.raises(ValidationFailed) as exc:
        api_graph_stage.run(inputs, **kw(settings, llm))
    # The writes that record blocking_reason lose their producer too.
    assert [r["name"] for r in exc.value.report] == ["api_graph.inputs_provenance", "api_graph.to_be_obtained_produced",
                                                     "api_graph.no_decision_outputs"]
    assert str(exc.value).startswith("api_graph: checks api_graph.inputs_provenance, "
                                     "api_graph.to_be_obtained_produced, api_graph.no_decision_outputs failed after 3 "
                                     "attempts")
    assert exc.value.raw_texts == [bad] * 3
    assert len(provider.requests) == 3


def test_stage_puts_reviewer_feedback_in_the_prompt(scripted, settings, inputs, graph_answer):
    llm, provider = scripted([graph_answer])
    api_graph_stage.run(inputs, **kw(settings, llm, feedback="Split the record lookup from the identity check."))
    assert provider.requests[0].messages[0].content.endswith(
        "Reviewer feedback on the previous version, address it: Split the record lookup from the identity check.")


def test_inputs_accept_schema_by_name_and_round_trip(inputs, good_schema):
    assert inputs.data_schema == good_schema
    again = api_graph_stage.APIGraphInputs.model_validate(json.loads(inputs.model_dump_json()))
    assert again == inputs


# --- the template teaches the format the parser enforces ---------------------------------------

def test_prompt_example_is_a_valid_graph_in_another_domain():
    params = {name: f"SAMPLE-{name}" for name in default_registry().get("teller/api_graph").header.parameters}
    text = default_registry().render("teller/api_graph", **params).text
    start = text.index("<api_dependency_graph>\napis:")
    example = APIGraph.parse(text[start:text.index("</api_dependency_graph>", start) + len("</api_dependency_graph>")])
    assert example.names == ["getLoanRecord", "computeOverdueDays", "recordOverdueFine"]
    assert all(API_NAME_RE.match(n) for n in example.names)
    assert example.edges() == [("getLoanRecord", "computeOverdueDays"), ("computeOverdueDays", "recordOverdueFine")]
    write = example.api("recordOverdueFine")  # the example shows a write on one branch only
    assert write.writes and write.writes_table == "loan_fines" and write.when == {"fine_decision": ["charge_fine"]}
    assert all(a.sop_steps for a in example.apis)
    assert "prescription" not in text.split("RULES FOR THE GRAPH")[0].lower()
    assert "<dependency_analysis>" in text and "dependent_api set to the name of that prerequisite" in text
