"""The chain: which stage needs which upstream artifacts, and how to call its ``run()``.

Adding a stage means adding one ``StageDef`` here and one module in ``sopforge.stages``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from sopforge.schemas.api_graph import APIGraph
from sopforge.schemas.context import BusinessContext
from sopforge.schemas.dataset import Dataset
from sopforge.schemas.data_schema import DataSchema
from sopforge.schemas.sop import SOPDocument
from sopforge.stages import api_graph as api_graph_stage
from sopforge.stages import context as context_stage
from sopforge.stages import dataset as dataset_stage
from sopforge.stages import schema as schema_stage
from sopforge.stages import sop as sop_stage
from sopforge.theme import ThemeSpec


@dataclass(frozen=True)
class StageDef:
    """How one stage plugs into the chain.

    Attributes:
        name: stage name (also the Prefect task run name and the store's ``stage`` column).
        parents: upstream stages whose artifacts are this stage's inputs, in order.
        kind: artifact kind stored in ``artifacts.kind``.
        model: pydantic model of the artifact content.
        template_ids: templates whose source hashes are part of the cache key.
        run: the stage's pure ``run()`` function.
        make_inputs: builds the stage's input model from the theme and parent artifacts.
        params: stage parameters from the theme that change its output (part of the cache key).
    """

    name: str
    parents: tuple[str, ...]
    kind: str
    model: type[BaseModel]
    template_ids: tuple[str, ...]
    run: Callable[..., Any]
    make_inputs: Callable[[ThemeSpec, dict[str, BaseModel]], BaseModel]
    params: Callable[[ThemeSpec], dict[str, Any]] = lambda spec: {}


STAGE_DEFS: dict[str, StageDef] = {
    d.name: d
    for d in (
        StageDef(
            name="context", parents=(), kind="business_context", model=BusinessContext,
            template_ids=("teller/context",), run=context_stage.run,
            make_inputs=lambda spec, up: context_stage.ContextInputs(theme=spec.theme, theme_slug=spec.slug),
        ),
        StageDef(
            name="schema", parents=("context",), kind="data_schema", model=DataSchema,
            template_ids=("sop_bench/schema",), run=schema_stage.run,
            make_inputs=lambda spec, up: schema_stage.SchemaInputs(theme_slug=spec.slug, context=up["context"]),
        ),
        StageDef(
            name="sop", parents=("context", "schema"), kind="sop_document", model=SOPDocument,
            template_ids=("sop_bench/sop",), run=sop_stage.run,
            make_inputs=lambda spec, up: sop_stage.SOPInputs(theme_slug=spec.slug, context=up["context"], schema=up["schema"]),
        ),
        StageDef(
            name="api_graph", parents=("context", "schema", "sop"), kind="api_graph", model=APIGraph,
            template_ids=("teller/api_graph",), run=api_graph_stage.run,
            make_inputs=lambda spec, up: api_graph_stage.APIGraphInputs(
                theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"]),
        ),
        StageDef(
            name="dataset", parents=("context", "schema", "sop"), kind="dataset", model=Dataset,
            template_ids=("sop_bench/dataset",), run=dataset_stage.run,
            make_inputs=lambda spec, up: dataset_stage.DatasetInputs(
                theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"], n_rows=spec.rows),
            params=lambda spec: {"rows": spec.rows},
        ),
    )
}


def stage_def(name: str) -> StageDef:
    from sopforge.errors import UserError

    if name not in STAGE_DEFS:
        raise UserError(f"unknown stage {name!r}: choose one of {', '.join(STAGE_DEFS)}")
    return STAGE_DEFS[name]
