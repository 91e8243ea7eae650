"""Stage 'maze_baselines': the three shortcut baselines per scenario (issue 14 item 5).

Only the first-turn reader asks a model: the same reader template as the verification
(``sop_maze/extract_facts``), given the user input cut after the first user turn (call keys
``{slug}/maze_baselines/first_turn_<instance>/aN``). When the first user turn is the whole
input, the verified reading is reused instead of asking again. An unreadable answer counts as
a reader who found nothing (the fallback then decides), so one bad reply cannot hide a
shortcut. Pure: no Prefect, no store.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, ask_keeping_answers
from sopforge.checks import check
from sopforge.errors import ValidationFailed
from sopforge.families.maze.models.baselines import BaselineReport, FirstTurnReading
from sopforge.families.maze.models.instances import Extraction, InstanceSet, parse_extraction, render_user_input
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario
from sopforge.families.maze.stages.instances import READER_TEMPLATE, extraction_prompt
from sopforge.families.maze.verify.baselines import first_turn_answer, scenario_baselines
from sopforge.families.maze.verify.scorer import FORMAT_CREDIT
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_ID", "BaselinesInputs", "run"]

STAGE = "maze_baselines"
TEMPLATE_ID = READER_TEMPLATE


class BaselinesInputs(BaseModel):
    """The verified instances and the scenarios they belong to."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    lrs: LRSScenario = Field(description="Accepted LRS scenario.")
    hrs: HRSScenario = Field(description="Accepted HRS scenario.")
    instances: InstanceSet = Field(description="Verified instances.")


def run(inputs: BaselinesInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[BaselineReport]:
    """Read every instance's first user turn, then score the three shortcuts per scenario.

    Returns:
        The BaselineReport. ``checks`` hold ``maze.baselines.<scenario>`` per scenario: a warning
        when a shortcut answers more than half of the instances exactly.
    """
    registry = registry or default_registry(settings)
    raw_texts: list[str] = []
    identity = None
    readings: list[FirstTurnReading] = []
    scenarios = []
    checks = []
    for scenario in (inputs.lrs, inputs.hrs):
        instances = inputs.instances.of_kind(scenario.kind)
        if not instances:
            continue
        answers = {}
        for instance in instances:
            first = instance.dialogue.up_to_first_user_turn()
            asked = len(first.turns) < len(instance.dialogue.turns)
            reading, note = instance.extraction, ""
            if asked:
                rendered = extraction_prompt(registry, scenario, render_user_input(
                    first, instance.plan.input_format, instance.plan.call_date))
                identity = identity or rendered
                try:
                    reading = ask_keeping_answers(
                        raw_texts, llm, rendered, parse_and_check=lambda raw: (parse_extraction(raw), []), stage=STAGE,
                        call_key_prefix=f"{inputs.theme_slug}/{STAGE}/first_turn_{instance.id}", settings=settings,
                        model=model, temperature=temperature, feedback=feedback).artifact
                except ValidationFailed:
                    reading, note = Extraction(facts={}), "unreadable reply, read as nothing; "
            answer, decided = first_turn_answer(scenario, reading)
            answers[instance.id] = answer
            readings.append(FirstTurnReading(instance=instance.id, extraction=reading, asked=asked,
                                             decided=note + decided))
        result = scenario_baselines(scenario, instances, answers)
        scenarios.append(result)
        loud = [f"{r.name} answers {r.correct} of {result.instances} exactly (mean {r.mean:.2f})"
                for r in result.results if r.correct * 2 > result.instances]
        checks.append(check(f"maze.baselines.{scenario.kind.lower()}", not loud,
                            f"{scenario.name}: a shortcut that skips the reading does too well: " + "; ".join(loud)
                            if loud else f"{scenario.name}: every shortcut stays near the format-only credit "
                            f"{FORMAT_CREDIT} (" + ", ".join(f"{r.name} {r.mean:.2f}" for r in result.results) + ")",
                            severity="warning", means={r.name: r.mean for r in result.results}))
    identity = identity or registry.render(READER_TEMPLATE, scenario_title=inputs.lrs.title,
                                           fact_catalogue=inputs.lrs.fact_catalogue(), reply_kinds="-", user_input="-")
    return StageResult[BaselineReport](
        artifact=BaselineReport(scenarios=scenarios, first_turn=readings), checks=checks,
        template_id=identity.template_id, template_hash=identity.template_hash, prompt_hash=identity.prompt_hash,
        model=model, attempts=len(raw_texts), raw_texts=raw_texts)
