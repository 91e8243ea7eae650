"""The PROBE family's declaration: its stage DAG, theme section (``probe:``), exports, scorers and summary.

PROBE (seeds/004): personas from the shared business context → world models (T2-T4) →
bottlenecks and actions (T6, T1; the review gate) → checklists and evidence plans (T7, T8) ∥
distractors (T14-T18) → evidence (T9-T11, T13, sufficiency) → hard negatives (T19-T23) → assembly
and the shortcut gate → the export. Every document is judged by an f(d) judge the paper does not
have, and every verification is counted in the stage's funnel.
"""

from __future__ import annotations

from typing import Any

from sopforge.families.protocol import ExportSpec, Family, FamilySummary, OptionsSpec, StageSpec, SummaryTable, TableView
from sopforge.families.probe import edits, render
from sopforge.families.probe.evaluation import EVALUATION
from sopforge.families.probe.export.samples import PAPER_TABLE_1
from sopforge.families.probe.models.bottlenecks import BottleneckSet
from sopforge.families.probe.models.sets import DocumentSet, EvidenceSet, PlanSet, ProbeManifest, SampleSet
from sopforge.families.probe.models.verdicts import JudgedAnswer
from sopforge.families.probe.models.world import PersonaSet, WorldSet
from sopforge.families.probe.options import OPTIONS_KEY, ProbeSpec, probe_options
from sopforge.families.probe.stages import assembly, bottlenecks, distractors, evidence, hard_negatives, package
from sopforge.families.probe.stages import personas, plans, world
from sopforge.families.probe.verify.scoring import identification_score, resolution_score, search_scores

__all__ = ["FAMILY"]


def _opts(spec, *names: str) -> dict[str, Any]:
    return probe_options(spec).model_dump(mode="json", include=set(names))


def _package_inputs(spec, up, ctx) -> package.PackageInputs:
    funnels = {s: [r.model_dump() for r in up[s].funnel] for s in
               ("probe_bottlenecks", "probe_evidence", "probe_distractors", "probe_hard_negatives", "probe_assembly")}
    drops = {s: [d.model_dump() for d in up[s].drops] for s in funnels}
    provenance = [{"stage": s, "artifact_id": r.id, "version": r.version, "content_hash": r.content_hash,
                   "template_id": r.template_id, "template_hash": r.template_hash, "model": r.model}
                  for s, r in ctx.parent_records.items()]
    return package.PackageInputs(run_id=ctx.run_id, theme=spec.theme, theme_slug=spec.slug,
                                 samples=up["probe_assembly"], funnels=funnels, drops=drops, provenance=provenance,
                                 exports_dir=ctx.exports_dir)


STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        name=personas.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[personas.STAGE], parents=("context",), kind="probe_personas", model=PersonaSet,
        template_ids=personas.TEMPLATE_IDS, run=personas.run,
        make_inputs=lambda spec, up, ctx: personas.PersonasInputs(
            theme_slug=spec.slug, context=up["context"],
            difficulties=[probe_options(spec).difficulty_of(i) for i in range(probe_options(spec).personas)],
            as_of=probe_options(spec).reference_date.isoformat()),
        params=lambda spec: _opts(spec, "personas", "difficulties", "reference_date"),
        render=render.personas_markdown,
    ),
    StageSpec(
        name=world.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[world.STAGE], parents=("context", personas.STAGE), kind="probe_world", model=WorldSet,
        template_ids=world.TEMPLATE_IDS, run=world.run,
        make_inputs=lambda spec, up, ctx: world.WorldInputs(
            theme_slug=spec.slug, context=up["context"], personas=up[personas.STAGE],
            today=probe_options(spec).reference_date.isoformat()),
        params=lambda spec: _opts(spec, "reference_date"),
        render=render.world_markdown,
    ),
    StageSpec(
        name=bottlenecks.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[bottlenecks.STAGE], parents=(world.STAGE,), kind="probe_bottlenecks", model=BottleneckSet,
        template_ids=bottlenecks.TEMPLATE_IDS, run=bottlenecks.run, gate=True,
        make_inputs=lambda spec, up, ctx: bottlenecks.BottlenecksInputs(
            theme_slug=spec.slug, worlds=up[world.STAGE], options=probe_options(spec)),
        params=lambda spec: _opts(spec, "bottlenecks", "actions", "max_retries", "attack_alpha"),
        render=render.bottlenecks_markdown, edit=edits.BOTTLENECKS_EDIT,
    ),
    StageSpec(
        name=plans.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[plans.STAGE], parents=(world.STAGE, bottlenecks.STAGE), kind="probe_plans", model=PlanSet,
        template_ids=plans.TEMPLATE_IDS, run=plans.run,
        make_inputs=lambda spec, up, ctx: plans.PlansInputs(
            theme_slug=spec.slug, worlds=up[world.STAGE], bottlenecks=up[bottlenecks.STAGE],
            options=probe_options(spec)),
        params=lambda spec: _opts(spec, "evidence_documents"),
        render=render.plans_markdown,
    ),
    StageSpec(
        name=distractors.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[distractors.STAGE], parents=(world.STAGE, bottlenecks.STAGE), kind="probe_distractors",
        model=DocumentSet, template_ids=distractors.TEMPLATE_IDS, run=distractors.run,
        make_inputs=lambda spec, up, ctx: distractors.DistractorsInputs(
            theme_slug=spec.slug, worlds=up[world.STAGE], bottlenecks=up[bottlenecks.STAGE],
            options=probe_options(spec)),
        params=lambda spec: _opts(spec, "distractors", "distractor_batch", "enhanced", "words", "max_retries", "seed"),
        render=render.documents_markdown,
    ),
    StageSpec(
        name=evidence.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[evidence.STAGE], parents=(world.STAGE, bottlenecks.STAGE, plans.STAGE), kind="probe_evidence",
        model=EvidenceSet, template_ids=evidence.TEMPLATE_IDS, run=evidence.run,
        make_inputs=lambda spec, up, ctx: evidence.EvidenceInputs(
            theme_slug=spec.slug, worlds=up[world.STAGE], bottlenecks=up[bottlenecks.STAGE], plans=up[plans.STAGE],
            options=probe_options(spec)),
        params=lambda spec: _opts(spec, "words", "min_review_score", "max_retries"),
        render=render.documents_markdown,
    ),
    StageSpec(
        name=hard_negatives.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[hard_negatives.STAGE], parents=(world.STAGE, bottlenecks.STAGE, evidence.STAGE),
        kind="probe_hard_negatives", model=DocumentSet, template_ids=hard_negatives.TEMPLATE_IDS,
        run=hard_negatives.run,
        make_inputs=lambda spec, up, ctx: hard_negatives.HardNegativesInputs(
            theme_slug=spec.slug, worlds=up[world.STAGE], bottlenecks=up[bottlenecks.STAGE],
            evidence=up[evidence.STAGE], options=probe_options(spec)),
        params=lambda spec: _opts(spec, "hard_negatives", "hard_negative_kinds", "words", "max_retries", "seed"),
        render=render.documents_markdown,
    ),
    StageSpec(
        name=assembly.STAGE,
        expected_calls=lambda spec: probe_options(spec).first_try_calls()[assembly.STAGE],
        parents=(world.STAGE, bottlenecks.STAGE, plans.STAGE, evidence.STAGE, distractors.STAGE, hard_negatives.STAGE),
        kind="probe_samples", model=SampleSet, template_ids=assembly.TEMPLATE_IDS, run=assembly.run,
        make_inputs=lambda spec, up, ctx: assembly.AssemblyInputs(
            theme_slug=spec.slug, worlds=up[world.STAGE], bottlenecks=up[bottlenecks.STAGE], plans=up[plans.STAGE],
            evidence=up[evidence.STAGE], distractors=up[distractors.STAGE], hard_negatives=up[hard_negatives.STAGE],
            options=probe_options(spec)),
        params=lambda spec: _opts(spec, "max_documents", "token_budget", "hardening_rounds", "attack_alpha",
                                  "max_attack_ratio", "alpha", "words", "max_retries", "seed"),
        render=render.assembly_markdown, table=TableView(render.sample_rows, "PROBE samples and shortcut attacks",
                                                         in_terminal=True),
    ),
    StageSpec(
        name=package.STAGE,
        parents=(bottlenecks.STAGE, evidence.STAGE, distractors.STAGE, hard_negatives.STAGE, assembly.STAGE),
        kind="probe_package", model=ProbeManifest, template_ids=(), run=package.run, uses_llm=False, per_run=True,
        make_inputs=_package_inputs, render=render.package_markdown,
    ),
)


def summarize(contents: dict[str, dict[str, Any]]) -> FamilySummary:
    """Table-1 statistics beside the paper's, the shortcut gate's figures, and where the export is."""
    summary = FamilySummary()
    samples = contents.get(assembly.STAGE)
    if samples:
        rows = render.sample_rows(samples)
        summary.tables.append(SummaryTable(
            "PROBE samples after the hardening loop (rounds of revision; the attacks closest to beating random)",
            tuple(rows[0]) if rows else ("sample",), [tuple(str(v) for v in r.values()) for r in rows]))
        attacks = render.attack_rows(samples)
        summary.tables.append(SummaryTable(
            "PROBE shortcut attacks against random (mean search F1 or right-action rate over the kept samples)",
            tuple(attacks[0]) if attacks else ("attack",), [tuple(str(v) for v in r.values()) for r in attacks]))
        tests = samples.get("two_sample_tests", [])
        summary.lines.append("PROBE two-sample tests (true positives vs others): " + ", ".join(
            f"{t['feature']} p={t['p_value']:.3f}" for t in tests))
    manifest = contents.get(package.STAGE)
    if manifest:
        stats = manifest["stats"]
        summary.tables.append(SummaryTable(
            f"PROBE Table 1 ({stats['samples']} samples, {stats['personas']} personas) beside the paper's "
            f"({PAPER_TABLE_1['samples']} samples)", ("per sample", "min", "max", "mean", "std", "paper mean"),
            [(k, *(str(stats[k].get(c, "")) for c in ("min", "max", "mean", "std")),
              str(PAPER_TABLE_1.get(k, {}).get("mean", "-"))) for k in ("tokens", "actions", "documents",
                                                                         "true_positives")]))
        summary.export = manifest["export_dir"]
        summary.facts.update(probe_export=summary.export, probe_stats=stats)
        summary.lines.append(f"PROBE exported: {manifest['export_dir']}  (difficulty {stats['difficulty']}, "
                             f"bottleneck types {stats['bottleneck_types']})")
    return summary


FAMILY = Family(
    name="probe",
    title="PROBE: find the one bottleneck hidden in a persona's e-mails, calendar and documents, and the one action "
          "that resolves it",
    sources=("004_d6758140c77426b4.txt (PROBE)",),
    stages=STAGES,
    options=OptionsSpec(key=OPTIONS_KEY, model=ProbeSpec),
    exports=(
        ExportSpec("probe/samples/<sample>.json", "one sample: agent_input (world model with available actions, "
                                                  "datastore) and ground_truth (bottleneck, true positives, action, "
                                                  "expected parameters, hard negatives, checklist)"),
        ExportSpec("probe/samples.jsonl, probe/samples.parquet", "every sample, one per line or row"),
        ExportSpec("probe/metadata.json", "Table 1 statistics beside the paper's, splits, funnels, shortcut gate"),
    ),
    scorers={"search": search_scores, "identification": identification_score, "resolution": resolution_score},
    summarize=summarize,
    json_schemas={"probe_judged_answer": JudgedAnswer},
    evaluation=EVALUATION,
)
