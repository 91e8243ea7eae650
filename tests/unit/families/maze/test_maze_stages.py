"""The maze stages' run() functions with a scripted model: re-asks, repairs, drops, baselines, exports."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from maze_support import recorded, replay, scenario_answer
from sopforge.errors import ValidationFailed
from sopforge.families.maze.models.instances import InstanceSet
from sopforge.families.maze.options import MazeSpec
from sopforge.families.maze.stages import baselines as baselines_stage
from sopforge.families.maze.stages import instances as instances_stage
from sopforge.families.maze.stages import package as package_stage
from sopforge.families.maze.stages import scenario as scenario_stage

SLUG = "pharmacy_refills"


def ask(stage_run, inputs, gateway, settings, **kwargs):
    return stage_run(inputs, llm=gateway, settings=settings, model="m", temperature=0.0, **kwargs)


@pytest.fixture
def instances_inputs(pharmacy_context, lrs, hrs):
    return instances_stage.InstancesInputs(theme_slug=SLUG, context=pharmacy_context, lrs=lrs, hrs=hrs, options=MazeSpec())


@pytest.fixture
def built(instances_inputs, scripted, settings) -> InstanceSet:
    gateway, _ = scripted(replay)
    return ask(instances_stage.run, instances_inputs, gateway, settings).artifact


def test_a_scenario_with_an_unreachable_option_is_re_asked_with_the_reason(pharmacy_context, lrs, lrs_answer, scripted,
                                                                          settings):
    bad = lrs.model_copy(deep=True)
    bad.option("1.06")[1].when = ["medication_class == non_controlled", "days_since_last_fill >= 24"]
    gateway, provider = scripted([scenario_answer(bad), lrs_answer])
    result = ask(scenario_stage.run_lrs, scenario_stage.ScenarioInputs(theme_slug=SLUG, context=pharmacy_context),
                 gateway, settings)
    assert result.attempts == 2 and result.artifact == lrs
    reask = provider.requests[1].messages[-1].content
    assert "maze.lrs.reachable" in reask and "1.05: whenever it holds, so does 1.06" in reask
    assert provider.requests[0].call_key == "pharmacy_refills/maze_lrs/main/a1"


def test_a_scenario_that_never_passes_stops_the_stage_with_one_line(pharmacy_context, hrs, scripted, settings):
    trapped = hrs.model_copy(deep=True)
    for step_id in ("6", "9"):
        trapped.step(step_id).branches = [b for b in trapped.step(step_id).branches if b.then != "end"]
    trapped.rules = []
    gateway, _ = scripted([scenario_answer(trapped)] * 3)
    with pytest.raises(ValidationFailed, match=r"maze_hrs: checks .*maze.hrs.exits.*after 3 attempts") as err:
        ask(scenario_stage.run_hrs, scenario_stage.ScenarioInputs(theme_slug=SLUG, context=pharmacy_context),
            gateway, settings)
    assert "\n" not in str(err.value)


def test_instances_are_written_read_verified_and_one_repaired(built: InstanceSet):
    assert [i.id for i in built.instances] == ["L1", "L2", "L3", "L4", "L5", "H1", "H2", "H3", "H4", "H5"]
    assert all(i.verification.passed for i in built.instances)
    l2 = next(i for i in built.instances if i.id == "L2")
    assert l2.cycles == 2 and "regular refill" in l2.user_input
    assert [(r.item_type, r.generated, r.verified, r.retried, r.dropped, r.kept) for r in built.funnel] == [
        ("LRS", 5, 5, 1, 0, 5), ("HRS", 5, 5, 0, 0, 5)]
    h3 = next(i for i in built.instances if i.id == "H3")
    assert h3.user_input.startswith("ASSISTANT: Hello, this is the pharmacy's automated refill line.")
    assert h3.target["step"] == "6"


def test_a_dialogue_the_reader_keeps_contradicting_is_repaired_then_dropped(instances_inputs, scripted, settings):
    def respond(request):
        key = request.call_key
        if "/extract_L3_" in key:   # the reader keeps finding 2 refills where the plan says 0
            return recorded("maze_instances", "extract_L3_c1").replace('"refills_remaining": 0', '"refills_remaining": 2')
        if "/dialogue_L3_c2/" in key:
            return recorded("maze_instances", "dialogue_L3_c1")
        return replay(request)

    gateway, provider = scripted(respond)
    artifact = ask(instances_stage.run, instances_inputs, gateway, settings).artifact
    assert "L3" not in [i.id for i in artifact.instances] and len(artifact.instances) == 9
    (drop,) = artifact.drops
    assert drop.item == "L3" and "rejected in all 2 cycles" in drop.reason
    assert "extraction: refills_remaining read as 2, planned 0" in drop.reason
    assert artifact.funnel[0].dropped == 1 and artifact.funnel[0].retried == 2
    repair = next(r for r in provider.requests if r.call_key.endswith("dialogue_L3_c2/a1")).messages[0].content
    assert instances_stage.REPAIR_LEAD in repair and "refills_remaining read as 2, planned 0" in repair


def test_a_scenario_whose_instances_are_all_dropped_fails_the_stage(instances_inputs, scripted, settings):
    def respond(request):
        if "/extract_H" in request.call_key:
            return '<extraction>{"facts": {}, "replies": []}</extraction>'
        if "/dialogue_H" in request.call_key and "_c2/" in request.call_key:
            return recorded("maze_instances", request.call_key.split("/")[2].replace("_c2", "_c1"))
        return replay(request)

    gateway, _ = scripted(respond)
    with pytest.raises(ValidationFailed, match="every instance of automated_refill_line was dropped"):
        ask(instances_stage.run, instances_inputs, gateway, settings)


def test_baselines_read_the_first_turn_and_stay_near_the_format_credit(built, lrs, hrs, scripted, settings):
    gateway, provider = scripted(replay)
    result = ask(baselines_stage.run, baselines_stage.BaselinesInputs(theme_slug=SLUG, lrs=lrs, hrs=hrs, instances=built),
                 gateway, settings)
    report = result.artifact
    means = {(s.kind, r.name): (r.mean, r.correct) for s in report.scenarios for r in s.results}
    assert means == {("LRS", "majority_leaf"): (0.36, 1), ("LRS", "first_turn"): (0.52, 2), ("LRS", "constant"): (0.2, 0),
                     ("HRS", "majority_leaf"): (0.52, 2), ("HRS", "first_turn"): (0.2, 0), ("HRS", "constant"): (0.2, 0)}
    assert len(provider.requests) == 10 and all("/first_turn_" in r.call_key for r in provider.requests)
    # the reader saw the input only up to the first user turn
    first = provider.requests[0].messages[0].content.split("<user_input>")[1]
    assert "Hi Dana" in first and "oxycodone" not in first
    assert all(c.passed for c in result.checks)


def test_package_exports_the_set_and_proves_the_scorer_agrees(built, lrs, hrs, scripted, settings, tmp_path):
    gateway, _ = scripted(replay)
    report = ask(baselines_stage.run, baselines_stage.BaselinesInputs(theme_slug=SLUG, lrs=lrs, hrs=hrs, instances=built),
                 gateway, settings).artifact
    inputs = package_stage.PackageInputs(run_id="r-test", theme="t", theme_slug=SLUG, lrs=lrs, hrs=hrs, instances=built,
                                         baselines=report, exports_dir=tmp_path)
    result = package_stage.run(inputs)
    assert all(c.passed for c in result.checks)
    folder = tmp_path / "r-test" / "maze"
    for name in ("refill_contact_disposition", "automated_refill_line"):
        assert {p.name for p in (folder / name).iterdir()} == {
            "prompt_template.txt", "schema.json", "exclusion_keys.json", "scenario.json", "instances.jsonl", "raw_data.json"}
        assert json.loads((folder / name / "exclusion_keys.json").read_text()) == ["response"]
        prompt = (folder / name / "prompt_template.txt").read_text()
        assert [h in prompt for h in ("【Background】", "【Requirements】", "【Input】", "【Output Requirement】")] == [True] * 4
        assert "{{user_input}}" in prompt
    rows = [json.loads(line) for line in (folder / "instances.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and rows[0]["target"]["step"] == "2.01" and rows[0]["user_input"] in rows[0]["input"]
    assert len(pq.read_table(folder / "instances.parquet")) == 10
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["statistics"]["instances"] == 10 and metadata["statistics"]["subtasks"] == 25
    assert metadata["paper"]["instances"] == 397 and metadata["statistics"]["lrs_leaves"] == {"refill_contact_disposition": 47}
    raw = json.loads((folder / "automated_refill_line" / "raw_data.json").read_text())
    assert set(raw[0]) == {"input", "target", "json_schema", "no_required_eval_acc_keys"}

    built.instances[0].plan.target["step"] = "9.99"   # a reference answer outside the exported schema
    broken = {c.name: c for c in package_stage.run(inputs.model_copy(update={"instances": built})).checks}
    assert not broken["maze_package.reference_scores"].passed
    assert "refill_contact_disposition" in broken["maze_package.reference_scores"].message
