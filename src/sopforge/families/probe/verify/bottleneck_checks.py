"""Checks of bottlenecks (T6) and action spaces (T1): research/probe.md requirements 3-4.

The action-space rules are T1's own (L533-540, L702-710): exactly one action solves each
bottleneck, and no action names the people, organisations or details of a bottleneck. "Keywords"
are made concrete here (:func:`bottleneck_keywords`) so the rule can be checked without an LLM.

A keyword must be *distinctive* of the bottleneck. People's names, the company and identifiers
always are. Any other proper noun is one only when the persona's world does not use it: a
pharmacy's "Prior Authorization", "CoverMyMeds" or "Medicare Part D" are its everyday words (they
sit in its processes, tools and goals), and an action space that may not say them cannot describe
the persona's work at all; a drug or a payer that only this bottleneck names is a giveaway.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import date

from sopforge.checks import CheckResult, check
from sopforge.families.probe.models.bottlenecks import Action, Bottleneck
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.dates import check_as_of, mentioned_dates
from sopforge.families.probe.verify.document_checks import identifiers

__all__ = ["STOP_WORDS", "bottleneck_keywords", "check_actions", "check_bottlenecks", "content_words", "keyword_hits",
           "world_vocabulary"]

_MONTHS_DAYS = {m.lower() for m in (
    "January February March April May June July August September October November December Monday Tuesday "
    "Wednesday Thursday Friday Saturday Sunday Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec").split()}
STOP_WORDS = {"a", "an", "and", "are", "as", "at", "be", "because", "been", "but", "by", "for", "from", "has", "have",
         "he", "her", "his", "in", "into", "is", "it", "its", "not", "of", "on", "or", "she", "so", "that", "the",
         "their", "them", "they", "this", "to", "was", "were", "which", "who", "will", "with", "without", "yet",
         "until", "before", "after", "still", "only", "any", "all", "no", "than", "then", "there", "these", "those",
         "can", "cannot", "could", "would", "should", "must", "may", "one", "two", "three", "new", "next", "each"}
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def content_words(text: str) -> set[str]:
    """Lower-case words of three letters or more, stop words removed (lexical overlap)."""
    return {w for w in re.findall(r"[a-z][a-z'-]{2,}", text.lower()) if w not in STOP_WORDS}


def world_vocabulary(world: WorldModel) -> Counter[str]:
    """How often each word occurs in the persona's world outside its people's names (lower case):
    the organisation, its processes and meetings, the persona's goals, tools and challenges, and
    what each relationship does. A proper noun found here is the persona's everyday vocabulary."""
    names = {part.lower() for person in world.people() for part in person.split()}
    o, c = world.org, world.personal
    text = " ".join([
        world.persona.occupation, world.persona.about, o.company_type, o.department, o.reporting_to,
        *o.key_processes, *o.typical_meetings, c.work_style, *c.current_goals, *c.constraints,
        c.communication_preferences, *c.tools_used, *c.biggest_challenges,
        *(f"{r.role} {r.department} {r.interaction} {r.status}" for r in world.relationships)])
    return Counter(w for w in re.findall(r"[a-z][a-z0-9'-]*", text.lower()) if w not in names)


def bottleneck_keywords(bottleneck: Bottleneck, world: WorldModel) -> set[str]:
    """What an action must never say about this bottleneck (lower case): its distinctive words.

    Always: the names (full, first and last) of every person the description mentions, the company
    name and identifiers (``RX-4471``, ``ENG4521``; see :func:`identifiers`). Capitalised words that
    do not start a sentence (proper nouns such as a drug, payer or system name), months and days
    excepted, only when the persona's world never uses them (:func:`world_vocabulary`): those are
    this bottleneck's details, the others the persona's everyday work.
    """
    text = bottleneck.description
    lowered = text.lower()
    words: set[str] = set()
    for person in world.people():
        parts = person.split()
        if person.lower() in lowered or any(re.search(rf"\b{re.escape(p.lower())}\b", lowered) for p in parts[-1:]):
            words |= {person.lower(), *(p.lower() for p in parts if len(p) > 2)}
    words.add(world.org.company_name.lower())
    words |= {x.lower() for x in identifiers(text)}
    everyday = world_vocabulary(world)
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        tokens = re.findall(r"[A-Za-z][A-Za-z'-]*", sentence)
        for token in tokens[1:]:
            word = token.lower().removesuffix("'s")
            if token[0].isupper() and word not in _MONTHS_DAYS and word not in STOP_WORDS and not everyday[word]:
                words.add(word)
    return {w for w in words if len(w) > 1}


def keyword_hits(text: str, keywords: set[str]) -> list[str]:
    """The keywords ``text`` contains as whole words (case-insensitive), sorted."""
    lowered = text.lower().replace("_", " ")
    return sorted(k for k in keywords if re.search(rf"(?<![a-z0-9]){re.escape(k)}(?![a-z0-9])", lowered))


def _each(n: int) -> str:
    """'the bottleneck' or 'each of the n bottlenecks': what a passing check says holds for them."""
    return "the bottleneck" if n == 1 else f"each of the {n} bottlenecks"


def check_bottlenecks(bottlenecks: list[Bottleneck], world: WorldModel, expected: int) -> list[CheckResult]:
    """Count, T6's diversity (types, people), real names, a dated or identified artifact, 2-3 sentences, and
    dates that agree with the world's as-of day: a deadline after it, nothing after it told as past."""
    names = {r.name.lower() for r in world.relationships}
    surnames = {r.name.split()[-1].lower() for r in world.relationships}
    unknown_primary = [b.primary_person for b in bottlenecks if b.primary_person.lower() not in names]
    nameless = [i for i, b in enumerate(bottlenecks, 1)
                if not any(re.search(rf"\b{re.escape(s)}\b", b.description.lower()) for s in surnames)]
    undated = [i for i, b in enumerate(bottlenecks, 1) if not re.search(r"\d", b.description)]
    sentences = [len(_SENTENCE_END.findall(b.description.strip())) for b in bottlenecks]
    long = [i for i, n in enumerate(sentences, 1) if n > 3]
    types = Counter(b.type for b in bottlenecks)
    people = Counter(b.primary_person.lower() for b in bottlenecks)
    as_of = date.fromisoformat(world.today)
    no_deadline = [i for i, b in enumerate(bottlenecks, 1) if not any(d > as_of for _, d in mentioned_dates(b.description))]
    return [
        check("probe_bottlenecks.count", len(bottlenecks) == expected,
              f"expected {expected} bottlenecks, got {len(bottlenecks)}",
              ok=f"{len(bottlenecks)} bottleneck{'' if len(bottlenecks) == 1 else 's'}, as asked",
              expected=expected, got=len(bottlenecks)),
        check("probe_bottlenecks.primary_person_known", not unknown_primary,
              f"primary_person must be one of the relationships, by full name: {unknown_primary}",
              ok="every primary person is a relationship, by full name: "
                 + ", ".join(sorted({b.primary_person for b in bottlenecks}))),
        check("probe_bottlenecks.real_names", not nameless,
              f"bottleneck(s) {nameless} name nobody from the relationships (T6 rule 1: REAL NAMES)",
              ok=f"{_each(len(bottlenecks))} names someone from the relationships"),
        check("probe_bottlenecks.specific", not undated,
              f"bottleneck(s) {undated} give no date, deadline or identifier (T6 rules 2-3)",
              ok=f"{_each(len(bottlenecks))} gives a date, deadline or identifier"),
        check("probe_bottlenecks.length", not long, f"bottleneck(s) {long} are longer than three sentences",
              ok=f"every bottleneck has at most three sentences (longest {max(sentences, default=0)})"),
        check("probe_bottlenecks.distinct_types", all(n == 1 for n in types.values()) or len(bottlenecks) > 6,
              f"each bottleneck needs a different type (T6 diversity): {dict(types)}",
              ok=(f"no type repeats: {', '.join(sorted(types))}" if all(n == 1 for n in types.values()) else
                  f"{len(types)} types for {len(bottlenecks)} bottlenecks (repeats allowed beyond six): {dict(types)}")),
        check("probe_bottlenecks.distinct_people", all(n == 1 for n in people.values()),
              f"each bottleneck needs a different primary person (T6 diversity): {dict(people)}",
              ok="no primary person repeats: " + ", ".join(sorted(b.primary_person for b in bottlenecks))),
        check("probe_bottlenecks.deadline_ahead", not no_deadline,
              f"bottleneck(s) {no_deadline} name no date after today ({world.today}); give the deadline as a date "
              "(YYYY-MM-DD) still ahead, so the problem is current",
              ok=f"{_each(len(bottlenecks))} has a deadline after today ({world.today})"),
        check_as_of("probe_bottlenecks.as_of", {f"bottleneck {i}": b.description for i, b in enumerate(bottlenecks, 1)},
                    as_of, "every bottleneck"),
    ]


def check_actions(actions: list[Action], bottlenecks: list[Bottleneck], world: WorldModel,
                  expected: int) -> list[CheckResult]:
    """T1's rules: the count, unique ids, exactly one solver per bottleneck, no bottleneck keywords anywhere."""
    ids = Counter(a.id for a in actions)
    solvers = Counter(a.solves_bottleneck for a in actions if a.solves_bottleneck is not None)
    n = len(bottlenecks)
    wrong_solvers = {i: solvers.get(i, 0) for i in range(1, n + 1) if solvers.get(i, 0) != 1}
    out_of_range = sorted(i for i in solvers if i > n)
    leaks = {}
    for index, b in enumerate(bottlenecks, 1):
        keywords = bottleneck_keywords(b, world)
        for a in actions:
            hits = keyword_hits(a.text(), keywords)
            if hits:
                leaks[f"{a.id} / bottleneck {index}"] = hits
    overlap = []
    for index, b in enumerate(bottlenecks, 1):
        solver = next((a for a in actions if a.solves_bottleneck == index), None)
        if solver is None:
            continue
        words = content_words(b.description)
        own = len(words & content_words(solver.description))
        most_other = max((len(words & content_words(a.description)) for a in actions if a is not solver), default=0)
        if own > most_other + 1:
            overlap.append(f"{solver.id} shares {own} words with bottleneck {index}, other actions at most {most_other}")
    return [
        check("probe_actions.count", len(actions) == expected, f"expected exactly {expected} actions, got {len(actions)}",
              ok=f"{len(actions)} actions, as asked", expected=expected, got=len(actions)),
        check("probe_actions.unique_ids", all(c == 1 for c in ids.values()),
              f"action ids must be unique: {[i for i, c in ids.items() if c > 1]}", ok=f"{len(ids)} unique action ids"),
        check("probe_actions.one_solver_each", not wrong_solvers and not out_of_range,
              "exactly one action must solve each bottleneck (solves_bottleneck = its 1-based number); "
              f"solvers per bottleneck that are not 1: {wrong_solvers}" + (f"; no bottleneck {out_of_range}" if out_of_range else ""),
              ok=f"exactly one action solves {_each(n)}", wrong=wrong_solvers, out_of_range=out_of_range),
        check("probe_actions.no_bottleneck_keywords", not leaks,
              "actions must not name the people, organisation or details of a bottleneck (T1 rule 5): "
              + "; ".join(f"{k}: {', '.join(v)}" for k, v in leaks.items()),
              ok=f"all {len(actions)} actions name no person, organisation or detail of a bottleneck", leaks=leaks),
        check("probe_actions.no_lexical_giveaway", not overlap,
              "a solver's description shares more words with its bottleneck than any other action does: "
              + "; ".join(overlap), ok="no solver's description shares notably more words with its bottleneck "
              "than the other actions' descriptions do", severity="warning"),
    ]
