"""Stage 'probe_assembly': each sample's datastore D = T ∪ K, and the shortcut gate over every sample.

For each sample with sufficient evidence: its true positives and hard negatives, then its
persona's verified distractors in a seeded random order while the datastore stays within
``probe.max_documents`` and ``probe.token_budget``; the documents are shuffled (seeded) and
keep their opaque ids. The true positives of the persona's other samples are left out (each
sample's T is its own, L52); their solvers stay in the action list as plausible non-solvers.

The shortcut gate (:mod:`sopforge.families.probe.verify.shortcut`): a sample whose BM25 search
F1 exceeds ``probe.max_bm25_f1``, or that the surface-only adversary (``probe/adversary``) solves
(right action and a search F1 above ``probe.max_adversary_f1``), is dropped and counted. Over
all kept samples, true positives must not be separable from the other documents by length, type
or formatting; if they are, the stage fails with the figures. Pure.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, failed_with_answers
from sopforge.checks import check
from sopforge.errors import UserError
from sopforge.families.probe.asker import Asker
from sopforge.families.probe.models.bottlenecks import BottleneckSet
from sopforge.families.probe.models.documents import Document
from sopforge.families.probe.models.sets import DocumentSet, EvidenceSet, PlanSet, Sample, SampleSet, ShortcutFigures
from sopforge.families.probe.models.verdicts import AdversaryAnswer
from sopforge.families.probe.models.world import WorldSet, parse_json_block
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.verify.scoring import search_scores
from sopforge.families.probe.verify.shortcut import shortcut_baselines, two_sample_tests
from sopforge.funnel import Funnel
from sopforge.llm.types import LLMClient
from sopforge.parsing import ParseError
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "AssemblyInputs", "datastore", "run", "surface_view"]

STAGE = "probe_assembly"
TEMPLATE_IDS = ("probe/adversary",)


class AssemblyInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    worlds: WorldSet
    bottlenecks: BottleneckSet
    plans: PlanSet
    evidence: EvidenceSet
    distractors: DocumentSet
    hard_negatives: DocumentSet
    options: ProbeSpec


def datastore(sid: str, mandatory: list[Document], pool: list[Document], options: ProbeSpec) -> list[Document]:
    """The sample's documents in the order the agent gets them.

    Raises:
        UserError: the true positives and hard negatives alone exceed the token budget or the document
            count, or no distractor fits beside them.
    """
    tokens = sum(d.tokens for d in mandatory)
    if tokens > options.token_budget or len(mandatory) >= options.max_documents:
        raise UserError(f"sample {sid}: its {len(mandatory)} true positives and hard negatives hold {tokens:,} tokens, "
                        f"which leaves no room under probe.token_budget ({options.token_budget:,}) and "
                        f"probe.max_documents ({options.max_documents}); raise them or lower probe.words")
    rng = random.Random(f"{options.seed}:{sid}:assembly")
    chosen = list(mandatory)
    for doc in rng.sample(pool, len(pool)):
        if len(chosen) < options.max_documents and tokens + doc.tokens <= options.token_budget:
            chosen.append(doc)
            tokens += doc.tokens
    if len(chosen) == len(mandatory):
        raise UserError(f"sample {sid}: no distractor fits under probe.token_budget ({options.token_budget:,} tokens, "
                        f"{tokens:,} taken by its evidence and hard negatives); raise the budget")
    rng.shuffle(chosen)
    return chosen


def surface_view(docs: list[Document]) -> str:
    """What the adversary sees: type, title, sender, date and length of each document; never the body."""
    return "\n".join(f"- {d.id} | {d.kind} | {d.title} | {d.sender} | {d.date} | {d.tokens} tokens" for d in docs)


def run(inputs: AssemblyInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[SampleSet]:
    """Assemble every datastore and run the shortcut gate.

    Raises:
        UserError: a datastore cannot fit its evidence under the budget.
        ValidationFailed: every sample is dropped by the gate, or true positives are separable by a surface feature.
    """
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    options, funnel = inputs.options, Funnel()
    samples: list[Sample] = []
    documents: dict[str, Document] = {}
    for sid in inputs.evidence.samples:
        plan = inputs.plans.of(sid)
        persona = inputs.bottlenecks.of(plan.persona_id)
        world = inputs.worlds.of(plan.persona_id)
        index = plan.bottleneck_index
        tps = inputs.evidence.kept(sample_id=sid)
        hns = inputs.hard_negatives.kept(sample_id=sid)
        docs = datastore(sid, tps + hns, inputs.distractors.kept(persona_id=plan.persona_id), options)
        true_ids, solver = [d.id for d in tps], persona.solver(index)
        figures = ShortcutFigures(**shortcut_baselines(world, persona.actions, docs, true_ids, solver.id))
        ids = {d.id for d in docs}
        action_ids = {a.id for a in persona.actions}

        def parse(raw: str) -> tuple[AdversaryAnswer, list]:
            answer = parse_json_block(raw, "verdict", AdversaryAnswer)
            unknown = [i for i in answer.documents if i not in ids] + ([answer.action] if answer.action not in action_ids else [])
            if unknown:
                raise ParseError(f"unknown id(s) {unknown}: answer with document and action ids from the lists")
            return answer, []

        answer = asker.ask(f"{sid}-adversary", TEMPLATE_IDS[0], {
            "persona": f"{world.persona.name} ({world.persona.occupation}, {world.org.company_name})",
            "actions": "\n".join(f"- {a.id} ({a.type})" for a in persona.actions),
            "documents": surface_view(docs), "num_true": str(len(true_ids))}, parse, keep_checks=False)
        figures.adversary_f1 = search_scores(answer.documents, true_ids)["f1"]
        figures.adversary_action_hit = answer.action == solver.id
        figures.adversary_reasoning = answer.reasoning
        failures = []
        if figures.bm25_f1 > options.max_bm25_f1:
            failures.append(f"BM25 with the world model and actions finds the evidence (F1 {figures.bm25_f1:.2f} > "
                            f"{options.max_bm25_f1:.2f})")
        if figures.adversary_action_hit and figures.adversary_f1 > options.max_adversary_f1:
            failures.append(f"a surface-only adversary solves it (right action, search F1 {figures.adversary_f1:.2f} > "
                            f"{options.max_adversary_f1:.2f})")
        funnel.item("shortcut_gate", persona.difficulty, sid, verified=not failures, kept=not failures,
                    reason="; ".join(failures))
        if failures:
            continue
        for d in docs:
            documents[d.id] = d
        samples.append(Sample(
            sample_id=sid, persona_id=plan.persona_id, difficulty=persona.difficulty, world_model=world,
            actions=persona.actions, datastore=[d.id for d in docs], bottleneck=persona.bottlenecks[index - 1],
            solver_id=solver.id, expected_parameters=plan.checklist.task_selection_step.parameters,
            checklist=plan.checklist, true_positives=true_ids, hard_negatives=[d.id for d in hns],
            tokens=sum(d.tokens for d in docs), shortcut=figures))
    if not samples:
        raise failed_with_answers(f"{STAGE}: the shortcut gate dropped every sample ("
                                  + "; ".join(f"{d.item}: {d.reason}" for d in funnel.drops) + ")", [], asker.raw_texts)
    tp_ids = {i for s in samples for i in s.true_positives}
    tests = two_sample_tests([documents[i] for i in sorted(tp_ids)],
                             [d for i, d in sorted(documents.items()) if i not in tp_ids], alpha=options.alpha,
                             seed=options.seed)
    separable = [t for t in tests if t.separable]
    if separable:
        raise failed_with_answers(
            f"{STAGE}: true positives are separable from the other documents by "
            + ", ".join(f"{t.feature} (p={t.p_value:.4f}; {t.true_positives:.2f} vs {t.distractors:.2f})" for t in separable)
            + "; regenerate the evidence or distractors so they match", [], asker.raw_texts)
    artifact = SampleSet(samples=samples, documents=documents, two_sample_tests=tests, funnel=funnel.rows(),
                         drops=funnel.drops)
    dropped = len(inputs.evidence.samples) - len(samples)
    return asker.result(artifact, [
        check(f"{STAGE}.shortcut_gate", dropped == 0, f"{dropped} of {len(inputs.evidence.samples)} samples dropped by "
              "the shortcut gate (reasons in drops)", ok=f"all {len(samples)} samples pass the shortcut gate",
              severity="warning", kept=len(samples)),
        check(f"{STAGE}.two_sample_tests", not separable and bool(tests),
              "true positives and distractors could not be compared (fewer than two of either)" if not tests
              else "no surface feature separates true positives from distractors", severity="warning")])
