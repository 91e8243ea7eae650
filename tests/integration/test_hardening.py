"""Distractors and manipulations end to end: every bad item is caught, counted and never exported.

One run through the real CLI, Prefect and DuckDB, with the OpenAI SDK talking to the fake server.
The recorded example answers are altered the way a careless model would:
- a "distractor" tool that is one of the real tools the SOP needs (secretly required);
- a "distractor" field that in fact drives the decision;
- SOP variants whose edit changes nothing;
- an entailment verifier whose reply cannot be parsed.
"""

from __future__ import annotations

import json
import re

import duckdb
import pytest

from answers import THEME, by_stage, recorded_answer
from sopforge.llm.testserver import FakeLLMServer
from sopforge.families.sop_tools.models.tools import ToolSpecs

pytestmark = pytest.mark.prefect

DECIDING_FIELD = "prescription_status"  # an input the procedure decides on


def _retag(answer: str, tag: str, value: list) -> str:
    return re.sub(rf"<{tag}>.*</{tag}>", lambda _: f"<{tag}>\n{json.dumps(value, indent=2)}\n</{tag}>", answer,
                  flags=re.S)


def _tagged_json(answer: str, tag: str) -> list:
    return json.loads(re.search(rf"<{tag}>(.*)</{tag}>", answer, re.S).group(1))


def careless_model(real_tool: str):
    """The recorded answers, each hardening step spoiled in one way."""
    recorded = by_stage()

    def respond(body: dict, protocol: str) -> str:
        prompt = body["messages"][0]["content"]
        if "<edits>" in prompt and "<verdict>" not in prompt:
            return ("<variant_summary>Restates the purpose.</variant_summary>\n<edits>\n<edit>\n"
                    "<find>1. Purpose</find>\n<replace>1. Purpose</replace>\n</edit>\n</edits>")
        if "<entails>" in prompt:
            return "It depends on how you read the instruction."
        answer = recorded(body, protocol)
        if "<distractor_toolspecs>" in prompt:
            specs = _tagged_json(answer, "distractor_toolspecs")
            clone = json.loads(json.dumps(specs[0]))
            clone["toolSpec"]["name"] = real_tool
            return _retag(answer, "distractor_toolspecs", specs + [clone])
        if "<distractor_fields>" in prompt:
            fields = _tagged_json(answer, "distractor_fields")
            return _retag(answer, "distractor_fields", fields + [
                {"name": DECIDING_FIELD, "origin": "existing", "why": "the status is bookkeeping only"}])
        return answer

    return respond


def test_bad_distractors_and_manipulations_are_dropped_counted_and_not_exported(cli):
    real_tool = ToolSpecs.parse(recorded_answer("tools", "toolspecs")).names[0]
    with FakeLLMServer(careless_model(real_tool)) as server:
        result = cli("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools",
                     "--provider", "openai",
                     "--model", "m", "--base-url", server.openai_base_url, "--json",
                     env={"OPENAI_API_KEY": "sk-test"})
    assert result.code == 0, result.stderr
    summary = json.loads(result.stdout)
    funnel = {(r["component"], r["item_type"]): r for r in summary["funnel"]}
    by_component = {}
    for r in summary["funnel"]:
        totals = by_component.setdefault(r["component"], dict.fromkeys(("generated", "dropped", "kept"), 0))
        for key in totals:
            totals[key] += r[key]
    assert by_component["distractor_tool"]["dropped"] == 1
    assert by_component["distractor_field"]["dropped"] == 1
    assert by_component["sop_variant"] == {"generated": 7, "dropped": 7, "kept": 0}
    assert all(funnel[("sop_variant", t)]["retried"] == 1 for t in ("branching", "ambiguity"))
    assert by_component["compliance_pair"]["kept"] == 0 and by_component["compliance_pair"]["generated"] > 0
    assert by_component["instruction_document"]["kept"] == 1

    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        stored = con.execute("SELECT component, sum(generated), sum(kept) FROM funnel GROUP BY 1 ORDER BY 1").fetchall()
        drops = json.loads(con.execute(
            "SELECT content->'$.drops' FROM artifacts WHERE stage = 'distractors'").fetchone()[0])
        variant_drops = json.loads(con.execute(
            "SELECT content->'$.drops' FROM artifacts WHERE stage = 'manipulations'").fetchone()[0])
    assert dict((c, (g, k)) for c, g, k in stored)["sop_variant"] == (7, 0)
    reasons = {d["item"]: d["reason"] for d in drops}
    assert real_tool in reasons and DECIDING_FIELD in reasons
    assert "changed" in reasons[DECIDING_FIELD] or "task" in reasons[DECIDING_FIELD]
    assert {d["component"] for d in variant_drops} == {"sop_variant", "compliance_pair"}

    export = cli.home / "exports" / summary["run_id"]
    folder = export / "pharmacy_refills"
    names = [s["toolSpec"]["name"] for s in json.loads((folder / "toolspecs.json").read_text())]
    assert names.count(real_tool) == 1, "the clone of a real tool is never registered as a distractor"
    recorded = json.loads((folder / "metadata.json").read_text())["distractors"]
    assert recorded["columns"] and DECIDING_FIELD not in recorded["columns"]
    assert recorded["tools"] and real_tool not in recorded["tools"]
    assert json.loads((export / "metadata.json").read_text())["hardening"]["distractor_columns"] == recorded["columns"]
    assert not (folder / "sop_variants").exists()
    records = [json.loads(line) for line in (export / "tod_procbench.jsonl").read_text().splitlines()]
    # every compliance pair was dropped; the kept dialogues still give TOD-ProcBench task 1 and 3 items
    assert [r["record_type"] for r in records if r["record_type"] not in ("task1_item", "task3_item")] == \
        ["instruction_document"]

