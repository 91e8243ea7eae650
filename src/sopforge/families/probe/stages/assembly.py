"""Stage 'probe_assembly': each sample's datastore D = T ∪ K, the shortcut attacks, and the hardening loop.

A sample's datastore holds its true positives, hard negatives and camouflage, then its own
distractors in a seeded order while it stays within ``probe.max_documents`` and
``probe.token_budget``, shuffled (seeded). The true positives of the persona's other samples are
left out (each sample's T is its own, L52); their solvers stay as plausible non-solvers.

Every round, every sample meets every shortcut attack (``verify/attacks.py``; the title-only
adversary ``probe/adversary``; the persona-only adversary's guess from ``probe_bottlenecks``), each
against random guessing on the same sample. A sample an attack solves is revised with the attack's
account as feedback (``stages/hardening.py``) and attacked again, up to ``probe.hardening_rounds``
rounds; still solved then, it is dropped with the attacks that solved it. An attack that beats
random over the whole set (its total hits, p below ``probe.attack_alpha``) counts as solving every
sample it scored on. Each round is counted in the funnel (``hardening``, ``revision``), each sample's
fate in ``shortcut_gate``. The stage fails only when no sample is left. Pure.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, failed_with_answers, fan_out
from sopforge.checks import check
from sopforge.errors import UserError
from sopforge.families.probe.asker import Asker
from sopforge.families.probe.models.bottlenecks import BottleneckSet
from sopforge.families.probe.models.documents import Document
from sopforge.families.probe.models.sets import (
    AttackResult, DocumentSet, EvidenceSet, HardeningRound, PlanSet, Sample, SampleSet,
)
from sopforge.families.probe.models.world import WorldSet
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.stages.hardening import CAMOUFLAGE, READER, REVISE, SampleState, revise
from sopforge.families.probe.verify.attacks import action_attacks, search_attacks, search_result, set_p_value
from sopforge.families.probe.verify.judges import (
    CONVEYS_TEMPLATE, IDENTIFICATION_TEMPLATE, TITLE_ADVERSARY_TEMPLATE, ask_title_adversary,
)
from sopforge.families.probe.verify.shortcut import two_sample_tests
from sopforge.funnel import Funnel
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "AssemblyInputs", "attack_table", "datastore", "run"]

STAGE = "probe_assembly"
TEMPLATE_IDS = (TITLE_ADVERSARY_TEMPLATE, REVISE, CAMOUFLAGE, CONVEYS_TEMPLATE, READER, IDENTIFICATION_TEMPLATE)


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


def _action_result(name: str, picked: str, state: SampleState, alpha: float, detail: str) -> AttackResult:
    chance = 1 / len(state.persona.actions)
    hit = picked == state.solver.id
    return AttackResult(name=name, kind="action", picked=[picked], hits=int(hit), random=round(chance, 4),
                        p_value=round(chance if hit else 1.0, 6), solved=hit and chance < alpha, detail=detail)


def _attack(asker: Asker, state: SampleState, siblings: list[Document], rnd: int, options: ProbeSpec) -> Asker:
    """Every attack on the sample's current datastore (``state.results``); returns the asker of its adversary call."""
    child, docs, alpha = asker.child(), state.docs, options.attack_alpha
    true_ids = [d.id for d in state.tps]
    results = [search_result(name, scores, true_ids, len(docs), alpha)
               for name, scores in search_attacks(state.world, state.persona.actions, docs, siblings).items()]
    results += [_action_result(name, picked, state, alpha, why)
                for name, (picked, why) in action_attacks(state.persona.actions, docs).items()]
    guess = ask_title_adversary(child, f"{state.sid}-adversary-r{rnd}", state.world, state.persona.actions, docs,
                                len(true_ids))
    search = search_result("title_adversary", guess.documents, true_ids, len(docs), alpha, guess.reasoning)
    action = _action_result("title_adversary_action", guess.action, state, alpha, guess.reasoning)
    if search.hits and action.hits and search.p_value * action.p_value < alpha:  # right together, if not apart
        search.solved = action.solved = True
    results += [search, action]
    if state.persona.persona_adversary is not None:
        results.append(_action_result("persona_adversary", state.persona.persona_adversary.action, state, alpha,
                                      state.persona.persona_adversary.reasoning))
    state.results = results
    return child


def _set_level(states: list[SampleState], alpha: float) -> dict[str, float]:
    """Attack -> p-value of its total hits over ``states`` under random guessing."""
    names = list(dict.fromkeys(r.name for s in states for r in s.results))
    p_values = {}
    for name in names:
        rows = [next(r for r in s.results if r.name == name) for s in states if any(r.name == name for r in s.results)]
        sizes = [(len(s.docs), len(s.tps), len(s.persona.actions)) for s in states
                 if any(r.name == name for r in s.results)]
        p_values[name] = set_p_value(rows, sizes)
    return p_values


def _mark_set_level(states: list[SampleState], alpha: float) -> None:
    """An attack that beats random over the set is revised against in every sample it scored a hit on."""
    for name, p in _set_level(states, alpha).items():
        if p < alpha:
            for s in states:
                for r in s.results:
                    if r.name == name and r.hits:
                        r.set_level = True
                        r.detail = (r.detail + "; " if r.detail else "") + f"over the set it beats random (p={p:.3g})"


def _settle(states: list[SampleState], alpha: float) -> tuple[list[SampleState], dict[str, str]]:
    """The samples kept once the rounds are over, and why each other one is dropped.

    A sample an attack still solves on its own is dropped. Then, while an attack beats random over the
    kept set, the sample it scored most on (its lowest p-value) is dropped, so the set keeps as many
    samples as it can while every attack stays at chance.
    """
    reasons = {s.sid: "; ".join(f"{r.name} ({_how(r)})" for r in s.results if r.solved)
               for s in states if any(r.solved for r in s.results)}
    kept = [s for s in states if s.sid not in reasons]
    while kept:
        beaten = sorted((p, name) for name, p in _set_level(kept, alpha).items() if p < alpha)
        if not beaten:
            break
        p, name = beaten[0]
        worst = min(kept, key=lambda s: (next((r.p_value for r in s.results if r.name == name), 1.0), s.sid))
        result = next(r for r in worst.results if r.name == name)
        reasons[worst.sid] = (f"over the kept samples {name} still beats random (p={p:.3g}), and it scored most on "
                              f"this one ({_how(result)})")
        kept.remove(worst)
    return kept, reasons


def attack_table(states: list[SampleState], alpha: float, ratio: float) -> list[dict]:
    """Per attack over the kept samples: mean F1 (search) or hit rate (action) beside random's, and the set's p."""
    p_values, rows = _set_level(states, alpha), []
    for name in p_values:
        results = [r for s in states for r in s.results if r.name == name]
        search = results[0].kind == "search"
        score = sum((r.f1 or 0.0) if search else r.hits for r in results) / len(results)
        chance = sum(r.random for r in results) / len(results)
        rows.append({"attack": name, "kind": results[0].kind, "samples": len(results),
                     "score": round(score, 4), "random": round(chance, 4),
                     "ratio": round(score / chance, 2) if chance else None, "set_p_value": round(p_values[name], 4),
                     "near_random": p_values[name] >= alpha or (chance > 0 and score <= ratio * chance)})
    return rows


def _states(inputs: AssemblyInputs) -> list[SampleState]:
    states = []
    for sid in inputs.evidence.samples:
        plan = inputs.plans.of(sid)
        persona = inputs.bottlenecks.of(plan.persona_id)
        states.append(SampleState(
            sid=sid, index=plan.bottleneck_index, persona=persona, world=inputs.worlds.of(plan.persona_id), plan=plan,
            tps=inputs.evidence.kept(sample_id=sid), hns=inputs.hard_negatives.kept(sample_id=sid),
            distractors=inputs.distractors.kept(sample_id=sid)))
    return states


def run(inputs: AssemblyInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[SampleSet]:
    """Assemble every datastore, attack it, and harden the samples the attacks solve.

    Raises:
        UserError: a datastore cannot fit its evidence under the budget.
        ValidationFailed: no sample survives the attacks once the hardening rounds run out.
    """
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    options, funnel = inputs.options, Funnel()
    states, revised = _states(inputs), []
    for rnd in range(options.hardening_rounds + 1):
        for s in states:
            s.docs = datastore(s.sid, s.tps + s.hns + s.camouflage, s.distractors, options)
        for s, child in zip(states, fan_out(lambda s: _attack(asker, s, [d for o in states if o is not s and
                                                                       o.persona.persona_id == s.persona.persona_id
                                                                       for d in o.docs], rnd, options),
                                            states, "attacks")):
            asker.absorb(child)
        _mark_set_level(states, options.attack_alpha)
        for s in revised:
            still = [r.name for r in s.solved_by()]
            funnel.item("hardening", f"round {rnd}", s.sid, verified=not still, kept=not still,
                        reason="still solved by " + ", ".join(still))
        for s in states:
            s.rounds.append(HardeningRound(round=rnd, solved_by=[r.name for r in s.solved_by()]))
        # The persona-only adversary reads the world model and actions, which no revision of documents changes.
        solved = [s for s in states if any(r.name != "persona_adversary" for r in s.solved_by())]
        if not solved or rnd == options.hardening_rounds:
            break
        for s, (child, found, changed) in zip(solved, fan_out(lambda s: revise(asker, s, rnd + 1, options), solved,
                                                             "revision")):
            asker.absorb(child)
            funnel.extend(found)
            s.rounds[-1].revised = changed
        revised = solved
    kept, reasons = _settle(states, options.attack_alpha)
    for s in states:
        reason = f"still solved after {options.hardening_rounds} hardening round(s) by {reasons.get(s.sid, '')}"
        funnel.item("shortcut_gate", s.persona.difficulty, s.sid, verified=s in kept, kept=s in kept,
                    retried=len(s.rounds) > 1, reason=reason)
    if not kept:
        raise failed_with_answers(f"{STAGE}: every sample is still solved by a shortcut attack after "
                                  f"{options.hardening_rounds} hardening round(s) ("
                                  + "; ".join(f"{d.item}: {d.reason}" for d in funnel.drops if d.component ==
                                              "shortcut_gate")
                                  + "); raise probe.hardening_rounds or regenerate the evidence", [], asker.raw_texts)
    return asker.result(*_artifact(kept, states, funnel, options))


def _how(result: AttackResult) -> str:
    what = f"F1 {result.f1:.2f} vs random {result.random:.2f}" if result.kind == "search" else \
        f"picked the solver, chance {result.random:.3f}"
    return f"{what}, p={result.p_value:.3g}" + (f": {result.detail}" if result.detail else "")


def _artifact(kept: list[SampleState], states: list[SampleState], funnel: Funnel, options: ProbeSpec):
    documents: dict[str, Document] = {}
    samples = []
    for s in kept:
        documents.update({d.id: d for d in s.docs})
        samples.append(Sample(
            sample_id=s.sid, persona_id=s.persona.persona_id, difficulty=s.persona.difficulty, world_model=s.world,
            actions=s.persona.actions, datastore=[d.id for d in s.docs], bottleneck=s.persona.bottlenecks[s.index - 1],
            solver_id=s.solver.id, expected_parameters=s.plan.checklist.task_selection_step.parameters,
            checklist=s.plan.checklist, true_positives=[d.id for d in s.tps], hard_negatives=[d.id for d in s.hns],
            tokens=sum(d.tokens for d in s.docs), attacks=s.results, rounds=s.rounds))
    table = attack_table(kept, options.attack_alpha, options.max_attack_ratio)
    tp_ids = {d.id for s in kept for d in s.tps}
    tests = two_sample_tests([documents[i] for i in sorted(tp_ids)],
                             [d for i, d in sorted(documents.items()) if i not in tp_ids], alpha=options.alpha,
                             seed=options.seed)
    separable = [t for t in tests if t.separable]
    beaten = [r["attack"] for r in table if not r["near_random"]]
    artifact = SampleSet(samples=samples, documents=documents, attack_table=table, two_sample_tests=tests,
                         funnel=funnel.rows(), drops=funnel.drops)
    dropped = len(states) - len(kept)
    return artifact, [
        check(f"{STAGE}.shortcut_gate", dropped == 0, f"{dropped} of {len(states)} samples dropped: still solved by a "
              "shortcut attack after the hardening rounds (reasons in drops)",
              ok=f"all {len(kept)} samples survive every shortcut attack", severity="warning", kept=len(kept)),
        check(f"{STAGE}.attacks_near_random", not beaten,
              "attacks above random over the kept samples (beyond probe.max_attack_ratio and significant): "
              + ", ".join(beaten), ok=f"every attack stays near random over the {len(kept)} kept samples",
              severity="warning", table=table),
        check(f"{STAGE}.two_sample_tests", not separable and bool(tests),
              "true positives and distractors could not be compared (fewer than two of either)" if not tests else
              "true positives are separable from the other documents by " + ", ".join(
                  f"{t.feature} (p={t.p_value:.4f}; {t.true_positives:.2f} vs {t.distractors:.2f})" for t in separable),
              ok="no surface feature separates true positives from distractors", severity="warning")]
