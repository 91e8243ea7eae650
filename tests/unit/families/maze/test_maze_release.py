"""The release gate's interpreter: an independent implementation that agrees with the tree's execution,
and a gate that fails on a doctored misreading or agent line as well as on a corrupted target."""

from __future__ import annotations

import json
import random

import pytest

from maze_support import export_scripted_run
from sopforge.families.maze.models.execution import Turn, compile_logic, run_values
from sopforge.families.maze.verify import release
from sopforge.families.maze.verify.release import Interpreter, release_problems
from sopforge.families.maze.verify.shortcuts import answer_key


def test_the_interpreter_agrees_with_the_execution_on_random_facts(lrs):
    logic, interp = compile_logic(lrs), Interpreter(lrs)
    rng = random.Random(3)
    decided = 0
    for _ in range(400):
        facts = {f: logic.sample_value(f, rng.randrange(len(logic.cells[f])), rng)
                 for f in logic.facts if rng.random() < 0.8}
        run = run_values(lrs, logic, facts)
        mine = interp.lrs(facts)
        assert (answer_key(run.answer) if run.ok else None) == (answer_key(mine) if mine else None), facts
        decided += run.ok
    assert decided > 100   # the comparison covered answers, not only undetermined inputs


def test_the_interpreter_agrees_with_the_execution_on_random_calls(hrs):
    logic, interp = compile_logic(hrs), Interpreter(hrs)
    rng = random.Random(5)
    replies = [r.name for r in hrs.replies]
    for _ in range(300):
        facts = {f: logic.sample_value(f, rng.randrange(len(logic.cells[f])), rng)
                 for f in logic.facts if rng.random() < 0.7}
        turns = [Turn(rng.choice(replies), rng.randrange(len(hrs.knowledge_base))) for _ in range(rng.randint(1, 4))]
        run = run_values(hrs, logic, facts, turns)
        answers, lines = interp.hrs(facts, [t.reply for t in turns], [t.question for t in turns])
        assert [answer_key(a) for a in answers] == [answer_key(a) for a in run.turn_answers]
        assert (len(answers) == len(turns)) == run.ok   # both stop at the same undetermined turn
        if run.ok:
            assert lines[:len(turns)] == run.agent_lines


def test_a_range_too_wide_to_enumerate_is_judged_by_one_value_per_stretch(lrs, hrs, monkeypatch):
    # The permits trial's tree had a fact in dollars (0 to several million): the gate refused to read it.
    rng = random.Random(11)
    for scenario in (lrs, hrs):
        logic, whole = compile_logic(scenario), Interpreter(scenario)
        monkeypatch.setattr(release, "MAX_DOMAIN", 0)   # every integer fact judged by its representatives
        sampled = Interpreter(scenario)
        monkeypatch.undo()
        assert any(len(sampled.domains[f]) < len(whole.domains[f]) for f in logic.facts if f in whole.domains)
        replies = [r.name for r in getattr(scenario, "replies", [])]
        for _ in range(300):
            facts = {f: logic.sample_value(f, rng.randrange(len(logic.cells[f])), rng)
                     for f in logic.facts if rng.random() < 0.6}
            if scenario is lrs:
                assert sampled.lrs(facts) == whole.lrs(facts), facts
            else:
                turns = [rng.choice(replies) for _ in range(3)]
                assert sampled.hrs(facts, turns, [None] * 3) == whole.hrs(facts, turns, [None] * 3), facts


def test_precedence_is_read_from_the_tree(lrs):
    interp = Interpreter(lrs)
    expired_without_refills = {"request_type": "refill_request", "medication_class": "non_controlled",
                               "prescription_age_days": 400, "refills_remaining": 0}
    assert interp.lrs(expired_without_refills)["step"] == "1.02"   # 1.03 holds too; 1.02 overrides it
    lrs.option("1.02")[1].overrides = []
    assert Interpreter(lrs).lrs(expired_without_refills) is None   # without the precedence: two options hold


@pytest.fixture
def export(pharmacy_context, scripted, settings, tmp_path):
    folder = export_scripted_run(pharmacy_context, scripted, settings, tmp_path, "r")[0] / "maze"
    assert release_problems(folder) == []
    return folder


def rewrite(path, change):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_doctored_misreading_fails_the_gate(export):
    path = export / "refill_contact_disposition" / "instances.jsonl"
    flipped = []

    def flip(rows):
        for row in rows:
            for n in row["noise"]:
                if n["changes_answer"] and not flipped:
                    n["misread"], n["changes_answer"] = row["target"], False
                    flipped.append(row["id"])

    rewrite(path, flip)
    problems = release_problems(export)
    assert flipped and any(p.startswith(f"{flipped[0]}: ") and "misread recorded as" in p for p in problems)


def test_a_doctored_agent_line_fails_the_gate(export):
    path = export / "automated_refill_line" / "subtasks.jsonl"
    rewrite(path, lambda rows: rows[-1]["turns"][0].update(text="Hello, anything else?"))
    problems = release_problems(export)
    assert len(problems) == 1 and "agent lines in the input are not the procedure's scripts" in problems[0]


def test_an_instance_whose_target_is_not_its_last_subtask_fails_the_gate(export):
    path = export / "refill_contact_disposition" / "instances.jsonl"
    rewrite(path, lambda rows: rows[0]["target"].update(step="5.01"))
    assert any("the instance's target is not its last subtask's" in p for p in release_problems(export))


@pytest.mark.parametrize("seed", range(2))
def test_the_interpreter_re_derives_every_planned_answer_and_misreading(seed, lrs, hrs):
    from sopforge.families.maze.models.instances import PHENOMENA
    from sopforge.families.maze.stages.planning import plan_instances

    reporting = lrs.model_copy(update={"name": "intents", "report": ["request_type", "days_since_last_fill"]})
    for scenario in (lrs, reporting, hrs):
        interp = Interpreter(scenario)
        for plan in plan_instances(scenario, 6, noise=dict.fromkeys(PHENOMENA, 0.5), max_turns=5, seed=seed):
            questions = [t.question for t in plan.turns]
            for sub in plan.subtasks:
                if plan.kind == "LRS":
                    got = interp.lrs(sub.facts)
                else:
                    answers, _ = interp.hrs(sub.facts, sub.replies, questions[:sub.turn])
                    got = answers[-1] if len(answers) == sub.turn else None
                assert got is not None and answer_key(got) == answer_key(sub.target), (plan.id, sub.turn)
            for n in (n for n in plan.noise if n.decoy is not None):
                if n.fact:
                    inside = any(v == n.decoy and type(v) is type(n.decoy) for v in interp.domains[n.fact])
                    facts = {**plan.facts, n.fact: n.decoy}
                    replies = [t.reply for t in plan.turns]
                else:
                    inside, facts = True, plan.facts
                    replies = [n.decoy if t.index == n.user_turn else t.reply for t in plan.turns]
                if not inside:
                    got = None
                elif plan.kind == "LRS":
                    got = interp.lrs(facts)
                else:
                    answers, _ = interp.hrs(facts, replies, questions)
                    got = answers[-1] if len(answers) == len(replies) else None
                assert (answer_key(got) if got else None) == (answer_key(n.misread) if n.misread else None), (
                    plan.id, n.phenomenon)
