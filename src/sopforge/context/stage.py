"""Stage 'context': business theme → BusinessContext (TELLER P1 + SOP-Bench business task).

Pure: no Prefect, no store. The flow wraps :func:`run` in a task and persists the result.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.checks import CheckResult
from sopforge.context.checks import check_context
from sopforge.context.model import BusinessContext
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_until_valid

__all__ = ["STAGE", "TEMPLATE_ID", "ContextInputs", "run"]

STAGE = "context"
TEMPLATE_ID = "teller/context"


class ContextInputs(BaseModel):
    """What the context stage needs."""

    theme: str = Field(description="Business theme, e.g. 'pharmacy prescription refills'.")
    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")


def run(inputs: ContextInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[BusinessContext]:
    """Generate the business context and the task for one theme.

    Args:
        inputs: Theme and its slug.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version, if regenerating.
        registry: Prompt registry; defaults to the project's ``prompts/``.

    Returns:
        The accepted BusinessContext with its checks and provenance.

    Raises:
        ValidationFailed: No answer passed the checks within ``settings.max_attempts``.
    """
    registry = registry or default_registry(settings)
    rendered = registry.render(TEMPLATE_ID, business_theme=inputs.theme)

    def parse_and_check(raw: str) -> tuple[BusinessContext, list[CheckResult]]:
        ctx = BusinessContext.parse(raw, theme=inputs.theme)
        return ctx, check_context(ctx)

    return ask_until_valid(llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                           call_key_prefix=f"{inputs.theme_slug}/{STAGE}/main", settings=settings,
                           model=model, temperature=temperature, feedback=feedback)
