"""Stage 'probe_hard_negatives': near-copies of evidence that no longer convey the bottleneck (T19-T23).

Per kept sample, ``probe.hard_negatives`` documents, each derived from one of the sample's true
positives (seeded choice) by one manipulation, cycled from ``probe.hard_negative_kinds``:
- ``entity_swap`` (T20): the bottleneck's primary person is replaced by another relationship,
  and the item by another of the persona's items;
- ``time_shift`` (T21): the same kind of situation, a year earlier and already closed;
- ``template_clone`` (T22): the same structure and headings with unrelated content;
- ``counterfactual`` (T19 e-mail, T23 other kinds): a clearly hypothetical what-if.
The parameters are chosen by code and recorded with the model's own list of changes. Each hard
negative is checked for its manipulation (the swapped person appears and the original does not;
the date lies in the shifted period; hypothetical wording), for closure cues (no "nothing is needed
from you", "resolved", "CLOSED": what tells it apart must be its facts, or it hands an agent a
shortcut), for being rewritten rather than copied (at most a quarter of its five-word runs taken
from the source), and judged by the blind f(d) judge, which must find it evidence of no
bottleneck. Failures are regenerated, then dropped. Pure.
"""

from __future__ import annotations

import random
import re
from datetime import date, timedelta

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.checks import CheckResult, check
from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import BottleneckSet, PersonaBottlenecks
from sopforge.families.probe.models.documents import Document, ParsedDocument, document_id, parse_documents
from sopforge.families.probe.models.sets import DocumentSet, EvidenceSet, JudgedDocument
from sopforge.families.probe.models.world import WorldModel, WorldSet
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.stages.verified import verify_in_cycles
from sopforge.families.probe.verify.document_checks import check_document
from sopforge.families.probe.verify.judges import CONVEYS_TEMPLATE
from sopforge.funnel import Funnel
from sopforge.llm.types import LLMClient
from sopforge.parsing import ParseError, extract_tag
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["CLOSURE_CUES", "STAGE", "TEMPLATE_IDS", "HardNegativesInputs", "Manipulation", "copied_share",
           "plan_manipulation", "run"]

STAGE = "probe_hard_negatives"
TEMPLATE = "probe/hard_negative"
TEMPLATE_IDS = (TEMPLATE, CONVEYS_TEMPLATE)
# Sentences that tell a reader the item needs nothing: an agent that learns them skips the hard negatives
# without reading what they are about (the demo's near-copies said "nothing is needed from you").
CLOSURE_CUES = re.compile(
    r"\b(no (further )?action (is )?(needed|required)|nothing (else )?(is )?(needed|required)|no need to|"
    r"(has|have) been (resolved|closed|completed|settled|cleared)|(is|are|was|were) now (resolved|closed|settled)|"
    r"already (been )?(handled|resolved|taken care of|done|sorted|closed)|closed out|all set|for your records|"
    r"just (an )?fyi|no longer (needed|an issue|blocking|pending)|(issue|matter|case|ticket|item) (is )?(closed|resolved))\b"
    r"|\[(closed|resolved|done)\]|\b(CLOSED|RESOLVED)\b", re.IGNORECASE)
_HYPOTHETICAL = re.compile(r"\b(what if|if we had|had we|would have|hypothetical(ly)?|counterfactual|"
                           r"in hindsight|imagine)\b", re.IGNORECASE)


class HardNegativesInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    worlds: WorldSet
    bottlenecks: BottleneckSet
    evidence: EvidenceSet
    options: ProbeSpec


class Manipulation(BaseModel):
    """One hard negative's recipe, chosen by code before the model writes it."""

    kind: str
    source: Document
    details: str = Field(description="The instructions with the chosen parameters, as the prompt shows them.")
    changed: list[dict[str, str]] = Field(description="What code decided to change: {what, original, replacement}.")
    swap_surname: str = ""
    original_surname: str = ""
    period: tuple[str, str] | None = None


def _surname(name: str) -> str:
    return name.split()[-1]


def plan_manipulation(kind: str, source: Document, world: WorldModel, persona: PersonaBottlenecks, index: int,
                      rng: random.Random) -> Manipulation:
    """Choose the parameters of one manipulation of ``source`` (a true positive of bottleneck ``index``)."""
    bottleneck = persona.bottlenecks[index - 1]
    if kind == "entity_swap":
        involved = bottleneck.description.lower() + " " + source.text.lower()
        candidates = [r for r in world.relationships if _surname(r.name).lower() not in involved]
        swap = rng.choice(candidates or world.relationships)
        original = bottleneck.primary_person
        return Manipulation(
            kind=kind, source=source, swap_surname=_surname(swap.name), original_surname=_surname(original),
            details=(f"Swap the people: every part {original} plays goes to {swap.name} ({swap.role}), and {original} "
                     f"does not appear at all. Swap the item: the case, order, document or system it is about becomes "
                     f"a different one of the persona's work that you choose (new identifiers), in a realistic but "
                     f"unrelated context: ordinary work in progress that the facts show is on track, never a "
                     f"sentence saying nothing is needed."),
            changed=[{"what": "person", "original": original, "replacement": swap.name}])
    if kind == "time_shift":
        today = date.fromisoformat(world.today)
        start = today - timedelta(days=400)
        end = today - timedelta(days=330)
        return Manipulation(
            kind=kind, source=source, period=(start.isoformat(), end.isoformat()),
            details=(f"Move it in time: the actual timeframe is the weeks before {world.today}; write about a similar "
                     f"situation between {start.isoformat()} and {end.isoformat()}, dated in that period and written "
                     f"as of its own date (what was pending then reads as pending). Similar topics, a different "
                     f"period: only its dates show it is not the current problem, so it could be confused with it "
                     f"by someone who does not read them."),
            changed=[{"what": "timeframe", "original": f"around {world.today}",
                      "replacement": f"{start.isoformat()} to {end.isoformat()}"}])
    if kind == "template_clone":
        sections = [line.strip() for line in source.body.splitlines()
                    if line.strip() and len(line.split()) <= 8 and not line.strip().endswith((".", ","))][:8]
        return Manipulation(
            kind=kind, source=source,
            details=("Clone the template: keep exactly the same structure, header lines and section headings "
                     f"({'; '.join(sections) or 'those of the original'}), and fill them with completely different, "
                     "unrelated content, so it could be mistaken for an important item if not read carefully."),
            changed=[{"what": "content", "original": source.title, "replacement": "unrelated content, same template"}])
    sender, recipient = world.persona.name, rng.choice(world.relationships).name
    return Manipulation(
        kind="counterfactual", source=source,
        details=(f"Write a counterfactual: {sender} and {recipient} discuss what might have happened if a different "
                 "decision had been made on a past decision of the same kind (e.g. 'if we had chosen "
                 "vendor B instead of vendor A...'). Make it clearly hypothetical, with lessons learned from the path "
                 "not chosen, and give no evidence of any current problem."),
        changed=[{"what": "modality", "original": "a current situation", "replacement": "a hypothetical what-if"}])


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def copied_share(doc: str, source: str) -> float:
    """Share of ``doc``'s five-word runs that also occur in ``source`` (0 when it has none)."""
    mine = _shingles(doc)
    return len(mine & _shingles(source)) / len(mine) if mine else 0.0


def _common_checks(doc: ParsedDocument, m: Manipulation) -> list[CheckResult]:
    cues = sorted({c.group(0) for c in CLOSURE_CUES.finditer(doc.text)})
    share = copied_share(doc.body, m.source.body)
    return [
        check("probe_hard_negative.no_closure_cue", not cues,
              f"a hard negative must not announce that it needs nothing ({', '.join(repr(c) for c in cues)}): let "
              "its facts (another person, another period, a what-if) show it, or an agent learns to skip it unread",
              ok="no sentence announces that the hard negative needs nothing"),
        check("probe_hard_negative.rewritten", share <= 0.25,
              f"{share:.0%} of the hard negative's five-word runs are copied from its source: rewrite it in your own "
              "words (at most 25%), keeping only its kind, shape and topic",
              ok=f"{share:.0%} of its five-word runs come from the source (at most 25%)", copied=round(share, 3)),
    ]


def _manipulation_checks(doc: ParsedDocument, m: Manipulation) -> list[CheckResult]:
    text = doc.text.lower()
    if m.kind == "entity_swap":
        swapped = m.swap_surname.lower() in text and not re.search(rf"\b{re.escape(m.original_surname.lower())}\b", text)
        return [check("probe_hard_negative.entity_swapped", swapped,
                      f"an entity swap must name {m.swap_surname} and never {m.original_surname}",
                      ok=f"the entity swap names {m.swap_surname} and never {m.original_surname}")]
    if m.kind == "time_shift":
        return [check("probe_hard_negative.time_shifted", m.period[0] <= doc.date <= m.period[1],
                      f"a time shift must be dated between {m.period[0]} and {m.period[1]}, got {doc.date}",
                      ok=f"the time shift is dated {doc.date}, between {m.period[0]} and {m.period[1]}")]
    if m.kind == "counterfactual":
        return [check("probe_hard_negative.hypothetical", bool(_HYPOTHETICAL.search(doc.text)),
                      "a counterfactual must be clearly hypothetical (what if / if we had / would have)",
                      ok="the counterfactual is clearly hypothetical (what if / if we had / would have)")]
    return [check("probe_hard_negative.same_template", doc.kind == m.source.kind,
                  f"a template clone must be a {m.source.kind} like its source",
                  ok=f"the template clone is a {m.source.kind} like its source")]


def _changes(raw: str) -> list[dict[str, str]]:
    """The model's ``<changed>`` lines ``what: original -> replacement``."""
    lines = [line.strip("-• ").strip() for line in extract_tag(raw, "changed").splitlines() if line.strip()]
    changes = []
    for line in lines:
        match = re.match(r"(.+?):\s*(.+?)\s*->\s*(.+)$", line)
        if not match:
            raise ParseError(f"each <changed> line must read 'what: original -> replacement', got {line!r}")
        changes.append({"what": match.group(1), "original": match.group(2), "replacement": match.group(3)})
    if not changes:
        raise ParseError("<changed> must list at least one change")
    return changes


def run(inputs: HardNegativesInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[DocumentSet]:
    """Hard negatives for every sample with sufficient evidence."""
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    options, funnel, documents = inputs.options, Funnel(), []
    kinds = options.hard_negative_kinds
    for n_sample, sid in enumerate(inputs.evidence.samples):
        persona_id, index = sid.rsplit("-b", 1)[0], int(sid.rsplit("-b", 1)[1])
        world, persona = inputs.worlds.of(persona_id), inputs.bottlenecks.of(persona_id)
        sources = inputs.evidence.kept(sample_id=sid)
        rng = random.Random(f"{options.seed}:{sid}:hard_negatives")
        shared = {"world_model": world.to_prompt_text(),
                  "bottlenecks": numbered([b.description for b in persona.bottlenecks])}
        for k in range(1, options.hard_negatives + 1):
            m = plan_manipulation(kinds[(n_sample + k - 1) % len(kinds)], rng.choice(sources), world, persona, index, rng)
            words = tuple(options.words[m.source.kind])
            item, reported = f"{sid}-hn{k}", {}

            def parse(raw: str, m=m, words=words, reported=reported) -> tuple[ParsedDocument, list[CheckResult]]:
                doc = parse_documents(raw, m.source.kind, expected=1)[0]
                reported["changes"] = _changes(raw)
                checks = check_document(doc, world, words=words, bottlenecks=persona.bottlenecks, own=None,
                                        max_days=420 if m.kind == "time_shift" else 200, name="probe_hard_negative")
                return doc, checks + _manipulation_checks(doc, m) + _common_checks(doc, m)

            def generate(cycle: int, reasons: str | None, m=m, item=item, words=words, parse=parse) -> ParsedDocument:
                return asker.ask(f"{item}-c{cycle}", TEMPLATE, {
                    **shared, "source_document": m.source.text, "document_type": m.source.kind,
                    "manipulation": m.kind, "manipulation_details": m.details, "min_words": str(words[0]),
                    "max_words": str(words[1])}, parse, retry_reasons=reasons)

            outcome = verify_in_cycles(asker, item, world=world, bottlenecks=persona.bottlenecks, expected=[],
                                       cycles=options.max_retries + 1, generate=generate)
            funnel.item("hard_negative", m.kind, item, verified=outcome.document is not None,
                        kept=outcome.document is not None, retried=outcome.retried, reason=outcome.reason)
            if outcome.document is not None:
                doc = Document(**outcome.document.model_dump(), id=document_id(outcome.document.text, sid),
                               role="hard_negative", persona_id=persona_id, sample_id=sid,
                               origin=f"hard_negative/{m.kind}", note=f"derived from {m.source.id}",
                               changed=m.changed + reported.get("changes", []))
                documents.append(JudgedDocument(document=doc, conveys=outcome.conveys))
    asked = options.hard_negatives * len(inputs.evidence.samples)
    return asker.result(DocumentSet(documents=documents, funnel=funnel.rows(), drops=funnel.drops), [
        check(f"{STAGE}.kept", len(documents) == asked, f"{asked - len(documents)} of {asked} hard negatives dropped "
              "(reasons in drops)", ok=f"all {asked} hard negatives kept", severity="warning", kept=len(documents),
              asked=asked)])
