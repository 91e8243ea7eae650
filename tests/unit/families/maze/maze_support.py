"""Helpers for the maze family's tests: frozen scenario trees and a plan-driven scripted model.

The scenario trees are test data (tests/fixtures/maze/README.md). The scripted model answers every
maze prompt from the plans code sampled: a writer that states exactly each turn's facts (decoys,
operands and planted numbers included) in a plain, machine-made form, and a reader that reports
exactly what the plan put in each user turn. It exercises the pipeline's mechanics (call keys,
checks, repairs, answers computed turn by turn), not language understanding, which only an
independent model can show. Tests of deliberate failures wrap it to answer wrongly on purpose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

from sopforge.families.maze.models.instances import InstancePlan
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, ScenarioSet
from sopforge.families.maze.options import MazeSpec
from sopforge.families.maze.stages.instances import plan_all

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "maze"
RECORDINGS = Path(__file__).resolve().parents[4] / "examples" / "recordings" / "pharmacy_refills"
THEME = ("Retail pharmacy prescription refill requests: deciding whether a patient's refill can be dispensed, must be "
         "referred to the prescriber, or must be denied")
SMALL = MazeSpec(lrs_scenarios=1, hrs_scenarios=1, lrs_instances=4, hrs_instances=4)


def load_lrs(task_type: str = "disposition") -> LRSScenario:
    data = json.loads((FIXTURES / "pharmacy_lrs.json").read_text(encoding="utf-8"))
    return LRSScenario.model_validate({**data, "task_type": task_type})


def load_hrs(task_type: str = "inbound_service_line") -> HRSScenario:
    data = json.loads((FIXTURES / "pharmacy_hrs.json").read_text(encoding="utf-8"))
    return HRSScenario.model_validate({**data, "task_type": task_type})


def scenario_answer(scenario: LRSScenario | HRSScenario) -> str:
    """A model answer holding ``scenario`` (for edited trees)."""
    data = scenario.model_dump(mode="json", exclude={"kind", "task_type"})
    return f"<design_notes>test tree</design_notes>\n<scenario>\n{json.dumps(data)}\n</scenario>"


def _show(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def user_text(plan: InstancePlan, index: int) -> str:
    """The machine-made text of user turn ``index``: every planned fact, decoy, operand and planted number."""
    turn = plan.turns[index - 1]
    parts = [f"[{turn.reply}]"] if turn.reply else []
    calc = {n.fact: n for n in plan.noise if n.phenomenon == "calculation"}
    for n in plan.noise:
        if n.decoy_turn == index:
            parts.append(f"{n.fact} is {_show(n.decoy)}")
        elif n.user_turn == index and n.phenomenon in ("disfluency", "off_topic") and n.decoy is not None:
            parts.append(f"(background: {_show(n.decoy)})")
    if turn.off_topic:
        parts.append("unrelated chatter about the weather")
    for fact in turn.facts:
        parts.append(f"{fact}: {', '.join(calc[fact].operands)}" if fact in calc else f"{fact} is {_show(plan.facts[fact])}")
    return " ".join(parts) or "ok"


def dialogue_answer(plan: InstancePlan, text: Callable[[InstancePlan, int], str] = user_text) -> str:
    turns, noise = [], []
    for t in plan.turns:
        turns.append({"speaker": "agent", "text": t.agent_line or "Go on."})
        turns.append({"speaker": "user", "text": text(plan, t.index)})
    for n in plan.noise:
        noise.append({"phenomenon": n.phenomenon, "turn": 2 * n.user_turn, "note": "test"})
    return "<dialogue>" + json.dumps({"turns": turns, "noise": noise}) + "</dialogue>"


def turn_reading(plan: InstancePlan, index: int) -> dict:
    """What a perfect reader records for user turn ``index``."""
    turn = plan.turns[index - 1]
    facts = {f: plan.facts[f] for f in turn.facts}
    facts.update({n.fact: n.decoy for n in plan.noise if n.decoy_turn == index and n.fact})
    return {"reply": turn.reply, "facts": facts}


def extraction_answer(readings: list[dict]) -> str:
    return "<extraction>" + json.dumps({"turns": readings}) + "</extraction>"


class FakeModel:
    """Answers the maze prompts from the plans (see the module docstring); ``requests`` keeps the call keys."""

    def __init__(self, lrs: list[LRSScenario], hrs: list[HRSScenario], opts: MazeSpec = SMALL):
        self.lrs, self.hrs, self.opts = lrs, hrs, opts
        self.plans = {p.id: p for _, p in plan_all(ScenarioSet(kind="LRS", scenarios=lrs),
                                                   ScenarioSet(kind="HRS", scenarios=hrs), opts)}
        self.keys: list[str] = []

    def __call__(self, request) -> str:
        key = request.call_key
        self.keys.append(key)
        item = key.split("/")[2]
        if (found := re.fullmatch(r"s(\d+)", item)) is not None:
            scenarios = self.lrs if "/maze_lrs/" in key else self.hrs
            return scenario_answer(scenarios[int(found.group(1)) - 1])
        kind, _, rest = item.partition("_")
        if kind == "dialogue":
            return dialogue_answer(self.plans[rest.rsplit("_c", 1)[0]])
        if kind == "extract":
            plan = self.plans[rest.rsplit("_c", 1)[0]]
            return extraction_answer([turn_reading(plan, t.index) for t in plan.turns])
        shortcut, _, instance = item.rpartition("_")
        plan = self.plans[instance]
        index = 1 if shortcut == "first_turn" else len(plan.turns)
        reading = turn_reading(plan, index)
        if shortcut == "last_turn":  # the last turn alone: only what it says itself, as the true values
            reading["facts"] = {f: plan.facts[f] for f in plan.turns[-1].facts}
        return extraction_answer([reading])


def export_scripted_run(context, scripted, settings, exports_dir: Path, run_id: str):
    """Instances, baselines and package of the fixture trees answered by :class:`FakeModel`.

    Returns:
        The run's export folder (``exports_dir/<run_id>``) and the maze_baselines report.
    """
    from sopforge.families.maze.stages import baselines as baselines_stage
    from sopforge.families.maze.stages import instances as instances_stage
    from sopforge.families.maze.stages import package as package_stage

    fake = FakeModel([load_lrs()], [load_hrs()], SMALL)
    gateway, _ = scripted(fake)
    lrs, hrs = ScenarioSet(kind="LRS", scenarios=fake.lrs), ScenarioSet(kind="HRS", scenarios=fake.hrs)

    def run(stage, inputs):
        return stage(inputs, llm=gateway, settings=settings, model="m", temperature=0.0).artifact

    built = run(instances_stage.run, instances_stage.InstancesInputs(theme_slug="t", context=context, lrs=lrs,
                                                                      hrs=hrs, options=SMALL))
    report = run(baselines_stage.run, baselines_stage.BaselinesInputs(theme_slug="t", lrs=lrs, hrs=hrs, instances=built))
    package_stage.run(package_stage.PackageInputs(run_id=run_id, theme="t", theme_slug="t", lrs=lrs, hrs=hrs,
                                                  instances=built, baselines=report, exports_dir=exports_dir))
    return exports_dir / run_id, report
