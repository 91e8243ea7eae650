"""The chain: which stage needs which upstream artifacts, and how to call its ``run()``.

Adding a stage means adding one ``StageDef`` here and one module in ``sopforge.stages``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from sopforge.export.tables import ArtifactRef
from sopforge.schemas.api_graph import APIGraph
from sopforge.schemas.context import BusinessContext
from sopforge.schemas.dataset import Dataset
from sopforge.schemas.ground_truth import GroundTruth
from sopforge.schemas.package import PackageManifest
from sopforge.schemas.tools import ToolsArtifact
from sopforge.schemas.data_schema import DataSchema
from sopforge.schemas.sop import SOPDocument
from sopforge.stages import api_graph as api_graph_stage
from sopforge.stages import context as context_stage
from sopforge.schemas.distractors import DistractorSet
from sopforge.schemas.manipulations import ManipulationSet
from sopforge.stages import dataset as dataset_stage
from sopforge.stages import distractors as distractors_stage
from sopforge.stages import manipulations as manipulations_stage
from sopforge.stages import package as package_stage
from sopforge.stages import reference as reference_stage
from sopforge.stages import tools as tools_stage
from sopforge.stages import schema as schema_stage
from sopforge.stages import sop as sop_stage
from sopforge.theme import ThemeSpec


@dataclass(frozen=True)
class InputContext:
    """What a stage's inputs may need beyond the theme and its parents' content."""

    run_id: str
    exports_dir: Path
    parent_records: dict[str, Any] = field(default_factory=dict)  # stage -> ArtifactRecord


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
        uses_llm: False for deterministic stages (package): no provider, no template, no model.
    """

    name: str
    parents: tuple[str, ...]
    kind: str
    model: type[BaseModel]
    template_ids: tuple[str, ...]
    run: Callable[..., Any]
    make_inputs: Callable[[ThemeSpec, dict[str, BaseModel], InputContext], BaseModel]
    params: Callable[[ThemeSpec], dict[str, Any]] = lambda spec: {}
    uses_llm: bool = True


STAGE_DEFS: dict[str, StageDef] = {
    d.name: d
    for d in (
        StageDef(
            name="context", parents=(), kind="business_context", model=BusinessContext,
            template_ids=("teller/context",), run=context_stage.run,
            make_inputs=lambda spec, up, ctx: context_stage.ContextInputs(theme=spec.theme, theme_slug=spec.slug),
        ),
        StageDef(
            name="schema", parents=("context",), kind="data_schema", model=DataSchema,
            template_ids=("sop_bench/schema",), run=schema_stage.run,
            make_inputs=lambda spec, up, ctx: schema_stage.SchemaInputs(theme_slug=spec.slug, context=up["context"]),
        ),
        StageDef(
            name="sop", parents=("context", "schema"), kind="sop_document", model=SOPDocument,
            template_ids=("sop_bench/sop",), run=sop_stage.run,
            make_inputs=lambda spec, up, ctx: sop_stage.SOPInputs(theme_slug=spec.slug, context=up["context"], schema=up["schema"]),
        ),
        StageDef(
            name="api_graph", parents=("context", "schema", "sop"), kind="api_graph", model=APIGraph,
            template_ids=("teller/api_graph",), run=api_graph_stage.run,
            make_inputs=lambda spec, up, ctx: api_graph_stage.APIGraphInputs(
                theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"]),
        ),
        StageDef(
            name="dataset", parents=("context", "schema", "sop"), kind="dataset", model=Dataset,
            template_ids=("sop_bench/dataset",), run=dataset_stage.run,
            make_inputs=lambda spec, up, ctx: dataset_stage.DatasetInputs(
                theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"], n_rows=spec.rows),
            params=lambda spec: {"rows": spec.rows},
        ),
        StageDef(
            name="tools", parents=("context", "schema", "sop", "api_graph", "dataset"), kind="tools",
            model=ToolsArtifact, template_ids=tools_stage.TEMPLATE_IDS, run=tools_stage.run,
            make_inputs=lambda spec, up, ctx: tools_stage.ToolsInputs(
                theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"],
                api_graph=up["api_graph"], dataset=up["dataset"]),
        ),
        StageDef(
            name="reference", parents=("schema", "sop", "api_graph", "tools", "dataset"), kind="ground_truth",
            model=GroundTruth, template_ids=(reference_stage.TEMPLATE_ID,), run=reference_stage.run,
            make_inputs=lambda spec, up, ctx: reference_stage.ReferenceInputs(
                theme_slug=spec.slug, schema=up["schema"], sop=up["sop"], api_graph=up["api_graph"],
                tools={"toolspecs": up["tools"].toolspecs.specs, "tool_code": up["tools"].code.source},
                rows=up["dataset"].rows),
        ),
        StageDef(
            name="distractors", parents=("context", "schema", "sop", "api_graph", "tools", "dataset", "reference"),
            kind="distractors", model=DistractorSet, template_ids=distractors_stage.TEMPLATE_IDS,
            run=distractors_stage.run,
            make_inputs=lambda spec, up, ctx: distractors_stage.DistractorsInputs(
                theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"],
                api_graph=up["api_graph"], tools=up["tools"], dataset=up["dataset"], ground_truth=up["reference"],
                n_tools=spec.hardening.distractor_tools, n_fields=spec.hardening.distractor_fields,
                seed=spec.hardening.seed),
            params=lambda spec: spec.hardening.model_dump(
                include={"distractor_tools", "distractor_fields", "seed"}),
        ),
        StageDef(
            name="manipulations", parents=("context", "schema", "sop", "tools", "reference"), kind="manipulations",
            model=ManipulationSet, template_ids=manipulations_stage.TEMPLATE_IDS, run=manipulations_stage.run,
            make_inputs=lambda spec, up, ctx: manipulations_stage.ManipulationsInputs(
                theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"], tools=up["tools"],
                ground_truth=up["reference"], hardening=spec.hardening),
            params=lambda spec: spec.hardening.model_dump(
                include={"sop_variants", "dialogues", "max_retries", "seed"}),
        ),
        StageDef(
            name="package",
            parents=("context", "sop", "api_graph", "tools", "reference", "distractors", "manipulations"),
            kind="package", model=PackageManifest, template_ids=(), run=package_stage.run, uses_llm=False,
            make_inputs=lambda spec, up, ctx: package_stage.PackageInputs(
                run_id=ctx.run_id, theme=spec.theme, theme_slug=spec.slug, context=up["context"], sop=up["sop"],
                api_graph=up["api_graph"], tools=up["tools"], ground_truth=up["reference"],
                distractors=up["distractors"], manipulations=up["manipulations"],
                exports_dir=ctx.exports_dir, provenance=provenance(ctx.parent_records)),
        ),
    )
}


def provenance(records: dict[str, Any]) -> list[ArtifactRef]:
    """The parents of the package as export provenance (stage, id, version, hashes, model)."""
    return [ArtifactRef(stage=stage, artifact_id=r.id, version=r.version, content_hash=r.content_hash,
                        template_id=r.template_id, template_hash=r.template_hash, model=r.model)
            for stage, r in records.items()]


def stage_def(name: str) -> StageDef:
    from sopforge.errors import UserError

    if name not in STAGE_DEFS:
        raise UserError(f"unknown stage {name!r}: choose one of {', '.join(STAGE_DEFS)}")
    return STAGE_DEFS[name]
