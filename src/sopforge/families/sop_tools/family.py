"""The sop_tools family's declaration: its stage DAG, theme section, exports, scorers and summary.

SOP-Bench + TELLER-Bench + TOD-ProcBench around one tool-using SOP: schema → SOP → API graph ∥
dataset → tools → reference (computed ground truth) → distractors ∥ manipulations → package.
Every stage reads the shared business context directly or through its parents; each stage's
``parents`` are exactly the artifacts its ``make_inputs`` reads, so the flow's graph is the
real data dependency graph (api_graph and dataset, distractors and manipulations run side by side).
"""

from __future__ import annotations

from typing import Any

from sopforge.families.protocol import ExportSpec, Family, FamilySummary, OptionsSpec, StageSpec, SummaryTable, TableView
from sopforge.families.sop_tools import edits, render
from sopforge.families.sop_tools.evaluation import EVALUATION
from sopforge.families.sop_tools.export.tables import ArtifactRef
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset
from sopforge.families.sop_tools.models.distractors import DistractorSet
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, OracleReport
from sopforge.families.sop_tools.models.manipulations import ManipulationSet
from sopforge.families.sop_tools.models.package import PackageManifest
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.trajectory import AgentReport, Trajectory
from sopforge.families.sop_tools.models.tools import ToolsArtifact
from sopforge.families.sop_tools.options import OPTIONS_KEY, HardeningSpec, hardening
from sopforge.families.sop_tools.stages import api_graph as api_graph_stage
from sopforge.families.sop_tools.stages import dataset as dataset_stage
from sopforge.families.sop_tools.stages import distractors as distractors_stage
from sopforge.families.sop_tools.stages import manipulations as manipulations_stage
from sopforge.families.sop_tools.stages import package as package_stage
from sopforge.families.sop_tools.stages import reference as reference_stage
from sopforge.families.sop_tools.stages import schema as schema_stage
from sopforge.families.sop_tools.stages import sop as sop_stage
from sopforge.families.sop_tools.stages import tools as tools_stage
from sopforge.families.sop_tools.verify.gx_suite import gx_context
from sopforge.families.sop_tools.verify.oracle import oracle_check
from sopforge.families.sop_tools.verify.trajectory import score_agent, score_trajectory

__all__ = ["FAMILY"]


def provenance(records: dict[str, Any]) -> list[ArtifactRef]:
    """The parents of the package as export provenance (stage, id, version, hashes, model)."""
    return [ArtifactRef(stage=stage, artifact_id=r.id, version=r.version, content_hash=r.content_hash,
                        template_id=r.template_id, template_hash=r.template_hash, model=r.model)
            for stage, r in records.items()]


STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        name="schema", parents=("context",), kind="data_schema", model=DataSchema,
        template_ids=(schema_stage.TEMPLATE_ID,), run=schema_stage.run,
        make_inputs=lambda spec, up, ctx: schema_stage.SchemaInputs(theme_slug=spec.slug, context=up["context"]),
        render=render.schema_markdown, edit=edits.SCHEMA_EDIT,
        table=TableView(render.schema_rows, "data schema fields", in_terminal=True),
    ),
    StageSpec(
        name="sop", parents=("context", "schema"), kind="sop_document", model=SOPDocument,
        template_ids=(sop_stage.TEMPLATE_ID,), run=sop_stage.run, gate=True,
        make_inputs=lambda spec, up, ctx: sop_stage.SOPInputs(theme_slug=spec.slug, context=up["context"], schema=up["schema"]),
        render=render.sop_markdown, edit=edits.SOP_EDIT,
    ),
    StageSpec(
        name="api_graph", parents=("context", "schema", "sop"), kind="api_graph", model=APIGraph,
        template_ids=(api_graph_stage.TEMPLATE_ID,), run=api_graph_stage.run, gate=True,
        make_inputs=lambda spec, up, ctx: api_graph_stage.APIGraphInputs(
            theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"]),
        render=render.api_graph_markdown, edit=edits.API_GRAPH_EDIT,
    ),
    StageSpec(
        name="dataset", parents=("context", "schema", "sop"), kind="dataset", model=Dataset,
        template_ids=(dataset_stage.TEMPLATE_ID,), run=dataset_stage.run,
        make_inputs=lambda spec, up, ctx: dataset_stage.DatasetInputs(
            theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"], n_rows=spec.rows),
        params=lambda spec: {"rows": spec.rows}, stores_rows=True, warm_up=gx_context,
        expected_calls=lambda spec: -(-spec.rows // dataset_stage.DatasetInputs.model_fields["batch_size"].default),
        render=render.dataset_markdown, table=TableView(render.dataset_sample, "first dataset rows"),
    ),
    StageSpec(
        name="tools", parents=("context", "schema", "sop", "api_graph", "dataset"), kind="tools",
        model=ToolsArtifact, template_ids=tools_stage.TEMPLATE_IDS, run=tools_stage.run, gate=True,
        make_inputs=lambda spec, up, ctx: tools_stage.ToolsInputs(
            theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"],
            api_graph=up["api_graph"], dataset=up["dataset"]),
        render=render.tools_markdown, edit=edits.TOOLS_EDIT,
    ),
    StageSpec(
        name="reference", parents=("schema", "sop", "api_graph", "tools", "dataset"), kind="ground_truth",
        model=GroundTruth, template_ids=(reference_stage.TEMPLATE_ID,), run=reference_stage.run,
        make_inputs=lambda spec, up, ctx: reference_stage.ReferenceInputs(
            theme_slug=spec.slug, schema=up["schema"], sop=up["sop"], api_graph=up["api_graph"],
            tools={"toolspecs": up["tools"].toolspecs.specs, "tool_code": up["tools"].code.source},
            rows=up["dataset"].rows, gates=hardening(spec).gates()),
        params=lambda spec: hardening(spec).gates(),
        render=render.reference_markdown,
    ),
    StageSpec(
        name="distractors", parents=("context", "schema", "sop", "api_graph", "tools", "dataset", "reference"),
        kind="distractors", model=DistractorSet, template_ids=distractors_stage.TEMPLATE_IDS,
        run=distractors_stage.run,
        make_inputs=lambda spec, up, ctx: distractors_stage.DistractorsInputs(
            theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"],
            api_graph=up["api_graph"], tools=up["tools"], dataset=up["dataset"], ground_truth=up["reference"],
            n_tools=hardening(spec).distractor_tools, n_fields=hardening(spec).distractor_fields,
            seed=hardening(spec).seed),
        params=lambda spec: hardening(spec).model_dump(include={"distractor_tools", "distractor_fields", "seed"}),
        expected_calls=lambda spec: bool(hardening(spec).distractor_tools) + bool(hardening(spec).distractor_fields),
        render=render.distractors_markdown,
    ),
    StageSpec(
        name="manipulations", parents=("context", "schema", "sop", "tools", "reference"), kind="manipulations",
        model=ManipulationSet, template_ids=manipulations_stage.TEMPLATE_IDS, run=manipulations_stage.run,
        make_inputs=lambda spec, up, ctx: manipulations_stage.ManipulationsInputs(
            theme_slug=spec.slug, context=up["context"], schema=up["schema"], sop=up["sop"], tools=up["tools"],
            ground_truth=up["reference"], hardening=hardening(spec)),
        params=lambda spec: hardening(spec).model_dump(include={"sop_variants", "dialogues", "max_retries", "seed"}),
        # a generator and a judge per variant type; the instruction document; per dialogue, itself
        # and a rewrite and a verification per operator
        expected_calls=lambda spec: 2 * len(hardening(spec).sop_variants) + 1 + 7 * hardening(spec).dialogues,
        render=render.manipulations_markdown,
    ),
    StageSpec(
        name="package",
        parents=("context", "schema", "sop", "api_graph", "tools", "reference", "distractors", "manipulations"),
        kind="package", model=PackageManifest, template_ids=(), run=package_stage.run, uses_llm=False, gate=True,
        per_run=True,
        make_inputs=lambda spec, up, ctx: package_stage.PackageInputs(
            run_id=ctx.run_id, theme=spec.theme, theme_slug=spec.slug, context=up["context"], schema=up["schema"],
            sop=up["sop"], api_graph=up["api_graph"], tools=up["tools"], ground_truth=up["reference"],
            distractors=up["distractors"], manipulations=up["manipulations"],
            exports_dir=ctx.exports_dir, provenance=provenance(ctx.parent_records), gates=hardening(spec).gates()),
        params=lambda spec: hardening(spec).gates(),
        render=render.package_markdown,
    ),
)


def _figure(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def summarize(contents: dict[str, dict[str, Any]]) -> FamilySummary:
    """Decision and path coverage, the baselines' scores and the export with its oracle line."""
    summary = FamilySummary()
    reference = contents.get("reference") or {}
    coverage = reference.get("coverage")
    if coverage:
        summary.facts["coverage"] = coverage
        summary.tables.append(SummaryTable(
            "decision coverage (tasks per outcome, computed by executing the reference procedure)",
            ("decision field", "outcome", "tasks"),
            [(field, value, str(n)) for field, counts in coverage.items() for value, n in counts.items()]))
    paths = reference.get("paths") or []
    gates = reference.get("gates") or {}
    if paths:
        summary.facts.update(distinct_paths=len(paths), write_tools=reference.get("write_tools", []))
        summary.tables.append(SummaryTable(
            f"path coverage ({len(paths)} distinct tool paths, at least {int(gates.get('min_distinct_paths', 0))} "
            "required; every API on some path)", ("path", "tasks", "writes", "outcomes"),
            [(" > ".join(p["path"]), str(p["tasks"]), ", ".join(p["writes"]) or "-", "; ".join(p["outcomes"]))
             for p in paths]))
    package = contents.get("package") or {}
    baselines = package.get("baselines") or reference.get("baselines") or []
    if baselines:
        bound = gates.get("max_baseline_state_success", package.get("gates", {}).get("max_baseline_state_success"))
        summary.facts["baselines"] = {b["agent"]: {"outputs": b["outputs"], "final_state": b["final_state"],
                                                   "order": b["order"]} for b in baselines}
        summary.tables.append(SummaryTable(
            "baseline agents replayed through the tools (final-state success must stay at or below "
            f"{_figure(bound)})", ("agent", "outputs", "final state", "order", "success"),
            [(b["agent"], _figure(b["outputs"]), _figure(b["final_state"]), _figure(b["order"]),
              _figure(b["success"])) for b in baselines]))
    if paths or reference.get("write_tools"):
        summary.lines.append(f"paths: {len(paths)} distinct; write tools: "
                             f"{', '.join(reference.get('write_tools', [])) or 'none'}")
    if package:
        oracle = package.get("oracle", {}).get("summary")
        summary.export = package.get("sopbench_folder")
        summary.facts.update(export=summary.export, oracle=oracle)
        summary.lines.append(f"exported: {summary.export}  ({oracle})")
    return summary


FAMILY = Family(
    name="sop_tools",
    title="SOP-following agents with tools: SOP-Bench folders, TELLER graphs and ground truth, TOD-ProcBench items",
    sources=("000_34c0c37168ded8b2.txt (SOP-Bench)", "002_5fda24f8249371b8.txt (TELLER-Bench)",
             "003_07823dfdc4c2eec8.txt (TOD-ProcBench)"),
    stages=STAGES,
    options=OptionsSpec(key=OPTIONS_KEY, model=HardeningSpec),
    exports=(
        ExportSpec("<slug>/", "the SOP-Bench folder: sop.txt, toolspecs.json, tools.py, test_set_with(out)_outputs.csv, "
                              "metadata.json, reference_procedure.py, tasks.jsonl, registry/, sop_variants/"),
        ExportSpec("tasks.jsonl, tasks.parquet", "one task per line with inputs, expected outputs, calls, final "
                                                 "state and order constraints, provenance"),
        ExportSpec("metadata.json", "counts as SOP-Bench Table 3 / TELLER Table 4, coverage, paths, baselines, "
                                    "oracle, hardening"),
        ExportSpec("tod_procbench.jsonl", "the instruction document (f1/f2/f3) and the balanced compliance set"),
    ),
    scorers={"oracle": oracle_check, "trajectory": score_trajectory, "agent": score_agent},
    summarize=summarize,
    json_schemas={"oracle_report": OracleReport, "agent_report": AgentReport, "trajectory": Trajectory},
    evaluation=EVALUATION,
)
