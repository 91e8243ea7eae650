"""Stage 'probe_evidence': the true positives of every sample, each reviewed and judged, and proven sufficient.

Per planned document (T8): the e-mail, calendar event or document (``probe/evidence``, T9-T11),
its deterministic checks, T13's review (``probe/evidence_review``; a score of at least
``min_review_score`` and no other bottleneck touched) and the blind f(d) judge
(``probe/conveys_judge``), which must find it evidence of its own bottleneck and no other. A
document that fails is regenerated with the reasons, then dropped.

Per sample, sufficiency (the paper assumes it): a reader who sees only the kept true positives
writes the bottleneck (``probe/evidence_reader``) and T24 (``probe/judge_identification``) must
find every essential detail correct. A sample with no kept evidence ("a bottleneck without
evidence"), evidence that does not state every date, identifier and amount of the expected
parameters, or insufficient evidence is dropped and counted. Pure.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, failed_with_answers
from sopforge.checks import check
from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import BottleneckSet, PersonaBottlenecks, sample_id
from sopforge.families.probe.models.documents import Document, ParsedDocument, document_id
from sopforge.families.probe.models.sets import EvidenceSet, JudgedDocument, PlanSet, SamplePlan, Sufficiency
from sopforge.families.probe.models.verdicts import EvidenceReview
from sopforge.families.probe.models.world import WorldModel, WorldSet, parse_json_block
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.stages.verified import date_window, document_parser, verify_in_cycles
from sopforge.families.probe.verify.values import carried, expected_values, missing_values, values_check
from sopforge.families.probe.verify.judges import CONVEYS_TEMPLATE, IDENTIFICATION_TEMPLATE, ask_identification
from sopforge.funnel import Funnel
from sopforge.llm.types import LLMClient
from sopforge.parsing import extract_tag
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "EvidenceInputs", "run", "evidence_text"]

STAGE = "probe_evidence"
EVIDENCE, REVIEW, READER = "probe/evidence", "probe/evidence_review", "probe/evidence_reader"
TEMPLATE_IDS = (EVIDENCE, REVIEW, CONVEYS_TEMPLATE, READER, IDENTIFICATION_TEMPLATE)


class EvidenceInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    worlds: WorldSet
    bottlenecks: BottleneckSet
    plans: PlanSet
    options: ProbeSpec


def evidence_text(docs: list[ParsedDocument]) -> str:
    """Documents one after another, as a reader or the adversary's judge sees them."""
    return "\n\n".join(f"<item type=\"{d.kind}\">\n{d.text}\n</item>" for d in docs)


def _sample(asker: Asker, world: WorldModel, persona: PersonaBottlenecks, plan: SamplePlan, options: ProbeSpec,
            funnel: Funnel) -> tuple[list[JudgedDocument], str]:
    """The kept true positives of one sample and, when none is kept, why."""
    index, sid = plan.bottleneck_index, plan.sample_id
    bottleneck = persona.bottlenecks[index - 1]
    shared = {"world_model": world.to_prompt_text(), "bottleneck": bottleneck.description,
              "other_bottlenecks": numbered(persona.others(index))}
    kept: list[JudgedDocument] = []
    last_reason = ""
    values = expected_values(plan.checklist.task_selection_step.parameters)
    for j, entry in enumerate(plan.plan, 1):
        kind, low_high = entry.document_type, tuple(options.words[entry.document_type])
        item = f"{sid}-tp{j}"
        mine = [v for v in values if carried(v, entry.key_information)]
        parse = document_parser(kind, world, words=low_high, bottlenecks=persona.bottlenecks, own=index,
                                extra=lambda doc, mine=mine: [values_check(doc, mine)])
        first_day, last_day = date_window(kind, world.today)

        def generate(cycle: int, reasons: str | None, entry=entry, item=item, parse=parse, kind=kind,
                     low_high=low_high, mine=mine, first_day=first_day, last_day=last_day) -> ParsedDocument:
            return asker.ask(f"{item}-c{cycle}", EVIDENCE, {
                **shared, "document_type": kind, "evidence_role": entry.evidence_role,
                "key_information": entry.key_information, "sender_or_creator": entry.sender_or_creator,
                "min_words": str(low_high[0]), "max_words": str(low_high[1]), "date_from": first_day,
                "date_to": last_day, "required_values": ", ".join(v.written for v in mine) or "none",
                "source_system": entry.source_system or "none"},
                parse, retry_reasons=reasons)

        def review(doc: ParsedDocument, cycle: int, item=item) -> tuple[EvidenceReview, str]:
            got = asker.ask(f"{item}-c{cycle}-review", REVIEW, {**shared, "evidence_content": doc.text},
                            lambda raw: (parse_json_block(raw, "review", EvidenceReview), []), keep_checks=False)
            if got.quality_score < options.min_review_score:
                return got, (f"the evidence review scored it {got.quality_score}/10 (at least "
                             f"{options.min_review_score} needed): {'; '.join(got.issues) or 'no reason given'}")
            if got.mentions_other_bottlenecks:
                return got, f"the evidence review found another bottleneck in it: {'; '.join(got.issues)}"
            return got, ""

        outcome = verify_in_cycles(asker, item, world=world, bottlenecks=persona.bottlenecks, expected=[index],
                                   cycles=options.max_retries + 1, generate=generate, review=review)
        funnel.item("true_positive", kind, item, verified=outcome.document is not None,
                    kept=outcome.document is not None, retried=outcome.retried, reason=outcome.reason)
        if outcome.document is None:
            last_reason = outcome.reason
            continue
        doc = Document(**outcome.document.model_dump(), id=document_id(outcome.document.text, sid), role="true_positive",
                       persona_id=persona.persona_id, sample_id=sid, origin=f"evidence/{kind}",
                       note=entry.evidence_role)
        kept.append(JudgedDocument(document=doc, conveys=outcome.conveys, review=outcome.review))
    return kept, last_reason


def run(inputs: EvidenceInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[EvidenceSet]:
    """True positives for every planned sample; samples whose evidence is missing or insufficient are dropped.

    Raises:
        ValidationFailed: no sample has sufficient evidence.
    """
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    funnel, artifact = Funnel(), EvidenceSet()
    for plan in inputs.plans.samples:
        world = inputs.worlds.of(plan.persona_id)
        persona = inputs.bottlenecks.of(plan.persona_id)
        bottleneck = persona.bottlenecks[plan.bottleneck_index - 1]
        docs, reason = _sample(asker, world, persona, plan, inputs.options, funnel)
        artifact.documents += docs
        sid = sample_id(plan.persona_id, plan.bottleneck_index)
        if not docs:
            funnel.item("sample", persona.difficulty, sid, verified=False, kept=False,
                        reason=f"bottleneck without evidence: every planned document was dropped ({reason})")
            continue
        unread = missing_values(expected_values(plan.checklist.task_selection_step.parameters),
                                [d.document.text for d in docs])
        if unread:
            funnel.item("sample", persona.difficulty, sid, verified=False, kept=False,
                        reason="the expected parameters hold values no kept true positive states, so no agent "
                               "could fill them in: " + ", ".join(v.describe() for v in unread)
                               + (f" (a planned document was dropped: {reason})" if reason else ""))
            continue
        reader = asker.ask(f"{sid}-reader", READER, {
            "world_model": world.to_prompt_text(), "evidence": evidence_text([d.document for d in docs])},
            lambda raw: (extract_tag(raw, "bottleneck"), []), keep_checks=False)
        verdict, _raw = ask_identification(asker, f"{sid}-sufficiency", world, reader, bottleneck.description)
        artifact.sufficiency[sid] = Sufficiency(reader_bottleneck=reader, verdict=verdict, score=verdict.score())
        sufficient = verdict.score() > 0
        funnel.item("sample", persona.difficulty, sid, verified=sufficient, kept=sufficient,
                    reason="" if sufficient else f"evidence insufficient: a reader of the true positives alone "
                                                 f"identified {reader!r} ({verdict.reasoning})")
        if sufficient:
            artifact.samples.append(sid)
    artifact.funnel, artifact.drops = funnel.rows(), funnel.drops
    if not artifact.samples:
        raise failed_with_answers(f"{STAGE}: no sample has sufficient evidence ("
                                  + "; ".join(d.reason for d in funnel.drops if d.component == "sample")
                                  + "); regenerate with feedback or another model", [], asker.raw_texts)
    dropped = len(inputs.plans.samples) - len(artifact.samples)
    return asker.result(artifact, [check(f"{STAGE}.samples_kept", dropped == 0,
                                         f"{dropped} of {len(inputs.plans.samples)} samples dropped (reasons in drops)",
                                         ok=f"all {len(artifact.samples)} samples kept: their evidence is sufficient",
                                         severity="warning", kept=len(artifact.samples))])
