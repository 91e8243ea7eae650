"""Stage 'sop': BusinessContext + DataSchema → SOPDocument (SOP-Bench C.1 + TELLER P3).

Pure: no Prefect, no store. The flow wraps :func:`run` in a task and persists the result.
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field

from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.checks import CheckResult
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.verify.sop_checks import check_sop
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_until_valid

__all__ = ["STAGE", "TEMPLATE_ID", "SOPInputs", "run"]

STAGE = "sop"
TEMPLATE_ID = "sop_bench/sop"


class SOPInputs(BaseModel):
    """What the SOP stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (supplies title and task).")
    # Named data_schema because a field called 'schema' shadows BaseModel.schema (pydantic
    # warns); callers may still pass schema=… as the brief and the flows spell it.
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema the SOP must be grounded in.")


def run(inputs: SOPInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[SOPDocument]:
    """Write the SOP for the context's task, grounded in the data schema.

    Args:
        inputs: Theme slug, accepted business context and accepted data schema.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version, if regenerating.
        registry: Prompt registry; defaults to the project's ``prompts/``.

    Returns:
        The accepted SOPDocument with its checks and provenance.

    Raises:
        ValidationFailed: No answer passed the checks within ``settings.max_attempts``.
    """
    registry = registry or default_registry(settings)
    ctx, schema = inputs.context, inputs.data_schema
    rendered = registry.render(TEMPLATE_ID, sop_title=ctx.task.sop_title,
                               additional_context=ctx.additional_context(),
                               business_context=ctx.to_prompt_text(),
                               sample_schema=schema.to_prompt_text())

    def parse_and_check(raw: str) -> tuple[SOPDocument, list[CheckResult]]:
        sop = SOPDocument.parse(raw, title=ctx.task.sop_title)
        return sop, check_sop(sop, schema)

    return ask_until_valid(llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                           call_key_prefix=f"{inputs.theme_slug}/{STAGE}/main", settings=settings,
                           model=model, temperature=temperature, feedback=feedback)
