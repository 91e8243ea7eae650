"""Stage 'probe_distractors': every sample's own distractors (T14-T16 in small asks, T17, T18), each judged.

Per sample and kind, ``probe.distractors[kind]`` documents, asked a few at a time
(``probe/distractors``): as many as fit one answer (:func:`documents_per_ask`), at most
``probe.distractor_batch``. The asks are independent and run concurrently (``fan_out``). Each ask
is grounded in two areas of the persona's routine work (its actions and key processes, in a
seeded rotation; every other ask from areas no sibling sample of the persona is given, so the
evidence is not the only thing unlike the siblings' datastores), so every action has documents
about its area and none stands out by matching the evidence alone; documents are dated in the same
window as the evidence. Each document is
checked (length, people, dates, no bottleneck identifier) and judged by the blind f(d) judge,
which must find it evidence of *none* of the persona's bottlenecks. A document that fails is
replaced by a single natural distractor of the same kind (``probe/natural_distractor``, T17) with
the reasons quoted, up to ``max_retries`` times, then dropped. For medium and hard samples,
``probe.enhanced`` verified distractors (seeded choice) are rewritten harder
(``probe/enhance_distractor``, T18); a rewrite replaces its original only if it passes too.

Each sample's distractors are its own and carry ids salted with the sample, so no two datastores
share a document (a shared pool let "keep what the sibling sample lacks" find the evidence). Pure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, fan_out
from sopforge.checks import blocking_failures, check
from sopforge.errors import ValidationFailed
from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import BottleneckSet, PersonaBottlenecks, sample_id
from sopforge.families.probe.models.documents import Document, ParsedDocument, document_id, parse_documents
from sopforge.families.probe.models.sets import DocumentSet, JudgedDocument
from sopforge.families.probe.models.world import WorldModel, WorldSet
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.stages.verified import date_window, document_parser, documents_per_ask, verify_in_cycles
from sopforge.families.probe.verify.document_checks import check_document
from sopforge.families.probe.verify.judges import CONVEYS_TEMPLATE
from sopforge.funnel import Funnel
from sopforge.llm.output_limits import max_tokens_for
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "DistractorsInputs", "planned_asks", "run", "work_areas"]

STAGE = "probe_distractors"
BULK, NATURAL, ENHANCE = "probe/distractors", "probe/natural_distractor", "probe/enhance_distractor"
TEMPLATE_IDS = (BULK, NATURAL, ENHANCE, CONVEYS_TEMPLATE)


class DistractorsInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    worlds: WorldSet
    bottlenecks: BottleneckSet
    options: ProbeSpec


@dataclass(frozen=True)
class Ask:
    """One call for ``count`` distractors of ``kind`` for sample ``sid``; ``first`` numbers its documents."""

    sid: str
    persona: PersonaBottlenecks
    kind: str
    number: int
    count: int
    first: int
    areas: tuple[str, ...]


def work_areas(world: WorldModel, persona: PersonaBottlenecks) -> list[str]:
    """The persona's routine work, one line each: what every action does and every key process."""
    return [f"{a.description}" for a in persona.actions] + list(world.org.key_processes)


def planned_asks(inputs: DistractorsInputs, max_tokens: int) -> list[Ask]:
    """Every ask of the stage, sample by sample, kind by kind: the counts split to fit one answer each."""
    options, asks = inputs.options, []
    samples = inputs.bottlenecks.samples()
    for persona, index in samples:
        sid = sample_id(persona.persona_id, index)
        siblings = [i for p, i in samples if p.persona_id == persona.persona_id]
        areas = work_areas(inputs.worlds.of(persona.persona_id), persona)
        random.Random(f"{options.seed}:{persona.persona_id}:areas").shuffle(areas)
        # Every other ask draws from areas no sibling sample is given: evidence is unlike the siblings'
        # datastores, and so must many distractors be, or "keep what the sibling lacks" finds it.
        own = areas[siblings.index(index)::len(siblings)] or areas
        random.Random(f"{options.seed}:{sid}:areas").shuffle(areas)
        turn = 0
        for kind, count in options.distractors.items():
            per_ask = documents_per_ask(options.words[kind][1], max_tokens, options.distractor_batch)
            done = number = 0
            while done < count:
                n, number = min(per_ask, count - done), number + 1
                pool = own if turn % 4 == 0 else areas
                chosen = tuple(pool[(turn // 2 + k) % len(pool)] for k in range(2)) if pool else ()
                turn += 2
                asks.append(Ask(sid, persona, kind, number, n, done + 1, chosen))
                done += n
    return asks


def _shared(world: WorldModel, persona: PersonaBottlenecks) -> dict[str, str]:
    return {"world_model": world.to_prompt_text(), "bottlenecks": numbered([b.description for b in persona.bottlenecks])}


def _one_ask(parent: Asker, ask: Ask, world: WorldModel, options: ProbeSpec) -> tuple[Asker, Funnel, list[JudgedDocument]]:
    """Ask for one batch, then check and judge each of its documents (replacing failures with T17)."""
    asker, funnel, kept = parent.child(), Funnel(), []
    kind, all_b = ask.kind, ask.persona.bottlenecks
    words = tuple(options.words[kind])
    first_day, last_day = date_window(kind, world.today)
    systems = ask.persona.sources.get(ask.sid.rsplit("-b", 1)[1], [])
    shared = {**_shared(world, ask.persona), "document_type": kind, "min_words": str(words[0]),
              "max_words": str(words[1]), "date_from": first_day, "date_to": last_day,
              "systems": "\n".join(f"- {x.system}: {x.evidence}" for x in systems) or "- none",
              "work_areas": "\n".join(f"- {a}" for a in ask.areas) or "- the persona's routine work"}
    batch = asker.ask(f"{ask.sid}-{kind}-q{ask.number}", BULK, {**shared, "count": str(ask.count)},
                      lambda raw: (parse_documents(raw, kind, expected=ask.count), []))
    natural = document_parser(kind, world, words=words, bottlenecks=all_b, own=None)
    for j, first in enumerate(batch, ask.first):
        item = f"{ask.sid}-{kind}{j}"

        def generate(cycle: int, reasons: str | None, first=first, item=item) -> ParsedDocument:
            if cycle == 1:
                failures = blocking_failures(check_document(first, world, words=words, bottlenecks=all_b, own=None))
                if failures:
                    raise ValidationFailed("; ".join(f.message for f in failures))
                return first
            return asker.ask(f"{item}-c{cycle}", NATURAL, shared, natural, retry_reasons=reasons)

        outcome = verify_in_cycles(asker, item, world=world, bottlenecks=all_b, expected=[],
                                   cycles=options.max_retries + 1, generate=generate)
        funnel.item("distractor", kind, item, verified=outcome.document is not None, kept=outcome.document is not None,
                    retried=outcome.retried, reason=outcome.reason)
        if outcome.document is not None:
            origin = "natural" if outcome.retried else f"bulk/{kind}"
            kept.append(JudgedDocument(document=_document(outcome.document, ask.persona, ask.sid, origin),
                                       conveys=outcome.conveys))
    return asker, funnel, kept


def _enhance_one(parent: Asker, sid: str, position: int, original: Document, world: WorldModel,
                 persona: PersonaBottlenecks, options: ProbeSpec) -> tuple[Asker, Funnel, JudgedDocument | None]:
    """Rewrite one verified distractor harder (T18); None when the rewrite never passes (the original stays)."""
    asker, funnel = parent.child(), Funnel()
    words = tuple(options.words[original.kind])
    item = f"{sid}-enhanced{position + 1}"
    parse = document_parser(original.kind, world, words=words, bottlenecks=persona.bottlenecks, own=None)

    def generate(cycle: int, reasons: str | None) -> ParsedDocument:
        return asker.ask(f"{item}-c{cycle}", ENHANCE, {
            **_shared(world, persona), "document_type": original.kind, "original_content": original.text,
            "max_words": str(words[1])}, parse, retry_reasons=reasons)

    outcome = verify_in_cycles(asker, item, world=world, bottlenecks=persona.bottlenecks, expected=[],
                               cycles=options.max_retries + 1, generate=generate)
    funnel.item("distractor", "enhanced", item, verified=outcome.document is not None,
                kept=outcome.document is not None, retried=outcome.retried,
                reason=f"{outcome.reason} (the original is kept)")
    if outcome.document is None:
        return asker, funnel, None
    return asker, funnel, JudgedDocument(document=_document(outcome.document, persona, sid, "enhanced",
                                                            note=f"enhanced from {original.id}"),
                                         conveys=outcome.conveys)


def _document(doc: ParsedDocument, persona: PersonaBottlenecks, sid: str, origin: str, note: str = "") -> Document:
    return Document(**doc.model_dump(), id=document_id(doc.text, sid), role="distractor",
                    persona_id=persona.persona_id, sample_id=sid, origin=origin, note=note)


def run(inputs: DistractorsInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[DocumentSet]:
    """Every sample's verified distractors (samples whose bottleneck was dropped get none)."""
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    options, funnel = inputs.options, Funnel()
    # the budget each distractor ask gets (the stage's own, bounded by the model and SOPFORGE_MAX_TOKENS)
    asks = planned_asks(inputs, max_tokens_for(STAGE, model, settings.max_tokens))
    by_sample: dict[str, list[JudgedDocument]] = {}
    for ask, (child, found, kept) in zip(asks, fan_out(
            lambda a: _one_ask(asker, a, inputs.worlds.of(a.persona.persona_id), options), asks, "distractor ask")):
        asker.absorb(child)
        funnel.extend(found)
        by_sample.setdefault(ask.sid, []).extend(kept)
    rewrites = []
    for persona, index in inputs.bottlenecks.samples():
        sid = sample_id(persona.persona_id, index)
        pool = by_sample.get(sid, [])
        wanted = 0 if persona.difficulty == "easy" else options.enhanced.of(persona.difficulty)
        rng = random.Random(f"{options.seed}:{sid}:enhance")
        rewrites += [(sid, position, persona) for position in sorted(rng.sample(range(len(pool)), min(wanted, len(pool))))]
    for (sid, position, _), (child, found, better) in zip(rewrites, fan_out(
            lambda r: _enhance_one(asker, r[0], r[1], by_sample[r[0]][r[1]].document,
                                   inputs.worlds.of(r[2].persona_id), r[2], options), rewrites, "enhancement")):
        asker.absorb(child)
        funnel.extend(found)
        if better is not None:
            by_sample[sid][position] = better
    documents = [j for persona, index in inputs.bottlenecks.samples()
                 for j in by_sample.get(sample_id(persona.persona_id, index), [])]
    asked = sum(options.distractors.values()) * len(inputs.bottlenecks.samples())
    return asker.result(DocumentSet(documents=documents, funnel=funnel.rows(), drops=funnel.drops), [
        check(f"{STAGE}.kept", len(documents) == asked, f"{asked - len(documents)} of {asked} distractors dropped "
              "(reasons in drops)", ok=f"all {asked} distractors kept", severity="warning", kept=len(documents),
              asked=asked)])
