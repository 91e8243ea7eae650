"""The maze family's declaration: SOP-Maze's wide and deep SOP scenarios with noisy, verified instances.

context → maze_lrs ∥ maze_hrs (each gated: a reviewer sees the SOP trees) → maze_instances →
maze_baselines → maze_package (gated: the release). The two scenario stages read only the shared
business context, so they run side by side; each designs several scenarios of its kind.
"""

from __future__ import annotations

from typing import Any

from sopforge.families.protocol import EditSpec, ExportSpec, Family, FamilySummary, OptionsSpec, StageSpec, SummaryTable, TableView
from sopforge.families.maze import render
from sopforge.families.maze.evaluation import EVALUATION
from sopforge.families.maze.models.baselines import BaselineReport
from sopforge.families.maze.models.instances import InstanceSet
from sopforge.families.maze.models.package import MazePackage
from sopforge.families.maze.models.scenario import ScenarioSet
from sopforge.families.maze.options import OPTIONS_KEY, MazeSpec, maze_options, task_types
from sopforge.families.maze.stages import baselines as baselines_stage
from sopforge.families.maze.stages import instances as instances_stage
from sopforge.families.maze.stages import package as package_stage
from sopforge.families.maze.stages import scenario as scenario_stage
from sopforge.families.maze.models.baselines import BASELINES
from sopforge.families.maze.verify.scorer import FORMAT_CREDIT, score_answer, score_set

__all__ = ["FAMILY"]

SCENARIO_EDIT = EditSpec(check=lambda artifact, parents, settings: scenario_stage.check_set(artifact))


def _provenance(records: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"stage": stage, "artifact_id": r.id, "version": r.version, "content_hash": r.content_hash,
             "template_id": r.template_id, "template_hash": r.template_hash, "model": r.model}
            for stage, r in records.items()]


def _instances(spec: Any) -> int:
    opts = maze_options(spec)
    return opts.lrs_scenarios * opts.lrs_instances + opts.hrs_scenarios * opts.hrs_instances


STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        name=scenario_stage.LRS_STAGE, parents=("context",), kind="maze_lrs_scenarios", model=ScenarioSet,
        template_ids=(scenario_stage.LRS_TEMPLATE,), run=scenario_stage.run_lrs, gate=True,
        make_inputs=lambda spec, up, ctx: scenario_stage.ScenarioInputs(
            theme_slug=spec.slug, context=up["context"], task_types=task_types(maze_options(spec), "LRS")),
        params=lambda spec: {"task_types": task_types(maze_options(spec), "LRS")},
        expected_calls=lambda spec: maze_options(spec).lrs_scenarios,
        render=render.scenario_set_markdown, edit=SCENARIO_EDIT,
    ),
    StageSpec(
        name=scenario_stage.HRS_STAGE, parents=("context",), kind="maze_hrs_scenarios", model=ScenarioSet,
        template_ids=(scenario_stage.HRS_TEMPLATE,), run=scenario_stage.run_hrs, gate=True,
        make_inputs=lambda spec, up, ctx: scenario_stage.ScenarioInputs(
            theme_slug=spec.slug, context=up["context"], task_types=task_types(maze_options(spec), "HRS")),
        params=lambda spec: {"task_types": task_types(maze_options(spec), "HRS")},
        expected_calls=lambda spec: maze_options(spec).hrs_scenarios,
        render=render.scenario_set_markdown, edit=SCENARIO_EDIT,
    ),
    StageSpec(
        name=instances_stage.STAGE, parents=("context", scenario_stage.LRS_STAGE, scenario_stage.HRS_STAGE),
        kind="maze_instances", model=InstanceSet, template_ids=instances_stage.TEMPLATE_IDS, run=instances_stage.run,
        make_inputs=lambda spec, up, ctx: instances_stage.InstancesInputs(
            theme_slug=spec.slug, context=up["context"], lrs=up[scenario_stage.LRS_STAGE],
            hrs=up[scenario_stage.HRS_STAGE], options=maze_options(spec)),
        params=lambda spec: maze_options(spec).model_dump(mode="json", exclude={"max_baseline"}),
        expected_calls=lambda spec: 2 * _instances(spec),
        render=render.instances_markdown, table=TableView(render.instance_rows, "SOP-Maze instances", in_terminal=True),
    ),
    StageSpec(
        name=baselines_stage.STAGE,
        parents=(scenario_stage.LRS_STAGE, scenario_stage.HRS_STAGE, instances_stage.STAGE),
        kind="maze_baselines", model=BaselineReport, template_ids=(baselines_stage.TEMPLATE_ID,), run=baselines_stage.run,
        make_inputs=lambda spec, up, ctx: baselines_stage.BaselinesInputs(
            theme_slug=spec.slug, lrs=up[scenario_stage.LRS_STAGE], hrs=up[scenario_stage.HRS_STAGE],
            instances=up[instances_stage.STAGE], max_baseline=maze_options(spec).max_baseline),
        params=lambda spec: {"max_baseline": maze_options(spec).max_baseline},
        expected_calls=lambda spec: 2 * _instances(spec),
        render=render.baselines_markdown,
    ),
    StageSpec(
        name=package_stage.STAGE,
        parents=(scenario_stage.LRS_STAGE, scenario_stage.HRS_STAGE, instances_stage.STAGE, baselines_stage.STAGE),
        kind="maze_package", model=MazePackage, template_ids=(), run=package_stage.run, uses_llm=False, gate=True,
        per_run=True,
        make_inputs=lambda spec, up, ctx: package_stage.PackageInputs(
            run_id=ctx.run_id, theme=spec.theme, theme_slug=spec.slug, lrs=up[scenario_stage.LRS_STAGE],
            hrs=up[scenario_stage.HRS_STAGE], instances=up[instances_stage.STAGE],
            baselines=up[baselines_stage.STAGE], exports_dir=ctx.exports_dir,
            provenance=_provenance(ctx.parent_records)),
        render=render.package_markdown,
    ),
)


def summarize(contents: dict[str, dict[str, Any]]) -> FamilySummary:
    """The set beside the paper, the noise table, the shortcut baselines and where the export is."""
    summary = FamilySummary()
    package = contents.get(package_stage.STAGE)
    if not package:
        return summary
    summary.tables.append(SummaryTable("SOP-Maze set beside the paper", ("figure", "this set", "SOP-Maze paper"),
                                       [tuple(row) for row in package["paper"]]))
    summary.tables.append(SummaryTable(
        "SOP-Maze noise: instances tagged, and those whose answer changes when the decoy is taken for the truth",
        ("phenomenon", "tagged", "answer changes"),
        [(r["phenomenon"], str(r["tagged"]), str(r["changes_answer"])) for r in package.get("noise_table", [])]))
    summary.tables.append(SummaryTable(
        f"SOP-Maze shortcut baselines (mean score on final answers; format-only credit {FORMAT_CREDIT:.2f}, "
        f"gate < {package.get('max_baseline', 0.35):.2f})",
        ("scenario", "kind", "instances", *BASELINES),
        [(b["scenario"], b["kind"], str(b["instances"]),
          *(f"{b[n]['mean']:.2f} ({b[n]['correct']} exact)" for n in BASELINES)) for b in package["baselines"]]
        + [(f"all {kind}", kind, "-", *(f"{means[n]:.2f}" for n in BASELINES))
           for kind, means in package.get("baselines_pooled", {}).items()]))
    summary.export = package["export_dir"]
    summary.facts.update(maze_export=package["export_dir"], maze_stats=package["stats"],
                         maze_baselines=package["baselines"], maze_noise=package.get("noise_table", []))
    summary.lines.append(f"SOP-Maze exported: {package['export_dir']}  ({package['stats']['subtasks']} subtasks of "
                         f"{package['stats']['instances']} instances, every target re-executed at the release gate)")
    return summary


FAMILY = Family(
    name="maze",
    title="SOP-Maze: wide (LRS) and deep (HRS) SOP trees, noisy user inputs, answers computed and verified",
    sources=("001_6dd03d47fea0db71.txt (SOP-Maze)",),
    stages=STAGES,
    options=OptionsSpec(key=OPTIONS_KEY, model=MazeSpec),
    exports=(
        ExportSpec("maze/<scenario>/", "prompt_template.txt (the four-part prompt), schema.json, exclusion_keys.json, "
                                       "scenario.json, instances.jsonl, subtasks.jsonl, raw_data.json (the authors' "
                                       "record layout, one record per subtask)"),
        ExportSpec("maze/instances.jsonl, maze/instances.parquet", "every dialogue: input, user input, final target, "
                                                                   "schema, facts, reading, path, noise with misreadings"),
        ExportSpec("maze/subtasks.jsonl, maze/subtasks.parquet", "every input-target pair along the dialogues (the "
                                                                 "evaluation unit): input, target, facts and reading"),
        ExportSpec("maze/metadata.json", "statistics beside the paper's, noise table, funnel, drops, shortcut baselines"),
    ),
    scorers={"answer": score_answer, "set": score_set},
    summarize=summarize,
    evaluation=EVALUATION,
)
