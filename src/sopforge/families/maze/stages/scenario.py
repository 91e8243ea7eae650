"""Stages 'maze_lrs' and 'maze_hrs': business context → one SOP-Maze scenario of each kind.

The paper takes its SOPs from production system prompts (L70-77); we have the business context
instead, so a model designs the scenario as a structured tree (``prompts/sop_maze/{lrs,hrs}_scenario.j2``)
and :func:`~sopforge.families.maze.verify.scenario_checks.check_scenario` proves what the paper
obtained by human refinement: the right shape, well-typed conditions, every leaf reachable as a
unique answer, no loop without exit. A failing answer is re-asked with the failures quoted.
Pure: no Prefect, no store.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, ask_until_valid
from sopforge.checks import CheckResult
from sopforge.context.model import BusinessContext
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, Scenario, parse_scenario
from sopforge.families.maze.verify.scenario_checks import check_scenario
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.settings import Settings

__all__ = ["HRS_STAGE", "HRS_TEMPLATE", "LRS_STAGE", "LRS_TEMPLATE", "ScenarioInputs", "run_hrs", "run_lrs"]

LRS_STAGE, HRS_STAGE = "maze_lrs", "maze_hrs"
LRS_TEMPLATE, HRS_TEMPLATE = "sop_maze/lrs_scenario", "sop_maze/hrs_scenario"


class ScenarioInputs(BaseModel):
    """What a scenario stage needs: the shared business context."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context.")


def _run(kind: Literal["LRS", "HRS"], inputs: ScenarioInputs, *, llm: LLMClient, settings: Settings, model: str,
         temperature: float, feedback: str | None, registry: PromptRegistry | None) -> StageResult:
    registry = registry or default_registry(settings)
    stage, template = (LRS_STAGE, LRS_TEMPLATE) if kind == "LRS" else (HRS_STAGE, HRS_TEMPLATE)
    rendered = registry.render(template, business_context=inputs.context.to_prompt_text(),
                               business_theme=inputs.context.theme)

    def parse_and_check(raw: str) -> tuple[Scenario, list[CheckResult]]:
        scenario = parse_scenario(raw, kind)
        return scenario, check_scenario(scenario)

    return ask_until_valid(llm, rendered, parse_and_check=parse_and_check, stage=stage,
                           call_key_prefix=f"{inputs.theme_slug}/{stage}/main", settings=settings, model=model,
                           temperature=temperature, feedback=feedback)


def run_lrs(inputs: ScenarioInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
            feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[LRSScenario]:
    """Generate and check the wide (LRS) scenario.

    Raises:
        ValidationFailed: no answer passed the checks within ``settings.max_attempts``.
    """
    return _run("LRS", inputs, llm=llm, settings=settings, model=model, temperature=temperature, feedback=feedback,
                registry=registry)


def run_hrs(inputs: ScenarioInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
            feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[HRSScenario]:
    """Generate and check the deep (HRS) scenario.

    Raises:
        ValidationFailed: no answer passed the checks within ``settings.max_attempts``.
    """
    return _run("HRS", inputs, llm=llm, settings=settings, model=model, temperature=temperature, feedback=feedback,
                registry=registry)
