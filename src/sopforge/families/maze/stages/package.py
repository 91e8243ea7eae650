"""Stage 'maze_package': export the set, its statistics beside the paper's, and gate the release.

Deterministic (no LLM). Writes ``exports/<run id>/maze/`` (:mod:`..export.files`), then checks, before
a reviewer (or ``--review auto``) releases it:

* ``maze_package.release``: every exported target, subtask by subtask, and every misreading,
  re-executed from the exported tree and the reader's facts by an independent interpreter
  (:mod:`..verify.release`); a corrupted target fails by name;
* ``maze_package.reference_scores``: every exported target scores 1.0 with the family's scorer
  against its exported schema and exclusion keys;
* ``maze_package.noise_changes_answers``: for at least half of the noise-tagged instances, taking a
  noise decoy for the truth gives another answer (the noise matters);
* ``maze_package.baselines_low``: every shortcut baseline stays below ``maze.max_baseline`` per kind;
* ``maze_package.scenarios_filled`` and ``maze_package.export_reads_back``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.checks import check
from sopforge.families.maze.export.files import instance_record, subtask_records, write_export
from sopforge.families.maze.export.stats import PAPER, noise_table, paper_comparison, set_statistics
from sopforge.families.maze.models.baselines import BaselineReport
from sopforge.families.maze.models.instances import InstanceSet
from sopforge.families.maze.models.package import MazePackage
from sopforge.families.maze.models.scenario import ScenarioSet
from sopforge.families.maze.verify.release import release_problems
from sopforge.families.maze.verify.scorer import FORMAT_CREDIT, score_set

__all__ = ["STAGE", "PackageInputs", "run"]

STAGE = "maze_package"


class PackageInputs(BaseModel):
    """Everything the export needs and where to write it."""

    run_id: str = Field(description="Run being packaged (names the export folder).")
    theme: str = Field(description="Business theme of the run.")
    theme_slug: str = Field(description="Slug of the theme.")
    lrs: ScenarioSet = Field(description="Accepted LRS scenarios.")
    hrs: ScenarioSet = Field(description="Accepted HRS scenarios.")
    instances: InstanceSet = Field(description="Verified instances.")
    baselines: BaselineReport = Field(description="Shortcut baselines.")
    exports_dir: Path = Field(description="<home>/exports.")
    provenance: list[dict[str, Any]] = Field(default_factory=list, description="Parent artifacts (stage, id, version, hashes).")


def _baseline_rows(report: BaselineReport) -> list[dict[str, Any]]:
    return [{"scenario": s.scenario, "kind": s.kind, "instances": s.instances, "subtasks": s.subtasks,
             **{r.name: {"mean": r.mean, "correct": r.correct, "subtask_mean": r.subtask_mean} for r in s.results}}
            for s in report.scenarios]


def run(inputs: PackageInputs, **_: object) -> StageResult[MazePackage]:
    """Write the export and check it (see the module docstring for every check)."""
    scenarios = inputs.lrs.scenarios + inputs.hrs.scenarios
    instances = inputs.instances.instances
    stats = set_statistics(scenarios, instances)
    by_name = {s.name: s for s in scenarios}
    records = [instance_record(by_name[i.scenario], i) for i in instances]
    subtasks = [r for i in instances for r in subtask_records(by_name[i.scenario], i)]
    reference = score_set({r["id"]: r["target"] for r in subtasks}, subtasks)
    noise = noise_table(instances)
    baselines = _baseline_rows(inputs.baselines)
    metadata = {
        "benchmark": f"{inputs.theme_slug} / SOP-Maze", "run_id": inputs.run_id, "theme": inputs.theme,
        "statistics": stats, "paper": PAPER, "comparison": [list(row) for row in paper_comparison(stats)],
        "noise_table": noise,
        "funnel": [r.model_dump() for r in inputs.instances.funnel],
        "drops": [d.model_dump() for d in inputs.instances.drops],
        "baselines": baselines, "baselines_pooled": inputs.baselines.pooled,
        "max_baseline": inputs.baselines.max_baseline, "format_credit": FORMAT_CREDIT,
        "scoring": {"correct": 1.0, "schema_valid_but_wrong": FORMAT_CREDIT, "invalid": 0.0,
                    "exclusion_keys": "no_required_eval_acc_keys of each record",
                    "unit": "each subtask (input-target pair); the instance score is its last subtask's"},
        "seed": inputs.instances.seed, "provenance": inputs.provenance,
    }
    files = write_export(inputs.exports_dir / inputs.run_id, scenarios, instances, metadata)
    folder = Path(files["folder"])
    read_back = [json.loads(line) for line in Path(files["subtasks_jsonl"]).read_text(encoding="utf-8").splitlines()]
    problems = release_problems(folder)
    manifest = MazePackage(
        export_dir=files["folder"], files=files, stats=stats, paper=[list(r) for r in paper_comparison(stats)],
        noise_table=noise, baselines=baselines, baselines_pooled=inputs.baselines.pooled,
        max_baseline=inputs.baselines.max_baseline, reference_scores=reference.per_scenario,
        instance_funnel=[r.model_dump() for r in inputs.instances.funnel])
    imperfect = {s: v for s, v in reference.per_scenario.items() if v != 100.0}
    empty = [s.name for s in scenarios if not any(i.scenario == s.name for i in instances)]
    noisy = noise[-1]
    high = inputs.baselines.too_high()
    checks = [
        check("maze_package.release", not problems, f"{len(problems)} exported answers disagree with the tree "
              "re-executed on the reader's facts: " + "; ".join(problems[:6]),
              ok=f"all {len(subtasks)} subtask targets and every misreading re-executed from the exported tree and "
                 "the reader's facts by an independent interpreter", problems=problems[:20]),
        check("maze_package.reference_scores", not imperfect, "reference answers that the scorer does not give 1.0 "
              f"(scenario -> score x 100): {imperfect}",
              ok="every subtask target scores 1.0 against its exported schema and exclusion keys",
              per_scenario=reference.per_scenario),
        check("maze_package.noise_changes_answers", 2 * noisy["changes_answer"] >= noisy["tagged"],
              f"only {noisy['changes_answer']} of {noisy['tagged']} noise-tagged instances have noise that changes the "
              "answer; raise the shares of intent_reversal and calculation in maze.noise, or change maze.seed, and "
              "generate again (the scenarios are reused)",
              ok=f"{noisy['changes_answer']} of {noisy['tagged']} noise-tagged instances have noise that changes the "
                 "answer when taken for the truth", table=noise),
        check("maze_package.baselines_low", not high, f"shortcut baselines at or above {inputs.baselines.max_baseline}: "
              f"{', '.join(high)}; change maze.seed or raise maze.lrs_instances / maze.hrs_instances and generate "
              "again (the scenarios are reused), or approve at this gate to release anyway",
              ok=f"every shortcut baseline stays below {inputs.baselines.max_baseline} per kind",
              pooled=inputs.baselines.pooled),
        check("maze_package.scenarios_filled", not empty, f"scenarios without instances: {empty}",
              ok=f"each of the {len(scenarios)} scenarios has instances"),
        check("maze_package.export_reads_back", read_back == json.loads(json.dumps(subtasks)),
              "subtasks.jsonl does not read back as the records written",
              ok=f"subtasks.jsonl reads back as the {len(subtasks)} records written ({len(records)} instances)"),
    ]
    return StageResult(artifact=manifest, checks=checks, template_id="-", template_hash="-", prompt_hash="-",
                       model="-", attempts=1, raw_texts=[])
