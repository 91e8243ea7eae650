"""Stage 'maze_package': export the set, its statistics beside the paper's, and gate the release.

Deterministic (no LLM). Writes ``exports/<run id>/maze/`` (:mod:`..export.files`) and checks,
before a reviewer (or ``--review auto``) releases it: every reference answer scores 1.0 with the
family's own scorer on the exported records (so scorer, schema and targets agree), every
scenario has instances, and the exported files read back as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.checks import check
from sopforge.families.maze.export.files import instance_record, write_export
from sopforge.families.maze.export.stats import PAPER, paper_comparison, set_statistics
from sopforge.families.maze.models.baselines import BaselineReport
from sopforge.families.maze.models.instances import InstanceSet
from sopforge.families.maze.models.package import MazePackage
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario
from sopforge.families.maze.verify.scorer import FORMAT_CREDIT, score_set

__all__ = ["STAGE", "PackageInputs", "run"]

STAGE = "maze_package"


class PackageInputs(BaseModel):
    """Everything the export needs and where to write it."""

    run_id: str = Field(description="Run being packaged (names the export folder).")
    theme: str = Field(description="Business theme of the run.")
    theme_slug: str = Field(description="Slug of the theme.")
    lrs: LRSScenario = Field(description="Accepted LRS scenario.")
    hrs: HRSScenario = Field(description="Accepted HRS scenario.")
    instances: InstanceSet = Field(description="Verified instances.")
    baselines: BaselineReport = Field(description="Shortcut baselines.")
    exports_dir: Path = Field(description="<home>/exports.")
    provenance: list[dict[str, Any]] = Field(default_factory=list, description="Parent artifacts (stage, id, version, hashes).")


def run(inputs: PackageInputs, **_: object) -> StageResult[MazePackage]:
    """Write the export and check it.

    Returns:
        The manifest with ``maze_package.reference_scores`` (blocking: every reference answer
        scores 1.0), ``maze_package.scenarios_filled`` and ``maze_package.export_reads_back``.
    """
    scenarios = [inputs.lrs, inputs.hrs]
    instances = inputs.instances.instances
    stats = set_statistics(scenarios, instances)
    by_name = {s.name: s for s in scenarios}
    records = [instance_record(by_name[i.scenario], i) for i in instances]
    reference = score_set({r["id"]: r["target"] for r in records}, records)
    baselines = [{"scenario": s.scenario, "kind": s.kind, "instances": s.instances,
                  **{r.name: {"mean": r.mean, "correct": r.correct} for r in s.results}}
                 for s in inputs.baselines.scenarios]
    metadata = {
        "benchmark": f"{inputs.theme_slug} / SOP-Maze", "run_id": inputs.run_id, "theme": inputs.theme,
        "statistics": stats, "paper": PAPER, "comparison": [list(row) for row in paper_comparison(stats)],
        "funnel": [r.model_dump() for r in inputs.instances.funnel],
        "drops": [d.model_dump() for d in inputs.instances.drops],
        "baselines": baselines, "format_credit": FORMAT_CREDIT,
        "scoring": {"correct": 1.0, "schema_valid_but_wrong": FORMAT_CREDIT, "invalid": 0.0,
                    "exclusion_keys": "no_required_eval_acc_keys of each record"},
        "seed": inputs.instances.seed, "provenance": inputs.provenance,
    }
    files = write_export(inputs.exports_dir / inputs.run_id, scenarios, instances, metadata)
    read_back = [json.loads(line) for line in Path(files["instances_jsonl"]).read_text(encoding="utf-8").splitlines()]
    manifest = MazePackage(
        export_dir=files["folder"], files=files, stats=stats, paper=[list(r) for r in paper_comparison(stats)],
        baselines=baselines, reference_scores=reference.per_scenario,
        instance_funnel=[r.model_dump() for r in inputs.instances.funnel])
    imperfect = {s: v for s, v in reference.per_scenario.items() if v != 100.0}
    empty = [s.name for s in scenarios if not any(i.scenario == s.name for i in instances)]
    checks = [
        check("maze_package.reference_scores", not imperfect, "reference answers that the scorer does not give 1.0 "
              f"(scenario -> score x 100): {imperfect}" if imperfect else
              "every reference answer scores 1.0 against its exported schema and exclusion keys",
              per_scenario=reference.per_scenario),
        check("maze_package.scenarios_filled", not empty, f"scenarios without instances: {empty}",
              ok=f"each of the {len(scenarios)} scenarios has instances"),
        check("maze_package.export_reads_back", read_back == json.loads(json.dumps(records)),
              "instances.jsonl does not read back as the records written",
              ok=f"instances.jsonl reads back as the {len(records)} records written"),
    ]
    return StageResult(artifact=manifest, checks=checks, template_id="-", template_hash="-", prompt_hash="-",
                       model="-", attempts=1, raw_texts=[])
