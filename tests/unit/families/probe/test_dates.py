"""The world is written as of one day: every prompt states it, and no artifact tells a later date as past.

The case that prompted it (issue 19): a world model dated 2026-03-02 whose goals and relationships told events
of late 2026 and 2027 as done. The answers below are hand-written deliberate failures.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from sopforge.families.probe.models.bottlenecks import Bottleneck
from sopforge.families.probe.models.documents import parse_document
from sopforge.families.probe.models.world import PersonalContext
from sopforge.families.probe.verify.bottleneck_checks import check_bottlenecks
from sopforge.families.probe.verify.dates import future_told_as_past, mentioned_dates
from sopforge.families.probe.verify.document_checks import check_document
from sopforge.families.probe.verify.world_checks import check_personal, check_relationships
from sopforge.prompts import default_registry
from conftest import SLUG, pharmacy_world
from synthetic import synthetic_chain

AS_OF = date(2026, 3, 2)


def failed(checks) -> dict[str, str]:
    return {c.name: c.message for c in checks if not c.passed}


def test_dates_are_read_in_the_forms_people_write_them():
    text = "Go-live 2026-03-05, review March 9, 2026, audit 9 March 2026, 03/16/2026, Sept. 2026, Q4 2026, by 2027."
    assert [d.isoformat() for _, d in mentioned_dates(text)] == [
        "2026-03-05", "2026-03-09", "2026-03-09", "2026-03-16", "2026-09-01", "2026-10-01", "2027-01-01"]


@pytest.mark.parametrize("sentence", [
    "Completed the PioneerRx migration in November 2026.",
    "Since 2027 she has run the weekend queue.",
    "The Surescripts pilot launched on 2026-09-14 and cut call volume.",
    "The audit was planned in 2025, and the team completed it in November 2026.",
    "In November 2026, we migrated every store to PioneerRx.",
    "We moved every store onto PioneerRx in November 2026.",
])
def test_a_later_date_told_as_past_is_found(sentence):
    assert future_told_as_past(sentence, AS_OF) == [sentence]


@pytest.mark.parametrize("sentence", [
    "Complete the PioneerRx migration by November 2026.",
    "The Surescripts pilot is scheduled to launch on 2026-09-14.",
    "Launched the reminder programme in October 2025 and wants it in every store by Q3 2026.",
    "Signed the payer contract on 2026-02-10; it renews on 2027-02-10.",
    # an independent answerer's bottleneck, refused when the sentence was read whole (its leave is planned)
    "Priya finished the list in the shared document on 2026-02-26, but she never sent it to Thomas Kowalczyk for "
    "sign-off, and his calendar shows him on leave from 2026-03-09 to 2026-03-13.",
    # rescheduling notes of an independent answerer's documents (a new slot is a plan)
    "- Start moved from Monday 2026-03-02 to Tuesday 2026-03-03, his first day in that week.",
    "Planned start: Tuesday 2026-03-03; the start is to be moved from Monday 2026-03-02.",
    "19 consenting patients, 42 maintenance prescriptions, moved to one monthly pickup on 2026-03-28.",
])
def test_plans_and_past_events_before_today_are_accepted(sentence):
    assert future_told_as_past(sentence, AS_OF) == []


def test_a_world_model_that_tells_2027_as_done_is_refused_and_a_dated_plan_is_not():
    world = pharmacy_world()
    told_as_done = world.personal.model_copy(update={"current_goals": [
        "Rolled out Surescripts refill reminders to all stores in December 2026",
        "Cut Prior Authorization turnaround below 48 hours by 2026-04-30", "Hire two technicians"]})
    problems = failed(check_personal(told_as_done, AS_OF))
    assert "December 2026" in problems["probe_world.personal_as_of"] and "as of 2026-03-02" in problems[
        "probe_world.personal_as_of"]
    assert "probe_world.personal_as_of" not in failed(check_personal(world.personal, AS_OF))
    late = [world.relationships[0].model_copy(update={"status": "Good since she joined the clinic in 2027."}),
            *world.relationships[1:]]
    assert "probe_world.relationships_as_of" in failed(
        check_relationships(late, world.persona.model_copy(update={"difficulty": "easy"}), "cascaderx.com", AS_OF))


def test_a_bottleneck_needs_a_deadline_still_ahead():
    world = pharmacy_world()
    past = Bottleneck(description="Dr. Lena Ortiz did not sign PA-55821 before 2026-02-20, so Omar Haddad could "
                                  "not release the refill.", primary_person="Lena Ortiz", urgency="high", type="approval")
    problems = failed(check_bottlenecks([past], world, 1))
    assert "no date after today (2026-03-02)" in problems["probe_bottlenecks.deadline_ahead"]
    ahead = past.model_copy(update={"description": "Dr. Lena Ortiz has not signed PA-55821, and Omar Haddad cannot "
                                                   "release the refill before it lapses on 2026-03-09."})
    assert not {"probe_bottlenecks.deadline_ahead", "probe_bottlenecks.as_of"} & set(failed(check_bottlenecks([ahead], world, 1)))


EMAIL = """From: Omar Haddad <omar.haddad@cascaderx.com>
To: Dana Whitfield <dana.whitfield@cascaderx.com>
Subject: Part D rejects
Date: {date}

Hi Dana, {body} The rest of the queue is normal for a Monday and nothing else stands out this week.
Omar"""


def test_an_email_is_dated_before_today_and_tells_nothing_after_its_own_date_as_past():
    world = pharmacy_world()
    ahead = parse_document(EMAIL.format(date="2026-03-04 09:00", body="I will resubmit the batch."), "email")
    assert "probe_document.not_in_future" in failed(check_document(ahead, world, words=(5, 200), bottlenecks=[], own=None))
    hindsight = parse_document(EMAIL.format(date="2026-02-20 09:00", body="We resubmitted the batch on 2026-02-27."),
                               "email")
    problems = failed(check_document(hindsight, world, words=(5, 200), bottlenecks=[], own=None))
    assert "as of 2026-02-20" in problems["probe_document.dates_as_of"]
    fine = parse_document(EMAIL.format(date="2026-02-20 09:00", body="I will resubmit the batch by 2026-02-27."), "email")
    assert not {"probe_document.not_in_future", "probe_document.dates_as_of"} & set(
        failed(check_document(fine, world, words=(5, 200), bottlenecks=[], own=None)))


@pytest.mark.parametrize("template_id", ["probe/personas", "probe/org_structure", "probe/personal_context",
                                         "probe/relationships"])
def test_every_prompt_that_writes_the_world_states_its_as_of_day(template_id):
    params = {name: "easy" if name == "difficulty" else "x" for name in default_registry().get(template_id).header.parameters}
    text = default_registry().render(template_id, **{**params, "as_of": "2026-03-02"}).text
    assert "as of 2026-03-02 (today)" in text and "never as done" in text


def test_the_world_model_every_later_prompt_shows_starts_with_its_as_of_day():
    assert pharmacy_world().to_prompt_text().startswith("As of: 2026-03-02 (today).")


def test_the_world_stage_reasks_a_personal_context_that_tells_a_later_date_as_past(context, settings, options):
    """The synthetic model's personal context, with one goal told as done in January 2027, is re-asked once
    with that sentence and the as-of day quoted; the second (unspoiled) answer is kept."""
    from synthetic import SyntheticProbe

    honest = SyntheticProbe()
    asked: list[str] = []

    def spoiled_once(prompt: str) -> str:
        asked.append(prompt)
        good = honest.answer(prompt, f"{SLUG}/probe_world/p1-personal/a{len(asked)}")
        if len(asked) > 1:
            return good
        personal = json.loads(good.split("<personal_context>")[1].split("</personal_context>")[0])
        personal["current_goals"][0] = "Finished moving every refill reminder to text messages in January 2027."
        return "<personal_context>\n" + json.dumps(personal) + "\n</personal_context>"

    out, provider = synthetic_chain(context, options, settings, until="probe_world",
                                    synthetic=SyntheticProbe({"p1-personal": spoiled_once}))
    reask = next(r for r in provider.requests if r.call_key.endswith("p1-personal/a2"))
    assert "January 2027" in reask.messages[-1].content and "as of 2026-03-02" in reask.messages[-1].content
    assert len(asked) == 2 and isinstance(out["probe_world"].of("p1").personal, PersonalContext)
    assert not any("2027" in goal for goal in out["probe_world"].of("p1").personal.current_goals)
