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


HUANG = Bottleneck(description="Dr. Lena Ortiz has not returned the Prior Authorization for Gerald Huang's Eliquis "
                              "(PA-55821) in CoverMyMeds, and Omar Haddad cannot release the refill before it lapses "
                              "on 2026-03-09.", primary_person="Lena Ortiz", urgency="high", type="approval")
LIU = Bottleneck(description="Grace Liu has not approved the weekend overtime for the Medicare Part D reject backlog "
                             "(batch RJ-2231), which must be cleared by 2026-03-13.", primary_person="Grace Liu",
                 urgency="medium", type="resource")


def space() -> list[Action]:
    return [Action(id="follow_up_authorization", type="send_email", solves_bottleneck=1,
                   description="Chase a prescriber's office about paperwork still waiting for a signature.",
                   params_schema={"required": ["prescriber_office", "reference", "needed_by"]}),
            Action(id="request_overtime_approval", type="request_approval", solves_bottleneck=2,
                   description="Ask the manager to sign off on extra staff hours for a queue.",
                   params_schema={"required": ["hours", "reason"]}),
            Action(id="post_refill_reminders", type="send_slack_message",
                   description="Post the daily refill reminders to the counter channel.",
                   params_schema={"required": ["channel"]})]


def test_a_clean_action_space_passes():
    assert failed(check_actions(space(), [HUANG, LIU], pharmacy_world(), 3)) == {}


def test_a_second_solver_for_one_bottleneck_is_refused():
    actions = [a.model_copy(update={"solves_bottleneck": 1}) if a.id == "post_refill_reminders" else a for a in space()]
    problems = failed(check_actions(actions, [HUANG, LIU], pharmacy_world(), 3))
    assert "probe_actions.one_solver_each" in problems and "{1: 2}" in problems["probe_actions.one_solver_each"]


def test_a_solver_that_names_the_bottleneck_is_refused():
    actions = space()
    actions[1] = actions[1].model_copy(update={"description": "Ask Grace Liu to approve overtime for RJ-2231."})
    message = failed(check_actions(actions, [HUANG, LIU], pharmacy_world(), 3))["probe_actions.no_bottleneck_keywords"]
    assert "liu" in message and "rj-2231" in message


def test_keywords_are_names_identifiers_and_proper_nouns_not_ordinary_words():
    keywords = bottleneck_keywords(HUANG, pharmacy_world())
    assert {"lena ortiz", "ortiz", "pa-55821", "eliquis", "huang"} <= keywords
    assert not {"refill", "lapses", "march", "prior", "covermymeds"} & keywords
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


EMAIL = """From: Grace Liu <grace.liu@cascaderx.com>
To: Omar Haddad <omar.haddad@cascaderx.com>
Subject: Weekly numbers
Date: 2026-03-01 09:00

Hi Omar, {body}
Thanks, Grace"""


def email(body: str) -> str:
    return EMAIL.format(body=body + " " + "The weekly numbers look fine and the queue is short today. " * 8)


def test_a_distractor_carrying_a_bottleneck_identifier_leaks_it():
    world = pharmacy_world()
    doc = parse_document(email("Also, PA-55821 is in the queue."), "email")
    problems = failed(check_document(doc, world, words=(60, 220), bottlenecks=[HUANG, LIU], own=None))
    assert "bottleneck 1 (PA-55821)" in problems["probe_document.no_foreign_identifiers"]
    as_evidence = check_document(doc, world, words=(60, 220), bottlenecks=[HUANG, LIU], own=1)
    assert "probe_document.no_foreign_identifiers" not in failed(as_evidence)


def test_strangers_dates_and_lengths_are_refused():
    world = pharmacy_world()
    stranger = parse_document(email("Hello.").replace("omar.haddad@cascaderx.com", "someone@else.com")
                              .replace("2026-03-01", "2024-01-01"), "email")
    problems = failed(check_document(stranger, world, words=(60, 80), bottlenecks=[HUANG, LIU], own=None))
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


def test_a_plan_may_name_a_listed_system_without_its_qualifier():
    """T12 listed "Patient Care shared drive, 'Flagship_MedSync_March.xlsx'" and an independent answerer's plan
    wrote "Patient Care shared drive": the same system. A part of a name, or another system, is not."""
    from sopforge.families.probe.verify.plan_checks import names_system

    systems = ["Patient Care shared drive, 'Flagship_MedSync_March.xlsx'",
               "Pharmacy management system (renewal trigger report and prescription records)"]
    assert names_system("Patient Care shared drive", systems)
    assert names_system("pharmacy  management system", systems)
    assert names_system(systems[1], systems)
    assert not names_system("Patient Care", systems)
    assert not names_system("Renewal desk shared drive", systems)
