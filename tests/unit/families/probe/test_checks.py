"""Bad inputs the PROBE checks must refuse: a solver that is not unique or names the bottleneck, a document
that leaks a bottleneck, a datastore over its budget, and surface features that separate evidence."""

from __future__ import annotations

import pytest

from sopforge.errors import UserError
from sopforge.families.probe.models.bottlenecks import Action, Bottleneck
from sopforge.families.probe.models.documents import Document, document_id, parse_document
from sopforge.families.probe.stages.assembly import datastore
from sopforge.families.probe.verify.bottleneck_checks import bottleneck_keywords, check_actions
from sopforge.families.probe.verify.document_checks import check_document, identifiers
from sopforge.families.probe.verify.attacks import bm25_scores
from sopforge.families.probe.verify.shortcut import two_sample_tests
from sopforge.parsing import ParseError
from conftest import pharmacy_world


def failed(checks) -> dict[str, str]:
    return {c.name: c.message for c in checks if not c.passed}


def test_the_recorded_action_spaces_pass(worlds, bottleneck_set):
    for persona in bottleneck_set.personas:
        world = worlds.of(persona.persona_id)
        assert failed(check_actions(persona.actions, persona.bottlenecks, world, len(persona.actions))) == {}


def test_a_second_solver_for_one_bottleneck_is_refused(worlds, bottleneck_set):
    persona = bottleneck_set.of("p2")
    actions = [a.model_copy(update={"solves_bottleneck": 1}) if a.id == "escalate_operational_risk" else a
               for a in persona.actions]
    problems = failed(check_actions(actions, persona.bottlenecks, worlds.of("p2"), 8))
    assert "probe_actions.one_solver_each" in problems and "{1: 2}" in problems["probe_actions.one_solver_each"]


def test_a_solver_that_names_the_bottleneck_is_refused(worlds, bottleneck_set):
    persona = bottleneck_set.of("p2")
    leaky = persona.actions[1].model_copy(update={"description": "Ask Dr. Siddiqui to sign the form for RX-7730915."})
    problems = failed(check_actions([persona.actions[0], leaky, *persona.actions[2:]], persona.bottlenecks,
                                    worlds.of("p2"), 8))
    message = problems["probe_actions.no_bottleneck_keywords"]
    assert "siddiqui" in message and "rx-7730915" in message


def test_keywords_are_names_identifiers_and_proper_nouns_not_ordinary_words(worlds, bottleneck_set):
    keywords = bottleneck_keywords(bottleneck_set.of("p1").bottlenecks[0], worlds.of("p1"))
    assert {"alan whitaker", "whitaker", "rx-4471203", "jensen"} <= keywords
    assert not {"90-day", "lisinopril", "renewal", "march"} & keywords
    assert identifiers("RX-88213, CHG-20418 and ENG4521 in a 90-day, 24-hour window on 2026-03-02") == {
        "RX-88213", "CHG-20418", "ENG4521"}


ORTIZ_BOTTLENECK = ("Dr. Lena Ortiz has not returned the Prior Authorization for Gerald Huang's Eliquis (PA-55821) in "
                    "CoverMyMeds, and his Medicare Part D claim will reject after 2026-03-09. Omar Haddad cannot "
                    "release the refill until she signs.")


def action(id_: str, description: str, params: list[str], solves: int | None = None) -> Action:
    return Action(id=id_, type="send_email", description=description, params_schema={"required": params},
                  solves_bottleneck=solves)


def test_everyday_domain_words_are_not_bottleneck_keywords():
    """Capitalised words the persona's world uses every day (its processes, tools, goals) may appear in actions;
    only the bottleneck's own details may not. The old check banned every capitalised word of the bottleneck."""
    world = pharmacy_world()
    bottleneck = Bottleneck(description=ORTIZ_BOTTLENECK, primary_person="Lena Ortiz", urgency="high", type="approval")
    keywords = bottleneck_keywords(bottleneck, world)
    assert {"lena ortiz", "ortiz", "pa-55821", "eliquis", "huang", "gerald", "omar haddad"} <= keywords
    assert not {"prior", "authorization", "covermymeds", "medicare", "part", "dr"} & keywords
    everyday = [
        action("chase_pending_authorization", "Follow up on a pending Prior Authorization in CoverMyMeds with the "
               "prescriber's office and record the answer.", ["prescriber_office", "request_reference", "follow_up_by"], 1),
        action("reconcile_part_d_rejects", "Work through this week's Medicare Part D rejects in PioneerRx and resubmit "
               "the ones that can be fixed at the counter.", ["reject_batch", "owner"]),
    ]
    problems = failed(check_actions(everyday, [bottleneck], world, 2))
    assert "probe_actions.no_bottleneck_keywords" not in problems, problems


def test_an_action_naming_the_bottlenecks_own_details_is_still_refused():
    world = pharmacy_world()
    bottleneck = Bottleneck(description=ORTIZ_BOTTLENECK, primary_person="Lena Ortiz", urgency="high", type="approval")
    leaky = [action("call_prescriber", "Phone Dr. Ortiz about the Eliquis form PA-55821.", ["phone_number"], 1),
             action("file_notes", "File the day's counselling notes.", ["notes"])]
    message = failed(check_actions(leaky, [bottleneck], world, 2))["probe_actions.no_bottleneck_keywords"]
    assert "ortiz" in message and "eliquis" in message and "pa-55821" in message
    assert "covermymeds" not in message


EMAIL = """From: Priya Raman <priya.raman@brightwaterrx.com>
To: Maya Castellanos <maya.castellanos@brightwaterrx.com>
Subject: Weekly numbers
Date: 2026-03-01 09:00

Hi Maya, {body}
Thanks, Priya"""


def email(body: str) -> str:
    return EMAIL.format(body=body + " " + "The weekly numbers look fine and the queue is short today. " * 8)


def test_a_distractor_carrying_a_bottleneck_identifier_leaks_it(worlds, bottleneck_set):
    world, persona = worlds.of("p1"), bottleneck_set.of("p1")
    doc = parse_document(email("Also, RX-4471203 is done."), "email")
    problems = failed(check_document(doc, world, words=(60, 220), bottlenecks=persona.bottlenecks, own=None))
    assert "bottleneck 1 (RX-4471203)" in problems["probe_document.no_foreign_identifiers"]
    as_evidence = check_document(doc, world, words=(60, 220), bottlenecks=persona.bottlenecks, own=1)
    assert "probe_document.no_foreign_identifiers" not in failed(as_evidence)


def test_strangers_dates_and_lengths_are_refused(worlds, bottleneck_set):
    world, persona = worlds.of("p1"), bottleneck_set.of("p1")
    stranger = parse_document(email("Hello.").replace("maya.castellanos@brightwaterrx.com", "someone@else.com")
                              .replace("2026-03-01", "2024-01-01"), "email")
    problems = failed(check_document(stranger, world, words=(60, 80), bottlenecks=persona.bottlenecks, own=None))
    assert {"probe_document.known_people", "probe_document.date_near_today", "probe_document.length"} <= set(problems)
    assert "someone@else.com" in problems["probe_document.known_people"]


def test_a_document_without_its_headers_is_unreadable():
    with pytest.raises(ParseError, match="Organizer:"):
        parse_document("Title: Standup\nDate: 2026-03-03\n\nDescription: talk", "calendar")
    with pytest.raises(ParseError, match="ISO date"):
        parse_document(EMAIL.format(body="x").replace("2026-03-01 09:00", "next Tuesday"), "email")


def doc(text: str, role: str = "distractor", kind: str = "email") -> Document:
    parsed = parse_document(text, kind)
    return Document(**parsed.model_dump(), id=document_id(text, "p1-b1"), role=role, persona_id="p1", sample_id="p1-b1",
                    origin="test")


def test_a_datastore_over_the_token_budget_is_a_clear_error(options):
    evidence = [doc(email(f"Item {i}. " + "words " * 150), role="true_positive") for i in range(2)]
    tight = options.model_copy(update={"token_budget": 300})
    with pytest.raises(UserError, match=r"sample p1-b1: its 2 true positives and hard negatives hold .* probe.token_budget"):
        datastore("p1-b1", evidence, [], tight)
    with pytest.raises(UserError, match="no distractor fits"):
        datastore("p1-b1", evidence, [doc(email("other " * 200))], options.model_copy(update={"token_budget": 700}))


def test_datastores_respect_count_and_budget_and_keep_every_true_positive(options):
    evidence = [doc(email(f"Evidence {i}."), role="true_positive") for i in range(2)]
    pool = [doc(email(f"Distractor {i}.")) for i in range(20)]
    chosen = datastore("p1-b1", evidence, pool, options)
    assert len(chosen) == options.max_documents and all(e in chosen for e in evidence)
    assert sum(d.tokens for d in chosen) <= options.token_budget
    assert chosen == datastore("p1-b1", evidence, pool, options), "seeded: the same datastore every time"


def test_bm25_finds_the_document_that_shares_the_query_words():
    docs = [doc(email(f"Unrelated note {i} about parking.")) for i in range(4)]
    target = doc(email("The renewal for the lisinopril refill is still pending with the prescriber."))
    scores = bm25_scores(["lisinopril renewal prescriber"], docs + [target])[0]
    assert scores.argmax() == len(docs) and scores[:len(docs)].max() == 0


def test_two_sample_tests_catch_evidence_that_is_longer_than_everything_else():
    long = [doc(email(f"Evidence {i}. " + "details " * (120 + i)), role="true_positive") for i in range(6)]
    short = [doc(email(f"Note {i}.")) for i in range(12)]
    tests = {t.feature: t for t in two_sample_tests(long, short, alpha=0.05)}
    assert tests["tokens"].separable and tests["tokens"].true_positives > tests["tokens"].distractors
    similar = {t.feature: t for t in two_sample_tests(short[:6], short[6:], alpha=0.05)}
    assert not any(t.separable for t in similar.values())
