"""Stage 'api_graph': BusinessContext + DataSchema + SOPDocument → APIGraph (TELLER P4).

Pure: no Prefect, no store. The flow wraps :func:`run` in a task and persists the result.
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field

from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.verify.api_graph_checks import check_graph
from sopforge.checks import CheckResult
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_until_valid

__all__ = ["STAGE", "TEMPLATE_ID", "APIGraphInputs", "run"]

STAGE = "api_graph"
TEMPLATE_ID = "teller/api_graph"


class APIGraphInputs(BaseModel):
    """What the API-graph stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (supplies the SOP title).")
    # Named data_schema for the same reason as SOPInputs (a field 'schema' shadows BaseModel.schema).
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema: every API parameter is one of its fields.")
    sop: SOPDocument = Field(description="Accepted SOP whose steps the APIs implement.")


def run(inputs: APIGraphInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[APIGraph]:
    """Derive the API dependency graph of the SOP, grounded in the schema and the SOP steps.

    Args:
        inputs: Theme slug, accepted business context, data schema and SOP.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version, if regenerating.
        registry: Prompt registry; defaults to the project's ``prompts/``.

    Returns:
        The accepted APIGraph with its checks and provenance.

    Raises:
        ValidationFailed: No answer passed the checks within ``settings.max_attempts``.
    """
    registry = registry or default_registry(settings)
    ctx, schema, sop = inputs.context, inputs.data_schema, inputs.sop
    rendered = registry.render(TEMPLATE_ID, sop_title=ctx.task.sop_title,
                               business_context=ctx.to_prompt_text(),
                               sample_schema=schema.to_prompt_text(),
                               sop_file_contents=sop.to_prompt_text())

    def parse_and_check(raw: str) -> tuple[APIGraph, list[CheckResult]]:
        graph = APIGraph.parse(raw)
        return graph, check_graph(graph, schema, sop)

    return ask_until_valid(llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                           call_key_prefix=f"{inputs.theme_slug}/{STAGE}/main", settings=settings,
                           model=model, temperature=temperature, feedback=feedback)
