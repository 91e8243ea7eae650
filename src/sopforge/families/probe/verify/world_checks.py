"""Checks of personas and world models (research/probe.md requirements 1-2)."""

from __future__ import annotations

from datetime import date

from sopforge.checks import CheckResult, check
from sopforge.context.model import BusinessContext
from sopforge.families.probe.models.world import OrgStructure, Persona, PersonalContext, Relationship
from sopforge.families.probe.verify.dates import check_as_of

__all__ = ["RELATIONSHIP_BANDS", "check_org", "check_personal", "check_personas", "check_relationships"]

# T4's counts per difficulty (L885-890).
RELATIONSHIP_BANDS = {"easy": (3, 5), "medium": (5, 8), "hard": (8, 12)}


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("&", " and ").split())


def check_personas(personas: list[Persona], context: BusinessContext, expected: int,
                   as_of: date | None = None) -> list[CheckResult]:
    """Count, distinct names, a role and sub-business that exist in the business context, and (given the
    world's ``as_of`` day) no later date told as past in a profile."""
    roles_text = _norm(next((s.body for s in context.sections if s.number == 4), ""))
    subs = {_norm(s.name) for s in context.sub_businesses}
    names = [_norm(p.name) for p in personas]
    unknown_roles = [p.role for p in personas if _norm(p.role) not in roles_text]
    unknown_subs = [p.sub_business for p in personas if _norm(p.sub_business) not in subs]
    return [
        check("probe_personas.count", len(personas) == expected, f"expected {expected} personas, got {len(personas)}",
              ok=f"{len(personas)} personas, as asked", expected=expected, got=len(personas)),
        check("probe_personas.distinct_names", len(set(names)) == len(names) and len({n.split()[-1] for n in names})
              == len(names), "persona names (and surnames) must all differ",
              ok=f"the {len(personas)} personas' names and surnames all differ", names=[p.name for p in personas]),
        check("probe_personas.roles_from_context", not unknown_roles,
              f"role(s) {unknown_roles} are not key roles of the business context (section 4); use a role "
              "named there", ok="every persona's role is a key role of the business context (section 4): "
              + ", ".join(sorted({p.role for p in personas})), unknown=unknown_roles),
        check("probe_personas.sub_business_from_context", not unknown_subs,
              f"sub-business(es) {unknown_subs} are not in the business context's section 2; use a name from it",
              ok="every persona's sub-business is in the business context's section 2: "
                 + ", ".join(sorted({p.sub_business for p in personas})), unknown=unknown_subs),
    ] + ([check_as_of("probe_personas.as_of", {f"{p.name}'s profile": p.about for p in personas}, as_of,
                      "every profile")] if as_of else [])


def check_org(org: OrgStructure, as_of: date | None = None) -> list[CheckResult]:
    checks = [check("probe_world.team_size", org.direct_reports <= org.team_size,
                    f"direct_reports ({org.direct_reports}) cannot exceed team_size ({org.team_size})",
                    ok=f"direct_reports ({org.direct_reports}) within team_size ({org.team_size})")]
    if as_of:
        checks.append(check_as_of("probe_world.org_as_of", {
            **{f"key process {i}": t for i, t in enumerate(org.key_processes, 1)},
            **{f"meeting {i}": t for i, t in enumerate(org.typical_meetings, 1)}}, as_of, "the organisation"))
    return checks


def check_personal(personal: PersonalContext, as_of: date | None = None) -> list[CheckResult]:
    checks = [check("probe_world.goals", len(personal.current_goals) >= 3,
                    f"give three current goals (T3 asks for three), got {len(personal.current_goals)}",
                    ok=f"{len(personal.current_goals)} current goals (T3 asks for three)")]
    if as_of:
        texts = {"work style": personal.work_style,
                 **{f"goal {i}": t for i, t in enumerate(personal.current_goals, 1)},
                 **{f"constraint {i}": t for i, t in enumerate(personal.constraints, 1)},
                 **{f"challenge {i}": t for i, t in enumerate(personal.biggest_challenges, 1)}}
        checks.append(check_as_of("probe_world.personal_as_of", texts, as_of, "the personal context"))
    return checks


def check_relationships(relationships: list[Relationship], persona: Persona, domain: str,
                        as_of: date | None = None) -> list[CheckResult]:
    """T4's difficulty band, unique names and surnames, never the persona, colleagues on the company domain,
    and (given ``as_of``) no later date told as past in what a relationship does or where it stands."""
    low, high = RELATIONSHIP_BANDS[persona.difficulty]
    names = [_norm(r.name) for r in relationships]
    surnames = [n.split()[-1] for n in names]
    wrong_domain = [r.email for r in relationships if r.type in ("colleague", "manager") and
                    not r.email.endswith("@" + domain)]
    return [
        check("probe_world.relationship_count", low <= len(relationships) <= high,
              f"a {persona.difficulty} persona has {low}-{high} relationships (T4), got {len(relationships)}",
              ok=f"{len(relationships)} relationships, within {low}-{high} for the {persona.difficulty} difficulty (T4)",
              got=len(relationships), band=[low, high]),
        check("probe_world.distinct_people", len(set(names)) == len(names) and len(set(surnames)) == len(surnames)
              and _norm(persona.name) not in names and _norm(persona.name).split()[-1] not in surnames,
              "every relationship needs its own full name and surname, different from the persona's (documents "
              "refer to people by surname)",
              ok=f"the {len(relationships)} relationships have their own full names and surnames, none the persona's",
              names=[r.name for r in relationships]),
        check("probe_world.company_addresses", not wrong_domain,
              f"colleagues and managers use the company domain {domain}: {wrong_domain}",
              ok=f"every colleague and manager uses the company domain {domain}", addresses=wrong_domain),
        check("probe_world.distinct_addresses", len({r.email for r in relationships}) == len(relationships),
              "every relationship needs its own e-mail address",
              ok=f"the {len(relationships)} relationships have {len(relationships)} different e-mail addresses"),
    ] + ([check_as_of("probe_world.relationships_as_of",
                      {f"relationship {r.name}": f"{r.interaction} {r.status}" for r in relationships}, as_of,
                      "the relationships")] if as_of else [])
