"""Stage 'maze_baselines': the four shortcut baselines per scenario, pooled per kind and gated.

Two shortcuts ask a model: the same reader template as the verification (``sop_maze/extract_facts``)
given only the first user turn (with what came before it) or only the last user turn (alone), call
keys ``{slug}/maze_baselines/{first_turn|last_turn}_<instance>/aN``. When that part is the whole
input, the verified reading is reused instead of asking again. An unreadable answer counts as a
reader who found nothing (the fallback then decides), so one bad reply cannot hide a shortcut. The
other two (leave-one-out majority, the SOP's first option) need no model. The independent asks run
concurrently (:func:`sopforge.ask.fan_out`). Pure: no Prefect, no store.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, ask_keeping_answers, fan_out
from sopforge.checks import check
from sopforge.errors import ValidationFailed
from sopforge.families.maze.models.baselines import BASELINES, BaselineReport, ShortcutReading
from sopforge.families.maze.models.instances import Extraction, InstanceSet, MazeInstance, parse_extraction, render_user_input
from sopforge.families.maze.models.scenario import Scenario, ScenarioSet
from sopforge.families.maze.stages.instances import READER_TEMPLATE, extraction_prompt
from sopforge.families.maze.verify.baselines import pooled_means, scenario_baselines
from sopforge.families.maze.verify.scorer import FORMAT_CREDIT
from sopforge.families.maze.verify.shortcuts import read_answer
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_ID", "BaselinesInputs", "run"]

STAGE = "maze_baselines"
TEMPLATE_ID = READER_TEMPLATE


class BaselinesInputs(BaseModel):
    """The verified instances and the scenarios they belong to."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    lrs: ScenarioSet = Field(description="Accepted LRS scenarios.")
    hrs: ScenarioSet = Field(description="Accepted HRS scenarios.")
    instances: InstanceSet = Field(description="Verified instances.")
    max_baseline: float = Field(0.35, description="Every shortcut's pooled mean must stay below this.")


def _part(instance: MazeInstance, shortcut: str):
    dialogue = instance.dialogue
    return dialogue.up_to_first_user_turn() if shortcut == "first_turn" else dialogue.last_user_turn()


def run(inputs: BaselinesInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[BaselineReport]:
    """Read the first and the last user turn of every instance, then score the four shortcuts.

    Returns:
        The BaselineReport. ``checks`` hold ``maze.baselines.<kind>``: a warning when a shortcut's
        pooled mean reaches ``max_baseline`` (the package gate refuses the release then).
    """
    registry = registry or default_registry(settings)
    scenarios: dict[str, Scenario] = {s.name: s for s in inputs.lrs.scenarios + inputs.hrs.scenarios}
    jobs = [(scenarios[i.scenario], i, shortcut) for i in inputs.instances.instances
            for shortcut in ("first_turn", "last_turn")]

    def read(job: tuple[Scenario, MazeInstance, str]) -> tuple[ShortcutReading, dict[str, Any], list[str], Any]:
        scenario, instance, shortcut = job
        part = _part(instance, shortcut)
        users = len(instance.dialogue.user_turns())
        asked = users > 1
        reading, note, raw, rendered = instance.extraction, "", [], None
        if asked:
            rendered = extraction_prompt(registry, scenario, render_user_input(
                part, instance.plan.input_format, instance.plan.call_date))
            try:
                reading = ask_keeping_answers(
                    raw, llm, rendered, parse_and_check=lambda text: (parse_extraction(text), []), stage=STAGE,
                    call_key_prefix=f"{inputs.theme_slug}/{STAGE}/{shortcut}_{instance.id}", settings=settings,
                    model=model, temperature=temperature, feedback=feedback).artifact
            except ValidationFailed:  # the raw answers are in ``raw`` already
                reading, note = Extraction(), "unreadable reply, read as nothing; "
        replies = [r.strip().lower() for r in reading.replies] if scenario.kind == "HRS" else []
        answer, decided = read_answer(scenario, reading.facts, replies)
        return (ShortcutReading(instance=instance.id, shortcut=shortcut, extraction=reading,  # type: ignore[arg-type]
                                asked=asked, decided=note + decided), answer, raw, rendered)

    done = fan_out(read, jobs, "shortcut reader")
    raw_texts = [t for _, _, raw, _ in done for t in raw]
    answers: dict[str, dict[str, dict[str, Any]]] = {"first_turn": {}, "last_turn": {}}
    for reading, answer, _, _ in done:
        answers[reading.shortcut][reading.instance] = answer
    results = []
    for scenario in inputs.lrs.scenarios + inputs.hrs.scenarios:
        mine = [i for i in inputs.instances.instances if i.scenario == scenario.name]
        if mine:
            results.append(scenario_baselines(scenario, mine, answers["first_turn"], answers["last_turn"]))
    report = BaselineReport(scenarios=results, readings=[r for r, _, _, _ in done], pooled=pooled_means(results),
                            max_baseline=inputs.max_baseline)
    checks = []
    for kind, means in report.pooled.items():
        high = [f"{name} {mean:.2f}" for name, mean in means.items() if mean >= inputs.max_baseline]
        checks.append(check(
            f"maze.baselines.{kind.lower()}", not high,
            f"{kind}: shortcuts that skip the reading score at or above {inputs.max_baseline}: {', '.join(high)}",
            ok=f"{kind}: every shortcut stays below {inputs.max_baseline} (format-only credit {FORMAT_CREDIT}): "
               + ", ".join(f"{n} {means[n]:.2f}" for n in BASELINES), severity="warning", means=means))
    identity = next((r for _, _, _, r in done if r is not None), None) or registry.render(
        READER_TEMPLATE, scenario_title=inputs.lrs.scenarios[0].title,
        fact_catalogue=inputs.lrs.scenarios[0].fact_catalogue(), reply_kinds="-", user_input="-")
    return StageResult[BaselineReport](
        artifact=report, checks=checks, template_id=identity.template_id, template_hash=identity.template_hash,
        prompt_hash=identity.prompt_hash, model=model, attempts=len(raw_texts), raw_texts=raw_texts)
