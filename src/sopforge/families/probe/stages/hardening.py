"""One revision of a sample that a shortcut attack solved (the hardening loop of ``probe_assembly``).

What each attack exploited decides what is revised, always with the attack's own account quoted:
- the true positives an attack found (in its top |T|, or every one when an action attack found the
  solver through their words) are rewritten (``probe/revise_document``): the same facts and values,
  a plain title, the cue moved into the body, other words than the ones the attack matched;
- a hard negative that a near-duplicate attack paired with its evidence is rewritten away from it;
- for each flagged true positive a camouflage distractor (``probe/camouflage``) shares its surface
  (sender, date, length, title style, the matched words) about routine work, so the surface stops
  pointing at the evidence; an action attack gets camouflage in the areas of other actions instead.
Every new version is checked and judged exactly like the original (the f(d) judge must find its own
bottleneck in evidence and none elsewhere); one that fails is dropped and the previous version kept.
Rewritten evidence must still suffice: the reader and T24 run again, and a failure reverts it.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import Action, PersonaBottlenecks
from sopforge.families.probe.models.documents import Document, ParsedDocument, document_id
from sopforge.families.probe.models.sets import AttackResult, HardeningRound, SamplePlan
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.stages.distractors import work_areas
from sopforge.families.probe.stages.verified import date_window, document_parser, verify_in_cycles
from sopforge.families.probe.verify.attacks import TASK_STATEMENT, cosine_similarities, distinctive_words
from sopforge.families.probe.verify.bottleneck_checks import content_words
from sopforge.families.probe.verify.judges import ask_identification
from sopforge.families.probe.verify.values import carried, expected_values, values_check
from sopforge.funnel import Funnel
from sopforge.parsing import extract_tag

__all__ = ["CAMOUFLAGE", "REVISE", "SampleState", "feedback", "revise"]

REVISE, CAMOUFLAGE, READER = "probe/revise_document", "probe/camouflage", "probe/evidence_reader"


@dataclass
class SampleState:
    """A sample while the loop hardens it: its documents by role and what each round found."""

    sid: str
    index: int
    persona: PersonaBottlenecks
    world: WorldModel
    plan: SamplePlan
    tps: list[Document]
    hns: list[Document]
    distractors: list[Document]
    camouflage: list[Document] = field(default_factory=list)
    rounds: list[HardeningRound] = field(default_factory=list)
    results: list[AttackResult] = field(default_factory=list)
    docs: list[Document] = field(default_factory=list)

    @property
    def solver(self) -> Action:
        return self.persona.solver(self.index)

    def solved_by(self) -> list[AttackResult]:
        """Attacks to revise against: those that beat chance on this sample or, scoring on it, over the set."""
        return [r for r in self.results if r.solved or r.set_level]


def _query(name: str, tp: Document, world: WorldModel, actions: list[Action]) -> str:
    """The text the attack ``name`` searched with (for per-action attacks: the action closest to ``tp``)."""
    if name.endswith("_task"):
        return TASK_STATEMENT
    if name.endswith("_persona"):
        return world.to_prompt_text()
    texts = [f"{a.id.replace('_', ' ')} {a.description}" for a in actions]
    if name.endswith("_per_action"):
        words = content_words(tp.text)
        return max(texts, key=lambda t: len(words & content_words(t)))
    return "\n".join(texts)


def matched_words(name: str, tp: Document, world: WorldModel, actions: list[Action], limit: int = 10) -> list[str]:
    """The words a lexical attack found ``tp`` by: those of its query the document uses most."""
    counts = Counter(w for w in content_words(tp.text) for _ in range(tp.text.lower().count(w)))
    shared = content_words(_query(name, tp, world, actions)) & set(counts)
    return sorted(shared, key=lambda w: (-counts[w], w))[:limit]


def feedback(state: SampleState, solving: list[AttackResult]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(document id -> the lines of feedback that concern it, ``"*"`` for the sample as a whole;
    document id -> the words lexical attacks matched in it)."""
    tp_ids = {d.id for d in state.tps}
    notes: dict[str, list[str]] = {}
    matched: dict[str, list[str]] = {}
    for r in solving:
        chance = f"random guessing does as well with probability {r.p_value:.3g}"
        if r.kind == "search":
            found = [i for i in r.picked if i in tp_ids]
            head = f"{r.name} put {r.hits} of the {len(state.tps)} evidence items in its top {len(r.picked)} ({chance})"
            for doc in (d for d in state.tps if d.id in found):
                if r.name.startswith(("bm25", "tfidf")):
                    words = matched_words(r.name, doc, state.world, state.persona.actions)
                    told = f"; the words it matched: {', '.join(words)}" if words else ""
                else:  # the item stands out as a whole: camouflage shares its most distinctive words
                    words, told = distinctive_words(doc, state.docs or state.tps), ""
                matched[doc.id] = sorted(set(matched.get(doc.id, [])) | set(words))
                notes.setdefault(doc.id, []).append(head + told + (f"; {r.detail}" if r.detail else ""))
        else:
            words = sorted(content_words(state.solver.description) & set().union(*(content_words(d.text) for d in state.tps)))
            line = (f"{r.name} picked the resolving action ({chance}): {r.detail or 'no reason given'}"
                    + (f"; the evidence shares these words with that action: {', '.join(words)}" if words else ""))
            for doc in state.tps:
                notes.setdefault(doc.id, []).append(line)
            notes.setdefault("*", []).append(line)
    return notes, matched


def _paired_hard_negatives(state: SampleState, solving: list[AttackResult]) -> list[Document]:
    """Hard negatives a solving near-duplicate attack paired with a true positive."""
    near = next((r for r in solving if r.name == "near_duplicate"), None)
    if near is None or not state.hns or not state.tps:
        return []
    picked = set(near.picked)
    similar = cosine_similarities(state.hns, state.tps)
    return [h for i, h in enumerate(state.hns) if h.id in picked or state.tps[int(similar[i].argmax())].id in picked]


def _surface(tp: Document, words: list[str]) -> str:
    lines = [f"- the same sender: {tp.sender}", f"- the same date: {tp.date}",
             f"- a subject or title in the same style as {tp.title!r} (same length and tone, other words)",
             f"- at least the same length: {tp.words} words or a little more"]
    return "\n".join(lines + ([f"- these words, used naturally: {', '.join(words)}"] if words else []))


def revise(parent: Asker, state: SampleState, rnd: int, options: ProbeSpec) -> tuple[Asker, Funnel, list[str]]:
    """Revise one solved sample in place (round ``rnd``); returns the asker, funnel entries and what changed."""
    asker, funnel, changed = parent.child(), Funnel(), []
    solving = state.solved_by()
    notes, matched = feedback(state, solving)
    world, persona, sid = state.world, state.persona, state.sid
    cycles = options.max_retries + 1
    numbered_b = numbered([b.description for b in persona.bottlenecks])
    values = expected_values(state.plan.checklist.task_selection_step.parameters)
    before = list(state.tps)
    # the positions of the flagged true positives: a rewrite gives them new ids, and their camouflage must still
    # mirror them (keyed by the old ids, the camouflage of rewritten evidence was never asked)
    flagged = [(j, matched.get(tp.id, [])) for j, tp in enumerate(state.tps) if tp.id in notes]

    def rewrite(doc: Document, role: str, item: str, lines: list[str]) -> Document | None:
        words = tuple(options.words[doc.kind])
        mine = [v for v in values if carried(v, doc.text)] if role == "evidence" else []
        first_day, last_day = date_window(doc.kind, world.today)
        own = state.index if role == "evidence" else None
        parse = document_parser(doc.kind, world, words=words, bottlenecks=persona.bottlenecks, own=own,
                                extra=(lambda d: [values_check(d, mine)]) if role == "evidence" else None)

        def generate(cycle: int, reasons: str | None) -> ParsedDocument:
            return asker.ask(f"{item}-c{cycle}", REVISE, {
                "world_model": world.to_prompt_text(), "bottlenecks": numbered_b, "bottleneck_number": str(state.index),
                "role": role, "document_type": doc.kind, "document": doc.text, "feedback": "\n".join(f"- {x}" for x in lines),
                "required_values": ", ".join(v.written for v in mine) or "none", "date_from": first_day,
                "date_to": last_day, "min_words": str(words[0]), "max_words": str(words[1])}, parse,
                retry_reasons=reasons)

        outcome = verify_in_cycles(asker, item, world=world, bottlenecks=persona.bottlenecks,
                                   expected=[state.index] if role == "evidence" else [], cycles=cycles, generate=generate)
        component = "true_positive" if role == "evidence" else "hard_negative"
        funnel.item("revision", component, item, verified=outcome.document is not None,
                    kept=outcome.document is not None, retried=outcome.retried,
                    reason=f"{outcome.reason} (the previous version is kept)")
        if outcome.document is None:
            return None
        return Document(**outcome.document.model_dump(), id=document_id(outcome.document.text, sid),
                        role=doc.role, persona_id=doc.persona_id, sample_id=sid, origin="revised",
                        note=doc.note, changed=doc.changed)

    for j, tp in enumerate(state.tps):
        if tp.id in notes:
            new = rewrite(tp, "evidence", f"{sid}-r{rnd}-tp{j + 1}", notes[tp.id])
            if new is not None:
                state.tps[j] = new
                changed.append(f"rewrote true positive {tp.id} as {new.id}")
    for hn in _paired_hard_negatives(state, solving):
        k = state.hns.index(hn)
        new = rewrite(hn, "hard_negative", f"{sid}-r{rnd}-hn{k + 1}",
                      [f"near_duplicate: it is the document most similar to an evidence item; make it its own"])
        if new is not None:
            state.hns[k] = new
            changed.append(f"rewrote hard negative {hn.id} as {new.id}")
    if state.tps != before and not _still_sufficient(asker, state, rnd):
        state.tps = before
        changed = [c for c in changed if not c.startswith("rewrote true positive")]
        changed.append("the rewritten evidence no longer sufficed to identify the bottleneck; kept the previous version")
    changed += _camouflage(asker, state, rnd, options, [(state.tps[j], words) for j, words in flagged], solving, funnel)
    return asker, funnel, changed


def _still_sufficient(asker: Asker, state: SampleState, rnd: int) -> bool:
    """A reader of the rewritten true positives alone still names the bottleneck (T24: every essential detail)."""
    evidence = "\n\n".join(f"<item type=\"{d.kind}\">\n{d.text}\n</item>" for d in state.tps)
    reader = asker.ask(f"{state.sid}-r{rnd}-reader", READER, {"world_model": state.world.to_prompt_text(),
                                                             "evidence": evidence},
                       lambda raw: (extract_tag(raw, "bottleneck"), []), keep_checks=False)
    verdict, _ = ask_identification(asker, f"{state.sid}-r{rnd}-sufficiency", state.world, reader,
                                    state.persona.bottlenecks[state.index - 1].description)
    return verdict.score() > 0


def _camouflage(asker: Asker, state: SampleState, rnd: int, options: ProbeSpec, mirrored: list[tuple[Document, list[str]]],
                solving: list[AttackResult], funnel: Funnel) -> list[str]:
    """New distractors sharing the surface the attacks exploited (``mirrored``: each flagged true positive as it
    now reads, with the words the attacks matched in it); each checked and judged like every distractor. They
    are mandatory in the datastore, so at most as many as leave one distractor under ``max_documents``."""
    world, persona, sid = state.world, state.persona, state.sid
    areas = work_areas(world, persona)
    rng = random.Random(f"{options.seed}:{sid}:camouflage:{rnd}")
    rng.shuffle(areas)
    wanted: list[tuple[str, Document, str]] = []  # (surface, mirrored item, work area)
    for n, (tp, words) in enumerate(mirrored):
        wanted.append((_surface(tp, words), tp, areas[n % len(areas)]))
    if any(r.kind == "action" for r in solving):
        others = [a for a in persona.actions if a.id != state.solver.id]
        for a in rng.sample(others, min(2, len(others))):
            tp = state.tps[len(wanted) % len(state.tps)]
            wanted.append((f"- the same kind of item as the rest of the datastore\n- these words, used naturally: "
                           f"{', '.join(sorted(content_words(a.description))[:10])}", tp, a.description))
    room = options.max_documents - 1 - len(state.tps) - len(state.hns) - len(state.camouflage)
    added = []
    for n, (surface, tp, area) in enumerate(wanted[:max(room, 0)], 1):
        item = f"{sid}-r{rnd}-camo{n}"
        low, high = options.words[tp.kind]
        # at least as long as the item it mirrors, so the evidence is not the longest of its look-alikes (an
        # independent answerer's title adversary, once titles, senders and dates matched, picked the longest)
        shortest = max(low, min(tp.words, high - 10))
        words = (shortest, min(high, max(int(tp.words * 1.25), shortest + 10)))
        parse = document_parser(tp.kind, world, words=words, bottlenecks=persona.bottlenecks, own=None)

        def generate(cycle: int, reasons: str | None, surface=surface, area=area, kind=tp.kind, words=words,
                     item=item, parse=parse) -> ParsedDocument:
            return asker.ask(f"{item}-c{cycle}", CAMOUFLAGE, {
                "world_model": world.to_prompt_text(), "bottlenecks": numbered([b.description for b in persona.bottlenecks]),
                "document_type": kind, "surface": surface, "work_area": area, "min_words": str(words[0]),
                "max_words": str(words[1])}, parse, retry_reasons=reasons)

        outcome = verify_in_cycles(asker, item, world=world, bottlenecks=persona.bottlenecks, expected=[],
                                   cycles=options.max_retries + 1, generate=generate)
        funnel.item("revision", "camouflage", item, verified=outcome.document is not None,
                    kept=outcome.document is not None, retried=outcome.retried, reason=outcome.reason)
        if outcome.document is not None:
            doc = Document(**outcome.document.model_dump(), id=document_id(outcome.document.text, sid),
                           role="distractor", persona_id=persona.persona_id, sample_id=sid, origin="camouflage",
                           note=f"shares the surface of {tp.id}")
            state.camouflage.append(doc)
            added.append(f"added camouflage {doc.id} (surface of {tp.id})")
    return added
