"""Checks of the checklist (T7) and the evidence plan (T8): research/probe.md requirements 5-6."""

from __future__ import annotations

from sopforge.checks import CheckResult, check
from sopforge.families.probe.models.bottlenecks import Action
from sopforge.families.probe.models.sets import Checklist, EvidencePlanEntry
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.values import ExpectedValue, missing_values

__all__ = ["check_checklist", "check_plan", "names_system"]


def names_system(named: str, systems: list[str]) -> bool:
    """Whether ``named`` is one of ``systems``, whole or by the name before its qualifier: T12 lists a system as
    "Patient Care shared drive, 'Flagship_MedSync_March.xlsx'" or "Pharmacy management system (renewal
    report)", and a plan that writes "Patient Care shared drive" names it (an independent answerer's plan was
    refused for that)."""
    wanted = " ".join(named.lower().split()).strip(" .'\"")
    for system in systems:
        full = " ".join(system.lower().split())
        rest = full[len(wanted):].lstrip() if full.startswith(wanted) else None
        if wanted == full or (len(wanted) > 3 and rest and rest[0] in ",(:-\u2013\u2014"):
            return True
    return False


def check_checklist(checklist: Checklist, solver: Action) -> list[CheckResult]:
    """Step 3 selects the solver and fills exactly its required parameters, each with a value."""
    step = checklist.task_selection_step
    required = set(solver.params_schema.required)
    given = set(step.parameters)
    empty = sorted(k for k, v in step.parameters.items() if v in (None, "", [], {}))
    return [
        check("probe_plans.checklist_action", step.action_id == solver.id,
              f"task_selection_step.action_id must be {solver.id!r} (the action that resolves this bottleneck), "
              f"got {step.action_id!r}",
              ok=f"task_selection_step.action_id is {solver.id!r}, the action that resolves this bottleneck"),
        check("probe_plans.expected_parameters", given == required and not empty,
              f"task_selection_step.parameters must give a value to exactly the required parameters of "
              f"{solver.id} ({', '.join(sorted(required))}); missing {sorted(required - given)}, "
              f"unknown {sorted(given - required)}, empty {empty}",
              ok=f"task_selection_step.parameters give a value to exactly the {len(required)} required parameters "
                 f"of {solver.id} ({', '.join(sorted(required))})"),
    ]


def check_plan(plan: list[EvidencePlanEntry], world: WorldModel, expected: int,
               values: list[ExpectedValue] = (), systems: list[str] = ()) -> list[CheckResult]:
    """T8: the requested count, distinct roles, mixed sources, creators from the world model, and every date,
    identifier and amount of the expected parameters planned into some document's key information."""
    people = {p.lower() for p in world.people()}
    strangers = [e.sender_or_creator for e in plan if e.sender_or_creator.lower() not in people]
    roles = [e.evidence_role.lower().strip() for e in plan]
    kinds = {e.document_type for e in plan}
    unplanned = missing_values(list(values), [e.key_information for e in plan])
    odd_sources = [e.source_system for e in plan if e.source_system and (not names_system(e.source_system, systems)
                                                                         or e.document_type != "document")]
    return [
        check("probe_plans.plan_count", len(plan) == expected,
              f"plan exactly {expected} documents, got {len(plan)}", ok=f"{len(plan)} documents planned, as asked",
              expected=expected, got=len(plan)),
        check("probe_plans.distinct_roles", len(set(roles)) == len(roles),
              "each document must cover a different aspect (evidence_role) of the bottleneck",
              ok=f"each of the {len(plan)} documents covers a different aspect (evidence_role) of the bottleneck"),
        check("probe_plans.mixed_sources", len(plan) < 2 or len(kinds) >= 2,
              "spread the evidence over at least two document types (email, calendar, document)",
              ok=f"the evidence is spread over {len(kinds)} document types: {', '.join(sorted(kinds))}"
              if len(kinds) >= 2 else f"a single planned document, of type {', '.join(kinds) or 'none'}"),
        check("probe_plans.known_creators", not strangers,
              f"sender_or_creator must be the persona or a relationship, by full name: {strangers}",
              ok=f"each of the {len(plan)} documents is by the persona or a relationship"),
        check("probe_plans.source_systems", not odd_sources,
              f"source_system must name one of the systems listed (T12), on a document entry: {odd_sources}",
              ok="every record-type document names one of the listed systems" if any(e.source_system for e in plan)
              else "no document is planned as a system record"),
        check("probe_plans.values_planned", not unplanned,
              "the agent must find every date, identifier and amount of the expected parameters in the evidence; "
              "put each, written exactly, in the key_information of the document that will carry it: missing "
              + ", ".join(v.describe() for v in unplanned),
              ok=f"each of the {len(values)} dates, identifiers and amounts of the expected parameters is planned "
                 "into a document" if values else "the expected parameters hold no date, identifier or amount"),
    ]
