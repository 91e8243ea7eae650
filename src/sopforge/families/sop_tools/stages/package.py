"""Stage 'package': export the domain and gate the release on the oracle agent.

Deterministic (no LLM). Writes, under ``<exports>/<run_id>/``:
- ``<slug>/``: the SOP-Bench folder (``../shared/research/sopbench_format.md``), re-audited by the exporter,
  plus ``reference_procedure.py`` and ``tasks.jsonl`` for the oracle and ``sopforge audit``;
- ``tasks.jsonl`` / ``tasks.parquet``: tasks with full provenance;
- ``metadata.json``: the counts SOP-Bench Table 3 and TELLER Table 4 report;
- the hardening exports (:mod:`sopforge.families.sop_tools.export.hardening`): registry variants, SOP variants and
  ``tod_procbench.jsonl``.
The folder is the harder benchmark: its ``toolspecs.json`` and ``tools.py`` carry the kept
distractor tools, and kept distractor fields are input columns the agent is shown. The oracle
agent replays every task's expected calls through that folder; anything below 1.00 on outputs,
final state or order is a blocking check that names the failing tasks. The baseline agents
(call every tool, read-only, majority label) are replayed through the same folder: one that
reaches the expected final state on more than ``max_baseline_state_success`` of the tasks, or a
domain with fewer than ``min_distinct_paths`` distinct tool paths, fails the release gate.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from sopforge.families.sop_tools.export.hardening import (
    TOD_JSONL, hardening_metadata, write_registry_variants, write_sop_variants, write_tod_jsonl,
)
from sopforge.families.sop_tools.export.metadata import benchmark_stats
from sopforge.families.sop_tools.export.sopbench import write_sopbench_folder
from sopforge.families.sop_tools.export.tables import ArtifactRef, Provenance, write_tasks_jsonl, write_tasks_parquet
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, check
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.distractors import DistractorSet
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, Task
from sopforge.families.sop_tools.models.manipulations import ManipulationSet
from sopforge.families.sop_tools.models.package import PackageManifest
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.tools import ToolsArtifact
from sopforge.ask import StageResult
from sopforge.families.sop_tools.verify import oracle
from sopforge.families.sop_tools.verify.baselines import baseline_check, run_baselines
from sopforge.families.sop_tools.verify.consequences import DEFAULT_GATES
from sopforge.settings import Settings

STAGE = "package"
NO_VALUE_NOTE = "Has a value only when"


class PackageInputs(BaseModel):
    """What the package stage needs: every upstream artifact and where to write."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str = Field(description="Run being packaged (names the export folder).")
    theme: str = Field(description="Business theme of the run.")
    theme_slug: str = Field(description="Benchmark name and SOP-Bench folder name.")
    context: BusinessContext = Field(description="Accepted business context (domain and description).")
    data_schema: DataSchema | None = Field(None, validation_alias=AliasChoices("schema", "data_schema"), description=(
        "Accepted data schema: its conditional fields ([present_if]) are exported as empty cells where they "
        "have no value. None: no field may be empty outside the hidden columns."))
    sop: SOPDocument = Field(description="Accepted SOP: sop.txt.")
    api_graph: APIGraph = Field(description="Accepted API graph: graph figures.")
    tools: ToolsArtifact = Field(description="Accepted tools: toolspecs.json and tools.py.")
    ground_truth: GroundTruth = Field(description="Computed ground truth: rows, tasks, column roles.")
    distractors: DistractorSet = Field(description="Verified distractor tools and fields.")
    manipulations: ManipulationSet = Field(description="Verified SOP variants and the compliance set.")
    exports_dir: Path = Field(description="Root of all exports (<SOPFORGE_HOME>/exports).")
    provenance: list[ArtifactRef] = Field(default_factory=list, description="Artifacts the export is built from.")
    gates: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_GATES), description=(
        "min_distinct_paths and max_baseline_state_success (the theme's hardening section)."))


def _industry(context: BusinessContext) -> str:
    for line in context.sections[0].body.splitlines():
        if line.lower().startswith("industry:"):
            return line.split(":", 1)[1].strip()
    return context.theme


def _conditional_columns(schema: DataSchema | None) -> dict[str, str]:
    """Fields that have no value on some rows, each with the condition under which it has one."""
    return {f.name: f.present_if.text() for f in schema.fields if f.present_if is not None} if schema else {}


def _say_when_empty(spec: dict, conditional: dict[str, str], shown: list[str]) -> dict:
    """The toolSpec with each parameter that takes a shown conditional field saying when the case has no value.

    The agent sees such a field empty (SOP-Bench's harness prints pandas' ``nan``) on the cases where
    its condition does not hold; the tools read the empty cell as no value, so the call leaves it out.
    """
    properties = (spec.get("inputSchema", {}).get("json") or {}).get("properties") or {}
    notes = {p: f"{NO_VALUE_NOTE} {conditional[p]}; on other cases the case data shows it empty, so leave it out."
             for p in properties if p in conditional and p in shown}
    if not notes:
        return spec
    spec = json.loads(json.dumps(spec))  # a deep copy: the tools artifact stays as accepted
    for name, note in notes.items():
        prop = spec["inputSchema"]["json"]["properties"][name]
        if isinstance(prop, dict) and NO_VALUE_NOTE not in str(prop.get("description", "")):
            prop["description"] = f"{str(prop.get('description', '')).rstrip()} {note}".strip()
    return spec


def _shown_tasks(gt: GroundTruth, rows: list[dict], extra_inputs: list[str]) -> list[Task]:
    """The tasks as the agent sees them: distractor fields join each task's inputs."""
    return [t.model_copy(update={"inputs": {**t.inputs, **{c: row[c] for c in extra_inputs}}})
            for t, row in zip(gt.tasks, rows)]


def run(inputs: PackageInputs, *, settings: Settings | None = None, **_: object) -> StageResult[PackageManifest]:
    """Write the exports and run the oracle check on the exported folder.

    The checks a person overruled for the run (``settings.waivers``) are listed in ``metadata.json`` with
    their reasons, so whoever uses the benchmark sees what was waived.

    Returns:
        The manifest, with ``package.oracle_tsr`` and ``package.tasks_present`` checks.
    """
    gt, slug, distractors = inputs.ground_truth, inputs.theme_slug, inputs.distractors
    export_dir = inputs.exports_dir / inputs.run_id
    conditional = _conditional_columns(inputs.data_schema)
    base_specs = [{"toolSpec": _say_when_empty(spec, conditional, gt.input_columns)}  # toolspecs.json's shape
                  for spec in inputs.tools.toolspecs.specs]
    toolspecs = distractors.exported_toolspecs(base_specs)
    rows = distractors.rows_with_fields(gt.export_rows(), gt.id_field or inputs.tools.id_field)
    extra_inputs = [c for c in distractors.distractor_columns() if c not in gt.input_columns]
    input_columns = gt.input_columns + extra_inputs
    tasks = _shown_tasks(gt, rows, extra_inputs)
    task_dicts = [t.model_dump(mode="json") for t in tasks]
    folder = write_sopbench_folder(
        export_dir, name=slug, domain=_industry(inputs.context), description=inputs.context.task.sop_title,
        sop_text=inputs.sop.text, toolspecs=toolspecs,
        tools_source=distractors.merged_tools_source(inputs.tools.code.source, inputs.tools.class_name),
        rows=rows, input_columns=input_columns, intermediate_columns=gt.intermediate_columns,
        output_columns=gt.output_columns, reference_source=gt.procedure.source, api_graph=inputs.api_graph,
        tasks=task_dicts, extra_metadata={"sopforge_run_id": inputs.run_id, "theme": inputs.theme,
                        "provenance": [a.model_dump(mode="json") for a in inputs.provenance],
                        # SOP-Bench keeps no record of which tools and columns are distractors; ours does.
                        "distractors": {"tools": [t.name for t in distractors.kept_tools()],
                                        "columns": distractors.distractor_columns()},
                        # The harness reads only name, description and inputSchema.json of a toolSpec;
                        # which tools change the database is said here and in their descriptions.
                        "write_tools": {a.api_name: a.writes_table for a in inputs.api_graph.write_apis},
                        "state_tables": inputs.api_graph.tables()},
        overwrite=True, waivers=dict(settings.waivers) if settings else {},
        conditional_columns=conditional)
    registry = write_registry_variants(folder, base_specs, distractors)
    variants = write_sop_variants(folder, inputs.manipulations)
    tod_jsonl = write_tod_jsonl(export_dir / TOD_JSONL, slug, inputs.manipulations, inputs.run_id)
    oracle.write_tasks_jsonl(folder / "tasks.jsonl", tasks)
    report = oracle.oracle_check(folder, tasks)
    baselines = run_baselines(folder, tasks, inputs.api_graph, gt.input_columns)
    gates = inputs.gates
    paths = [p.model_dump(mode="json") for p in gt.paths]

    oracle_figures = {"summary": report.summary(), "ecr": report.ecr, "tsr": report.tsr,
                      "strict_tsr": report.strict_tsr, "final_state": report.final_state, "order": report.order,
                      "failing": [f.task_id for f in report.failures]}
    baseline_figures = [b.model_dump(mode="json", exclude={"failing"}) for b in baselines]
    provenance = Provenance(run_id=inputs.run_id, benchmark=slug, theme=inputs.theme, artifacts=inputs.provenance)
    tasks_jsonl = write_tasks_jsonl(export_dir / "tasks.jsonl", task_dicts, provenance)
    tasks_parquet = write_tasks_parquet(export_dir / "tasks.parquet", task_dicts, provenance)
    stats = benchmark_stats(sop_text=inputs.sop.text, toolspecs=toolspecs, rows=rows, input_columns=input_columns,
                            output_columns=gt.output_columns, api_graph=inputs.api_graph, tasks=task_dicts)
    hardening = hardening_metadata(distractors, inputs.manipulations, registry, variants)
    metadata = {"benchmark": slug, "run_id": inputs.run_id, "theme": inputs.theme,
                "stats": stats.model_dump(mode="json"), "coverage": gt.coverage,
                "excluded_rows": [e.model_dump(mode="json") for e in gt.excluded],
                "oracle": oracle_figures, "baselines": baseline_figures, "paths": paths, "gates": gates,
                "write_tools": {a.api_name: a.writes_table for a in inputs.api_graph.write_apis},
                "hardening": {**hardening, "tod_jsonl": TOD_JSONL},
                "waived_checks": dict(settings.waivers) if settings else {}}
    metadata_json = export_dir / "metadata.json"
    metadata_json.write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    manifest = PackageManifest(
        benchmark=slug, export_dir=str(export_dir), sopbench_folder=str(folder), tasks_jsonl=str(tasks_jsonl),
        tasks_parquet=str(tasks_parquet), metadata_json=str(metadata_json), stats=stats.model_dump(mode="json"),
        coverage=gt.coverage, excluded_rows=len(gt.excluded), oracle=oracle_figures, tod_jsonl=str(tod_jsonl),
        baselines=baseline_figures, paths=paths, gates=gates,
        write_tools=[a.api_name for a in inputs.api_graph.write_apis],
        hardening={"distractor_tools": len(hardening["distractor_tools"]),
                   "distractor_columns": len(hardening["distractor_columns"]),
                   "sop_variants": len(variants), "compliance_items": len(inputs.manipulations.compliance)})
    checks: list[CheckResult] = [
        check("package.tasks_present", bool(gt.tasks), "no task has a computed ground truth: nothing to export",
              ok=f"{len(gt.tasks)} tasks exported", tasks=len(gt.tasks)),
        *report.checks(),
        baseline_check(baselines, float(gates["max_baseline_state_success"]), name="package.baselines"),
        check("package.distinct_paths", len(gt.paths) >= gates["min_distinct_paths"],
              f"{len(gt.paths)} distinct tool paths, at least {int(gates['min_distinct_paths'])} required",
              distinct_paths=len(gt.paths), minimum=gates["min_distinct_paths"]),
    ]
    return StageResult(artifact=manifest, checks=checks, template_id="-", template_hash="-", prompt_hash="-",
                       model="-", attempts=1, raw_texts=[])
