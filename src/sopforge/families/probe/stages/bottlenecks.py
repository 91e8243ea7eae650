"""Stage 'probe_bottlenecks': bottlenecks (T6) and the action space (T1) of each persona, solvers proven unique.

Per persona: one T6 batch (``probe/bottlenecks``), one T1 answer (``probe/actions``) checked by
code (exactly one solver per bottleneck, no distinctive bottleneck word in any action), then one
solver judge per bottleneck (``probe/solver_judge``): given only the bottleneck and the action
list, it must pick the labelled solver and no other action. Then the persona-only adversary
(``probe/persona_adversary``) guesses the resolving action from the world model and the actions
alone; a guess that is a bottleneck's solver where random guessing (1/|A|) would be right less
often than ``probe.attack_alpha`` gives that bottleneck away. When a judge disagrees or the
adversary beats chance, T1 is asked again with the reasons (a new cycle, up to ``max_retries``); a
bottleneck still failing is dropped (no sample is built for it) and counted in the funnel. Its
action stays in the list as a plausible non-solver, as the paper's other-bottleneck solvers do.

Each kept bottleneck then gets T12's systems (``probe/dynamic_sources``): where its evidence would live
beyond e-mail and the calendar; its evidence and its sample's distractors may be records exported
from them. This is the family's review gate: a reviewer sees every bottleneck beside its solver. Pure.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, failed_with_answers
from sopforge.checks import check
from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import (
    ActionList, BottleneckList, BottleneckSet, PersonaBottlenecks, SolverVerdict, SourceList,
)
from sopforge.families.probe.models.world import WorldModel, WorldSet, parse_json_block
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.verify.bottleneck_checks import check_actions, check_bottlenecks
from sopforge.families.probe.verify.judges import PERSONA_ADVERSARY_TEMPLATE, SOLVER_TEMPLATE, ask_persona_adversary, ask_solver
from sopforge.funnel import Funnel
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings

__all__ = ["STAGE", "TEMPLATE_IDS", "BottlenecksInputs", "persona_leaks", "run", "solver_failures"]

STAGE = "probe_bottlenecks"
TEMPLATE_IDS = ("probe/bottlenecks", "probe/actions", SOLVER_TEMPLATE, PERSONA_ADVERSARY_TEMPLATE, "probe/dynamic_sources")


class BottlenecksInputs(BaseModel):
    theme_slug: str = Field(description="First part of every call key.")
    worlds: WorldSet = Field(description="Every persona's world model.")
    options: ProbeSpec = Field(description="The theme's probe section (counts per difficulty, retries).")


def solver_failures(persona: PersonaBottlenecks) -> dict[int, str]:
    """Bottleneck index -> why its labelled solver is not proven unique by the judge's verdict."""
    failures = {}
    for index in range(1, len(persona.bottlenecks) + 1):
        verdict = persona.verdicts.get(str(index))
        solver = persona.solver(index).id
        if verdict is None:
            failures[index] = "solver not unique: no verdict"
        elif verdict.resolving_action != solver:
            failures[index] = (f"solver not unique: the judge says {verdict.resolving_action} resolves bottleneck "
                               f"{index}, not {solver}: {verdict.reason}")
        elif [a for a in verdict.also_resolving if a != solver]:
            failures[index] = (f"solver not unique: actions {verdict.also_resolving} would also resolve bottleneck "
                               f"{index}: {verdict.reason}")
    return failures


def persona_leaks(persona: PersonaBottlenecks, alpha: float) -> dict[int, str]:
    """Bottleneck index -> why the persona-only adversary's guess gives its solver away (none when random guessing
    among the |A| actions would pick it often enough: 1/|A| at least ``alpha``)."""
    guess = persona.persona_adversary
    if guess is None or 1 / len(persona.actions) >= alpha:
        return {}
    return {i: (f"the action can be read off the world model and the action list: an adversary that sees no document "
                f"picks {guess.action}, its solver (chance {1 / len(persona.actions):.3f}): {guess.reasoning}")
            for i in range(1, len(persona.bottlenecks) + 1) if persona.solver(i).id == guess.action}


def _persona(asker: Asker, world: WorldModel, options: ProbeSpec, funnel: Funnel) -> PersonaBottlenecks:
    p = world.persona
    n_bottlenecks, n_actions = options.bottlenecks.of(p.difficulty), options.actions.of(p.difficulty)
    shared = {"world_model": world.to_prompt_text(), "difficulty": p.difficulty}
    bottlenecks = asker.ask(f"{p.id}-bottlenecks", TEMPLATE_IDS[0], {**shared, "num_bottlenecks": str(n_bottlenecks)},
                            lambda raw: (b := parse_json_block(raw, "bottlenecks", BottleneckList, key="bottlenecks"),
                                         check_bottlenecks(b.bottlenecks, world, n_bottlenecks))).bottlenecks
    reasons: str | None = None
    for cycle in range(1, options.max_retries + 2):
        actions = asker.ask(f"{p.id}-actions-c{cycle}", TEMPLATE_IDS[1], {
            **shared, "bottlenecks": numbered([b.description for b in bottlenecks]), "num_actions": str(n_actions)},
            lambda raw: (a := parse_json_block(raw, "actions", ActionList, key="actions"),
                         check_actions(a.actions, bottlenecks, world, n_actions)),
            retry_reasons=reasons).actions
        persona = PersonaBottlenecks(persona_id=p.id, difficulty=p.difficulty, bottlenecks=bottlenecks, actions=actions)
        for index, b in enumerate(bottlenecks, 1):
            verdict: SolverVerdict = ask_solver(asker, f"{p.id}-b{index}-solver-c{cycle}", world, actions, b.description)
            persona.verdicts[str(index)] = verdict
        failures = solver_failures(persona)
        persona.persona_adversary = ask_persona_adversary(asker, f"{p.id}-persona-adversary-c{cycle}", world, actions)
        for index, reason in persona_leaks(persona, options.attack_alpha).items():
            failures.setdefault(index, reason)
        if not failures or cycle == options.max_retries + 1:
            break
        reasons = "; ".join(failures.values())
    persona.kept = [i for i in range(1, len(bottlenecks) + 1) if i not in failures]
    for index in persona.kept:
        persona.sources[str(index)] = asker.ask(
            f"{p.id}-b{index}-sources", TEMPLATE_IDS[4], {"world_model": shared["world_model"],
                                                         "bottleneck": bottlenecks[index - 1].description},
            lambda raw: (s := parse_json_block(raw, "sources", SourceList), [check(
                "probe_bottlenecks.sources", 3 <= len(s.sources) <= 5, f"name 3-5 systems (T12), got {len(s.sources)}",
                ok=f"{len(s.sources)} systems, within T12's 3-5")])).sources
    for index, b in enumerate(bottlenecks, 1):
        funnel.item("bottleneck", b.type, f"{p.id}-b{index}", verified=index not in failures,
                    kept=index not in failures, retried=cycle > 1,
                    reason=failures.get(index, ""))
    return persona


def run(inputs: BottlenecksInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None, **_: object) -> StageResult[BottleneckSet]:
    """Bottlenecks and actions for every persona; the solver of every kept bottleneck is judged unique.

    Raises:
        ValidationFailed: an answer never passed its checks, or no bottleneck of any persona has a unique solver.
    """
    asker = Asker(STAGE, inputs.theme_slug, TEMPLATE_IDS, llm=llm, settings=settings, model=model,
                  temperature=temperature, feedback=feedback, registry=registry)
    funnel = Funnel()
    personas = [_persona(asker, w, inputs.options, funnel) for w in inputs.worlds.worlds]
    artifact = BottleneckSet(personas=personas, funnel=funnel.rows(), drops=funnel.drops)
    kept = len(artifact.samples())
    if not kept:
        reasons = "; ".join(d.reason for d in funnel.drops)
        raise failed_with_answers(f"{STAGE}: no bottleneck has a unique solver that stays hidden ({reasons}); "
                                  "regenerate with feedback or change the model", [], asker.raw_texts)
    total = sum(len(p.bottlenecks) for p in personas)
    return asker.result(artifact, [check(f"{STAGE}.solvers_unique", kept == total,
                                         f"{total - kept} of {total} bottlenecks dropped: their solver is not unique "
                                         "or the world model gives it away (reasons in drops)",
                                         ok=f"all {total} bottlenecks kept: each has a unique solver that the world "
                                            "model and action list do not give away",
                                         severity="warning", kept=kept, total=total)])
