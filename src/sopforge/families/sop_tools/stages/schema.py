"""Stage 'schema': BusinessContext → DataSchema (SOP-Bench C.2 + TELLER P2).

Pure: no Prefect, no store. The flow wraps :func:`run` in a task and persists the result.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.checks import CheckResult
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.verify.schema_checks import check_schema
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_until_valid

__all__ = ["STAGE", "TEMPLATE_ID", "SchemaInputs", "run"]

STAGE = "schema"
TEMPLATE_ID = "sop_bench/schema"


class SchemaInputs(BaseModel):
    """What the schema stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (supplies the task).")


def run(inputs: SchemaInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[DataSchema]:
    """Generate the data schema (existing and to-be-obtained fields) for the context's task.

    Args:
        inputs: Theme slug and the accepted business context.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version, if regenerating.
        registry: Prompt registry; defaults to the project's ``prompts/``.

    Returns:
        The accepted DataSchema with its checks and provenance.

    Raises:
        ValidationFailed: No answer passed the checks within ``settings.max_attempts``.
    """
    registry = registry or default_registry(settings)
    ctx = inputs.context
    rendered = registry.render(TEMPLATE_ID, sop_title=ctx.task.sop_title,
                               additional_context=ctx.additional_context(),
                               business_context=ctx.to_prompt_text())

    def parse_and_check(raw: str) -> tuple[DataSchema, list[CheckResult]]:
        schema = DataSchema.parse(raw)
        return schema, check_schema(schema)

    return ask_until_valid(llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                           call_key_prefix=f"{inputs.theme_slug}/{STAGE}/main", settings=settings,
                           model=model, temperature=temperature, feedback=feedback)
