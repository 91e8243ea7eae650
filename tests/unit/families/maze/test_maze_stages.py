"""The maze stages' run() functions with a scripted model: sets of scenarios, re-asks, repairs, drops,
baselines, the export and a release gate that fails on corrupted targets."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from maze_support import SMALL, FakeModel, extraction_answer, load_hrs, load_lrs, scenario_answer, turn_reading
from sopforge.errors import ValidationFailed
from sopforge.families.maze.models.instances import InstanceSet
from sopforge.families.maze.models.scenario import ScenarioSet
from sopforge.families.maze.stages import baselines as baselines_stage
from sopforge.families.maze.stages import instances as instances_stage
from sopforge.families.maze.stages import package as package_stage
from sopforge.families.maze.stages import scenario as scenario_stage
from sopforge.families.maze.verify.release import release_problems

SLUG = "pharmacy_refills"
OPTS = SMALL.model_copy(update={"lrs_scenarios": 2})


def ask(stage_run, inputs, gateway, settings, **kwargs):
    return stage_run(inputs, llm=gateway, settings=settings, model="m", temperature=0.0, **kwargs)


def intents():
    """A second LRS scenario: the same tree as an intent-recognition task that reports two facts."""
    return load_lrs("intent_recognition").model_copy(update={"name": "refill_intents",
                                                             "report": ["request_type", "days_since_last_fill"]})


@pytest.fixture
def fake() -> FakeModel:
    return FakeModel([load_lrs(), intents()], [load_hrs()], OPTS)


@pytest.fixture
def sets(fake) -> tuple[ScenarioSet, ScenarioSet]:
    return ScenarioSet(kind="LRS", scenarios=fake.lrs), ScenarioSet(kind="HRS", scenarios=fake.hrs)


@pytest.fixture
def instances_inputs(pharmacy_context, sets):
    return instances_stage.InstancesInputs(theme_slug=SLUG, context=pharmacy_context, lrs=sets[0], hrs=sets[1],
                                           options=OPTS)


@pytest.fixture
def built(instances_inputs, fake, scripted, settings) -> InstanceSet:
    gateway, _ = scripted(fake)
    return ask(instances_stage.run, instances_inputs, gateway, settings).artifact


def test_each_scenario_of_a_set_is_asked_with_its_task_type_and_limits(pharmacy_context, fake, scripted, settings):
    gateway, provider = scripted(fake)
    inputs = scenario_stage.ScenarioInputs(theme_slug=SLUG, context=pharmacy_context,
                                           task_types=["disposition", "intent_recognition"])
    result = ask(scenario_stage.run_lrs, inputs, gateway, settings)
    assert [s.name for s in result.artifact.scenarios] == ["refill_contact_disposition", "refill_intents"]
    assert [s.task_type for s in result.artifact.scenarios] == ["disposition", "intent_recognition"]
    keys = [r.call_key for r in provider.requests]
    assert keys == ["pharmacy_refills/maze_lrs/s1/a1", "pharmacy_refills/maze_lrs/s2/a1"]
    second = provider.requests[1].messages[0].content
    assert 'task type "intent_recognition"' in second and "knowledge-base answer: 1 to 300 characters" in second


def test_a_repeated_scenario_name_is_made_unique(pharmacy_context, scripted, settings):
    gateway, _ = scripted([scenario_answer(load_lrs())] * 2)
    inputs = scenario_stage.ScenarioInputs(theme_slug=SLUG, context=pharmacy_context, task_types=["disposition"] * 2)
    names = [s.name for s in ask(scenario_stage.run_lrs, inputs, gateway, settings).artifact.scenarios]
    assert names == ["refill_contact_disposition", "refill_contact_disposition_2"]


def test_a_scenario_without_a_stated_exception_is_re_asked_with_the_reason(pharmacy_context, lrs, scripted, settings):
    plain = lrs.model_copy(deep=True)
    for _, option in plain.leaves():
        option.overrides = []
    plain.option("1.03")[1].when.insert(1, "prescription_age_days <= 365")
    plain.option("1.11")[1].when.insert(1, "prescription_age_days <= 180")
    gateway, provider = scripted([scenario_answer(plain), scenario_answer(lrs)])
    inputs = scenario_stage.ScenarioInputs(theme_slug=SLUG, context=pharmacy_context, task_types=["disposition"])
    result = ask(scenario_stage.run_lrs, inputs, gateway, settings)
    assert result.attempts == 2 and result.artifact.scenarios[0].option("1.02")[1].overrides == ["1.03"]
    assert "maze.lrs.precedence: no option states an exception" in provider.requests[1].messages[-1].content


def test_a_scenario_that_never_passes_stops_the_stage_with_one_line(pharmacy_context, hrs, scripted, settings):
    trapped = hrs.model_copy(deep=True)
    for step_id in ("6", "9"):
        trapped.step(step_id).branches = [b for b in trapped.step(step_id).branches if b.then != "end"]
    trapped.rules = []
    gateway, _ = scripted([scenario_answer(trapped)] * 3)
    inputs = scenario_stage.ScenarioInputs(theme_slug=SLUG, context=pharmacy_context, task_types=["booking_intake"])
    with pytest.raises(ValidationFailed, match=r"maze_hrs: scenario 1 \(booking_intake\): checks .*maze.hrs.exits.*"
                                               r"after 3 attempts") as err:
        ask(scenario_stage.run_hrs, inputs, gateway, settings)
    assert "\n" not in str(err.value) and len(err.value.raw_texts) == 3


def test_instances_of_every_scenario_are_written_read_and_verified_turn_by_turn(built: InstanceSet, fake):
    assert [i.id for i in built.instances] == ["L1-1", "L1-2", "L1-3", "L1-4", "L2-1", "L2-2", "L2-3", "L2-4",
                                               "H1-1", "H1-2", "H1-3", "H1-4"]
    assert all(i.verification.passed and i.verification.subtasks_match for i in built.instances)
    assert [(r.item_type, r.generated, r.kept) for r in built.funnel] == [("LRS", 8, 8), ("HRS", 4, 4)]
    reported = next(i for i in built.instances if i.scenario == "refill_intents")
    assert set(reported.target["details"]) == {"request_type", "days_since_last_fill"}
    assert sum(len(i.plan.subtasks) for i in built.instances) > len(built.instances)
    assert len([k for k in fake.keys if "/dialogue_" in k]) == 12 and len([k for k in fake.keys if "/extract_" in k]) == 12


def test_a_dialogue_the_reader_keeps_contradicting_is_repaired_then_dropped(instances_inputs, fake, scripted, settings):
    victim = fake.plans["L1-2"]
    fact = next(iter(victim.facts))
    wrong_value = "nonsense_value"

    def respond(request):
        if "/extract_L1-2_" in request.call_key:   # the reader keeps finding another value
            readings = [turn_reading(victim, t.index) for t in victim.turns]
            for r in readings:
                if fact in r["facts"]:
                    r["facts"][fact] = wrong_value
            return extraction_answer(readings)
        return fake(request)

    gateway, provider = scripted(respond)
    artifact = ask(instances_stage.run, instances_inputs, gateway, settings).artifact
    assert "L1-2" not in [i.id for i in artifact.instances] and len(artifact.instances) == 11
    (drop,) = artifact.drops
    assert drop.item == "L1-2" and "rejected in all 2 cycles" in drop.reason
    assert f"extraction: {fact} read as '{wrong_value}'" in drop.reason
    repair = next(r for r in provider.requests if r.call_key.endswith("dialogue_L1-2_c2/a1")).messages[0].content
    assert instances_stage.REPAIR_LEAD in repair and "sarcasm stays sarcastic" in repair


def test_a_scenario_whose_instances_are_all_dropped_fails_the_stage(instances_inputs, fake, scripted, settings):
    def respond(request):
        if "/extract_H" in request.call_key:
            return extraction_answer([])
        return fake(request)

    gateway, _ = scripted(respond)
    with pytest.raises(ValidationFailed, match="every instance of automated_refill_line was dropped"):
        ask(instances_stage.run, instances_inputs, gateway, settings)


def test_baselines_read_the_first_and_the_last_turn_and_stay_below_the_gate(built, sets, fake, scripted, settings):
    gateway, provider = scripted(fake)
    result = ask(baselines_stage.run, baselines_stage.BaselinesInputs(theme_slug=SLUG, lrs=sets[0], hrs=sets[1],
                                                                      instances=built), gateway, settings)
    report = result.artifact
    assert set(report.pooled) == {"LRS", "HRS"} and not report.too_high()
    assert all(mean < 0.35 for means in report.pooled.values() for mean in means.values())
    keys = [r.call_key.split("/")[2] for r in provider.requests]
    assert sorted(k.split("_")[0] for k in keys) == ["first"] * 12 + ["last"] * 12
    last = next(r for r in provider.requests if "/last_turn_H1-1/" in r.call_key).messages[0].content
    first_agent_line = fake.plans["H1-1"].turns[0].agent_line
    assert first_agent_line not in last.split("<user_input>")[1]   # the last turn alone, nothing said before it
    assert all(c.passed for c in result.checks)
    majority = report.scenarios[0].result("majority")
    assert majority.mean == 0.2 and majority.subtask_mean is not None


def test_the_package_exports_subtasks_and_the_release_gate_re_executes_them(built, sets, fake, scripted, settings,
                                                                          tmp_path):
    gateway, _ = scripted(fake)
    report = ask(baselines_stage.run, baselines_stage.BaselinesInputs(theme_slug=SLUG, lrs=sets[0], hrs=sets[1],
                                                                      instances=built), gateway, settings).artifact
    inputs = package_stage.PackageInputs(run_id="r-test", theme="t", theme_slug=SLUG, lrs=sets[0], hrs=sets[1],
                                         instances=built, baselines=report, exports_dir=tmp_path)
    result = package_stage.run(inputs)
    assert all(c.passed for c in result.checks), [c.message for c in result.checks if not c.passed]
    folder = tmp_path / "r-test" / "maze"
    for name in ("refill_contact_disposition", "refill_intents", "automated_refill_line"):
        assert {p.name for p in (folder / name).iterdir()} == {
            "prompt_template.txt", "schema.json", "exclusion_keys.json", "scenario.json", "instances.jsonl",
            "subtasks.jsonl", "raw_data.json"}
        prompt = (folder / name / "prompt_template.txt").read_text()
        assert [prompt.count(h) for h in ("【Background】", "【Requirements】", "【Input】", "【Output Requirement】")] == [1] * 4
    subtasks = [json.loads(line) for line in (folder / "subtasks.jsonl").read_text().splitlines()]
    stats = json.loads((folder / "metadata.json").read_text())["statistics"]
    assert len(subtasks) == stats["subtasks"] == sum(len(i.plan.subtasks) for i in built.instances)
    assert len(pq.read_table(folder / "subtasks.parquet")) == len(subtasks)
    for sub in subtasks:   # each input ends with its user turn and is a prefix of the whole conversation
        whole = next(i for i in built.instances if i.id == sub["instance"]).user_input
        assert whole.startswith(sub["user_input"]) and sub["user_input"] in sub["input"]
    raw = json.loads((folder / "automated_refill_line" / "raw_data.json").read_text())
    assert set(raw[0]) == {"input", "target", "json_schema", "no_required_eval_acc_keys"} and len(raw) > 4

    # a corrupted target in the export fails the gate by name
    path = folder / "automated_refill_line" / "subtasks.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    victim = rows[1]
    other = next(i for i in load_hrs().answer_ids() if i != victim["target"]["step"])
    rows[1] = {**victim, "target": {**victim["target"], "step": other}}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = release_problems(folder)
    assert len(problems) == 1 and problems[0].startswith(f"{victim['id']}: the target is")

    # and so does a corrupted plan handed to the package stage
    broken = built.model_copy(deep=True)
    plan = next(i for i in broken.instances if i.kind == "LRS").plan
    plan.subtasks[-1].target = {**plan.subtasks[-1].target, "step": "2.01" if plan.target["step"] != "2.01" else "2.02"}
    checks = {c.name: c for c in package_stage.run(inputs.model_copy(update={"instances": broken})).checks}
    assert not checks["maze_package.release"].passed and plan.id in checks["maze_package.release"].message
