"""Stages 'maze_lrs' and 'maze_hrs': business context → several SOP-Maze scenarios of each kind.

The paper takes its SOPs from production system prompts (L70-77) and has 13 LRS and 10 HRS
scenarios of different kinds (L341, Tables 4-5); we have the business context instead, so a model
designs each scenario as a structured tree (``prompts/sop_maze/{lrs,hrs}_scenario.j2``), one ask per
scenario, each given its own task type (the paper's LRS tasks: disposition, intent recognition,
extraction, emotion, scheduling, risk; its HRS calls: inbound lines, outbound follow-ups, bookings,
clarifications), all asked concurrently (:func:`sopforge.ask.fan_out`).
:func:`~sopforge.families.maze.verify.scenario_checks.check_scenario` proves what the paper obtained
by human refinement: the right shape, well-typed conditions, every leaf reachable as a unique answer,
stated exceptions that decide, no loop without exit. A failing answer is re-asked with the failures
quoted. Every limit a check enforces is stated in the prompt (``PROMPT_LIMITS``). Pure: no Prefect,
no store.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, ask_keeping_answers, failed_with_answers, fan_out
from sopforge.checks import CheckResult
from sopforge.context.model import BusinessContext
from sopforge.errors import ValidationFailed
from sopforge.families.maze.models.scenario import HRS_TASK_TYPES, LRS_TASK_TYPES, Scenario, ScenarioSet, parse_scenario
from sopforge.families.maze.verify.scenario_checks import PROMPT_LIMITS, check_scenario
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.settings import Settings

__all__ = ["HRS_STAGE", "HRS_TEMPLATE", "LRS_STAGE", "LRS_TEMPLATE", "ScenarioInputs", "check_set", "run_hrs",
           "run_lrs"]

LRS_STAGE, HRS_STAGE = "maze_lrs", "maze_hrs"
LRS_TEMPLATE, HRS_TEMPLATE = "sop_maze/lrs_scenario", "sop_maze/hrs_scenario"


class ScenarioInputs(BaseModel):
    """What a scenario stage needs: the shared business context and one task type per scenario to design."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context.")
    task_types: list[str] = Field(min_length=1, description="The task type of each scenario, in order.")


def _unique_names(scenarios: list[Scenario]) -> list[Scenario]:
    """Scenario names name export folders: a repeated one gets ``_2``, ``_3``, ... (in ask order)."""
    seen: dict[str, int] = {}
    renamed = []
    for s in scenarios:
        seen[s.name] = seen.get(s.name, 0) + 1
        renamed.append(s if seen[s.name] == 1 else s.model_copy(update={"name": f"{s.name}_{seen[s.name]}"}))
    return renamed


def check_set(scenario_set: ScenarioSet) -> list[CheckResult]:
    """Every scenario's checks, each named with its position (a reviewer's edit of the set runs these)."""
    found = []
    for index, s in enumerate(scenario_set.scenarios, start=1):
        for c in check_scenario(s):
            found.append(c.model_copy(update={"message": f"scenario {index} ({s.name}): {c.message}"}))
    return found


def _run(kind: Literal["LRS", "HRS"], inputs: ScenarioInputs, *, llm: LLMClient, settings: Settings, model: str,
         temperature: float, feedback: str | None, registry: PromptRegistry | None) -> StageResult[ScenarioSet]:
    registry = registry or default_registry(settings)
    stage, template, described = ((LRS_STAGE, LRS_TEMPLATE, LRS_TASK_TYPES) if kind == "LRS"
                                  else (HRS_STAGE, HRS_TEMPLATE, HRS_TASK_TYPES))
    limits = {k: str(v) for k, v in PROMPT_LIMITS[kind].items()}
    context_text = inputs.context.to_prompt_text()

    def ask(job: tuple[int, str]) -> tuple[StageResult, list[str]]:
        index, task_type = job
        rendered = registry.render(template, business_context=context_text, business_theme=inputs.context.theme,
                                   task_type=task_type, task_type_description=described[task_type], **limits)

        def parse_and_check(raw: str) -> tuple[Scenario, list[CheckResult]]:
            scenario = parse_scenario(raw, kind, task_type)
            return scenario, check_scenario(scenario)

        raw: list[str] = []
        try:
            result = ask_keeping_answers(raw, llm, rendered, parse_and_check=parse_and_check, stage=stage,
                                         call_key_prefix=f"{inputs.theme_slug}/{stage}/s{index}", settings=settings,
                                         model=model, temperature=temperature, feedback=feedback)
        except ValidationFailed as exc:
            reason = str(exc).removeprefix(f"{stage}: ")
            raise failed_with_answers(f"{stage}: scenario {index} ({task_type}): {reason}", exc.report, raw) from exc
        return result, raw

    done = fan_out(ask, list(enumerate(inputs.task_types, start=1)), "scenario")
    results = [r for r, _ in done]
    artifact = ScenarioSet(kind=kind, scenarios=_unique_names([r.artifact for r in results]))
    first = results[0]
    return StageResult[ScenarioSet](
        artifact=artifact, checks=[c for r in results for c in r.checks], template_id=first.template_id,
        template_hash=first.template_hash, prompt_hash=first.prompt_hash, model=model,
        attempts=sum(r.attempts for r in results), raw_texts=[t for _, raw in done for t in raw])


def run_lrs(inputs: ScenarioInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
            feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[ScenarioSet]:
    """Generate and check the wide (LRS) scenarios.

    Raises:
        ValidationFailed: a scenario's answers failed the checks within ``settings.max_attempts``.
    """
    return _run("LRS", inputs, llm=llm, settings=settings, model=model, temperature=temperature, feedback=feedback,
                registry=registry)


def run_hrs(inputs: ScenarioInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
            feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[ScenarioSet]:
    """Generate and check the deep (HRS) scenarios.

    Raises:
        ValidationFailed: a scenario's answers failed the checks within ``settings.max_attempts``.
    """
    return _run("HRS", inputs, llm=llm, settings=settings, model=model, temperature=temperature, feedback=feedback,
                registry=registry)
