"""The LLM judges PROBE stages and scorers ask: f(d), solver uniqueness, T24 and T25.

Each judge is one ``ask_until_valid`` conversation through an :class:`~sopforge.families.probe.asker.Asker`
(so its raw answer is kept with the stage's, or returned to a scorer), answering JSON in ``<verdict>``.
"""

from __future__ import annotations

import json
from typing import Any

from sopforge.families.probe.asker import Asker, numbered
from sopforge.families.probe.models.bottlenecks import Action, SolverVerdict
from sopforge.families.probe.models.documents import ParsedDocument
from sopforge.families.probe.models.documents import Document
from sopforge.families.probe.models.verdicts import (
    AdversaryAnswer, ConveysVerdict, IdentificationVerdict, ParameterVerdict, PersonaAdversaryAnswer,
)
from sopforge.families.probe.models.world import WorldModel, parse_json_block
from sopforge.parsing import ParseError

__all__ = ["CONVEYS_TEMPLATE", "IDENTIFICATION_TEMPLATE", "PARAMETERS_TEMPLATE", "PERSONA_ADVERSARY_TEMPLATE",
           "SOLVER_TEMPLATE", "TITLE_ADVERSARY_TEMPLATE", "actions_text", "ask_conveys", "ask_identification",
           "ask_parameters", "ask_persona_adversary", "ask_solver", "ask_title_adversary", "surface_view"]

CONVEYS_TEMPLATE = "probe/conveys_judge"
TITLE_ADVERSARY_TEMPLATE = "probe/adversary"
PERSONA_ADVERSARY_TEMPLATE = "probe/persona_adversary"
SOLVER_TEMPLATE = "probe/solver_judge"
IDENTIFICATION_TEMPLATE = "probe/judge_identification"
PARAMETERS_TEMPLATE = "probe/judge_parameters"


def actions_text(actions: list[Action]) -> str:
    """The action space as an agent sees it: id, type, description, constraints, required parameters."""
    return "\n".join(f"- {a.id} ({a.type}): {a.description} Constraints: {', '.join(a.constraints) or 'none'}. "
                     f"Required parameters: {', '.join(a.params_schema.required)}." for a in actions)


def ask_conveys(asker: Asker, item: str, world: WorldModel, bottlenecks: list[str],
                doc: ParsedDocument, retry_reasons: str | None = None) -> ConveysVerdict:
    """Which of ``bottlenecks`` (numbered from 1) the document carries evidence of; asked blind to its role."""
    n = len(bottlenecks)

    def parse(raw: str) -> tuple[ConveysVerdict, list]:
        verdict = parse_json_block(raw, "verdict", ConveysVerdict)
        bad = [i for i in verdict.evidence_of if not 1 <= i <= n]
        if bad:
            raise ParseError(f"evidence_of lists {bad}, but the bottlenecks are numbered 1 to {n}")
        return verdict, []

    return asker.ask(item, CONVEYS_TEMPLATE, {
        "world_model": world.to_prompt_text(), "bottlenecks": numbered(bottlenecks), "document_type": doc.kind,
        "document": doc.text}, parse, keep_checks=False, retry_reasons=retry_reasons)


def ask_solver(asker: Asker, item: str, world: WorldModel, actions: list[Action], bottleneck: str) -> SolverVerdict:
    """Which single action resolves ``bottleneck``, and which others would also resolve it."""
    ids = {a.id for a in actions}

    def parse(raw: str) -> tuple[SolverVerdict, list]:
        verdict = parse_json_block(raw, "verdict", SolverVerdict)
        unknown = [i for i in [verdict.resolving_action, *verdict.also_resolving] if i not in ids]
        if unknown:
            raise ParseError(f"unknown action id(s) {unknown}: answer with ids from the list")
        return verdict, []

    return asker.ask(item, SOLVER_TEMPLATE, {"world_model": world.to_prompt_text(), "actions": actions_text(actions),
                                             "bottleneck": bottleneck}, parse, keep_checks=False)


def ask_identification(asker: Asker, item: str, world: WorldModel, identified: str,
                       actual: str) -> tuple[IdentificationVerdict, str]:
    """T24: is ``identified`` the ``actual`` bottleneck? Returns the verdict and the judge's raw answer."""
    verdict = asker.ask(item, IDENTIFICATION_TEMPLATE, {
        "persona_name": world.persona.name, "company_name": world.org.company_name,
        "department": world.org.department, "team_size": str(world.org.team_size),
        "actual_bottleneck": actual, "identified_bottleneck": identified},
        lambda raw: (parse_json_block(raw, "verdict", IdentificationVerdict), []), keep_checks=False)
    return verdict, asker.last_raw


def ask_parameters(asker: Asker, item: str, world: WorldModel, bottleneck: str, evidence: list[ParsedDocument],
                   action_id: str, selected: dict[str, Any], expected: dict[str, Any]) -> tuple[ParameterVerdict, str]:
    """T25: would the agent's parameters for the (correct) action resolve the bottleneck?"""
    relationships = "\n".join(f"- {r.name} ({r.type}): {r.department or 'External'} - {r.email}"
                              for r in world.relationships[:5])
    shown = "\n".join(f"- {d.kind}: {d.title}\n  Key info: {d.body[:100]}..." for d in evidence[:3]) \
        or "- No specific evidence items provided for context"
    verdict = asker.ask(item, PARAMETERS_TEMPLATE, {
        "bottleneck": bottleneck, "company_name": world.org.company_name, "department": world.org.department,
        "persona_name": world.persona.name, "relationships": relationships, "evidence": shown,
        "action_id": action_id, "selected_parameters": json.dumps(selected, indent=2, ensure_ascii=False),
        "expected_parameters": json.dumps(expected, indent=2, ensure_ascii=False)},
        lambda raw: (parse_json_block(raw, "verdict", ParameterVerdict), []), keep_checks=False)
    return verdict, asker.last_raw


def surface_view(docs: list[Document]) -> str:
    """What the title adversary sees: type, title, sender, date and length of each document; never the body."""
    return "\n".join(f"- {d.id} | {d.kind} | {d.title} | {d.sender} | {d.date} | {d.tokens} tokens" for d in docs)


def ask_title_adversary(asker: Asker, item: str, world: WorldModel, actions: list[Action], docs: list[Document],
                        num_true: int) -> AdversaryAnswer:
    """The surface-only adversary: |T| documents and an action from titles, senders, dates, lengths and action ids."""
    ids, action_ids = {d.id for d in docs}, {a.id for a in actions}

    def parse(raw: str) -> tuple[AdversaryAnswer, list]:
        answer = parse_json_block(raw, "verdict", AdversaryAnswer)
        unknown = [i for i in answer.documents if i not in ids] + ([answer.action] if answer.action not in action_ids
                                                                    else [])
        if unknown:
            raise ParseError(f"unknown id(s) {unknown}: answer with document and action ids from the lists")
        return answer, []

    return asker.ask(item, TITLE_ADVERSARY_TEMPLATE, {
        "persona": f"{world.persona.name} ({world.persona.occupation}, {world.org.company_name})",
        "actions": "\n".join(f"- {a.id} ({a.type})" for a in actions), "documents": surface_view(docs),
        "num_true": str(num_true)}, parse, keep_checks=False)


def ask_persona_adversary(asker: Asker, item: str, world: WorldModel, actions: list[Action]) -> PersonaAdversaryAnswer:
    """The persona-only adversary: the resolving action guessed from the world model and the actions alone."""
    action_ids = {a.id for a in actions}

    def parse(raw: str) -> tuple[PersonaAdversaryAnswer, list]:
        answer = parse_json_block(raw, "verdict", PersonaAdversaryAnswer)
        if answer.action not in action_ids:
            raise ParseError(f"unknown action id {answer.action!r}: answer with an id from the list")
        return answer, []

    return asker.ask(item, PERSONA_ADVERSARY_TEMPLATE, {"world_model": world.to_prompt_text(),
                                                        "actions": actions_text(actions)}, parse, keep_checks=False)
