"""Stage 'probe_distractors': each persona's distractor pool (T14-T16 bulk, T17 natural, T18 enhanced), every one judged.

Per persona and kind: one bulk ask (``probe/distractors``) for ``probe.distractors[kind]``
documents. Each document is checked (length, people, date, no bottleneck identifier) and judged
by the blind f(d) judge, which must find it evidence of *none* of the persona's bottlenecks. A
document that fails is replaced by a single natural distractor of the same kind
(``probe/natural_distractor``, T17) with the reasons quoted, up to ``max_retries`` times, then
dropped. For medium and hard personas, ``probe.enhanced`` verified distractors (seeded choice)
are rewritten harder (``probe/enhance_distractor``, T18: more names, numbers and urgency); the
rewrite replaces the original only if it passes the same checks and judge.

The pool is shared by all samples of the persona, as in the paper's companion code. Pure.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.checks import blocking_failures, check
from sopforge.errors import ValidationFailed
from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import BottleneckSet, PersonaBottlenecks
from sopforge.families.probe.models.documents import Document, ParsedDocument, document_id, parse_documents
from sopforge.families.probe.models.sets import DocumentSet, JudgedDocument
from sopforge.families.probe.models.world import WorldModel, WorldSet
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.stages.verified import document_parser, verify_in_cycles
from sopforge.families.probe.verify.document_checks import check_document
from sopforge.families.probe.verify.judges import CONVEYS_TEMPLATE
from sopforge.funnel import Funnel
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "DistractorsInputs", "run"]

STAGE = "probe_distractors"
BULK, NATURAL, ENHANCE = "probe/distractors", "probe/natural_distractor", "probe/enhance_distractor"
TEMPLATE_IDS = (BULK, NATURAL, ENHANCE, CONVEYS_TEMPLATE)


class DistractorsInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    worlds: WorldSet
    bottlenecks: BottleneckSet
    options: ProbeSpec


def _persona(asker: Asker, world: WorldModel, persona: PersonaBottlenecks, options: ProbeSpec,
             funnel: Funnel) -> list[JudgedDocument]:
    pid, all_b = persona.persona_id, persona.bottlenecks
    shared = {"world_model": world.to_prompt_text(), "bottlenecks": numbered([b.description for b in all_b])}
    cycles = options.max_retries + 1
    kept: list[JudgedDocument] = []
    for kind, count in options.distractors.items():
        if not count:
            continue
        words = tuple(options.words[kind])
        batch = asker.ask(f"{pid}-bulk-{kind}", BULK, {
            **shared, "document_type": kind, "count": str(count), "min_words": str(words[0]),
            "max_words": str(words[1])}, lambda raw, kind=kind, count=count: (parse_documents(raw, kind, expected=count), []))
        natural = document_parser(kind, world, words=words, bottlenecks=all_b, own=None)
        for j, first in enumerate(batch, 1):
            item = f"{pid}-{kind}{j}"

            def generate(cycle: int, reasons: str | None, first=first, item=item, kind=kind, words=words,
                         natural=natural) -> ParsedDocument:
                if cycle == 1:
                    failures = blocking_failures(check_document(first, world, words=words, bottlenecks=all_b, own=None))
                    if failures:
                        raise ValidationFailed("; ".join(f.message for f in failures))
                    return first
                return asker.ask(f"{item}-c{cycle}", NATURAL, {
                    **shared, "document_type": kind, "min_words": str(words[0]), "max_words": str(words[1])},
                    natural, retry_reasons=reasons)

            outcome = verify_in_cycles(asker, item, world=world, bottlenecks=all_b, expected=[], cycles=cycles,
                                       generate=generate)
            funnel.item("distractor", kind, item, verified=outcome.document is not None,
                        kept=outcome.document is not None, retried=outcome.retried, reason=outcome.reason)
            if outcome.document is not None:
                origin = "natural" if outcome.retried else f"bulk/{kind}"
                kept.append(JudgedDocument(document=_document(outcome.document, pid, origin), conveys=outcome.conveys))
    if persona.difficulty != "easy":
        kept = _enhance(asker, world, persona, options, kept, funnel, shared)
    return kept


def _enhance(asker: Asker, world: WorldModel, persona: PersonaBottlenecks, options: ProbeSpec,
             kept: list[JudgedDocument], funnel: Funnel, shared: dict[str, str]) -> list[JudgedDocument]:
    """Rewrite a seeded choice of verified distractors harder (T18); a rewrite replaces its original if it passes."""
    rng = random.Random(f"{options.seed}:{persona.persona_id}:enhance")
    chosen = rng.sample(range(len(kept)), min(options.enhanced.of(persona.difficulty), len(kept)))
    for position in sorted(chosen):
        original = kept[position].document
        words = tuple(options.words[original.kind])
        item = f"{persona.persona_id}-enhanced{position + 1}"
        parse = document_parser(original.kind, world, words=words, bottlenecks=persona.bottlenecks, own=None)

        def generate(cycle: int, reasons: str | None, original=original, item=item, parse=parse) -> ParsedDocument:
            return asker.ask(f"{item}-c{cycle}", ENHANCE, {
                **shared, "document_type": original.kind, "original_content": original.text,
                "max_words": str(words[1])}, parse, retry_reasons=reasons)

        outcome = verify_in_cycles(asker, item, world=world, bottlenecks=persona.bottlenecks, expected=[],
                                   cycles=options.max_retries + 1, generate=generate)
        funnel.item("distractor", "enhanced", item, verified=outcome.document is not None,
                    kept=outcome.document is not None, retried=outcome.retried,
                    reason=f"{outcome.reason} (the original is kept)")
        if outcome.document is not None:
            kept[position] = JudgedDocument(document=_document(outcome.document, persona.persona_id, "enhanced",
                                                               note=f"enhanced from {original.id}"),
                                            conveys=outcome.conveys)
    return kept


def _document(doc: ParsedDocument, persona_id: str, origin: str, note: str = "") -> Document:
    return Document(**doc.model_dump(), id=document_id(doc.text), role="distractor", persona_id=persona_id,
                    origin=origin, note=note)


def run(inputs: DistractorsInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[DocumentSet]:
    """Every persona's verified distractor pool (the personas whose bottlenecks were all dropped get none)."""
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    funnel, documents = Funnel(), []
    for persona in inputs.bottlenecks.personas:
        if persona.kept:
            documents += _persona(asker, inputs.worlds.of(persona.persona_id), persona, inputs.options, funnel)
    asked = sum(inputs.options.distractors.values()) * sum(1 for p in inputs.bottlenecks.personas if p.kept)
    return asker.result(DocumentSet(documents=documents, funnel=funnel.rows(), drops=funnel.drops), [
        check(f"{STAGE}.kept", len(documents) == asked, f"{asked - len(documents)} of {asked} distractors dropped "
              "(reasons in drops)", ok=f"all {asked} distractors kept", severity="warning", kept=len(documents),
              asked=asked)])
