"""PROBE fixtures: the demo's business context (answered by an independent model), a hand-built world and the
synthetic model. No PROBE answer comes from a recording, so re-recording the example cannot break these tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.context.model import BusinessContext
from sopforge.families.probe.models.world import (
    OrgStructure, Persona, PersonalContext, Relationship, WorldModel,
)
from sopforge.families.probe.options import ProbeSpec
from sopforge.llm.providers._files import read_response
from sopforge.settings import Settings

# The demo's recordings: only their business context is read here.
RECORDINGS = Path(__file__).resolve().parents[4] / "examples" / "recordings" / "pharmacy_refills"
SLUG = "pharmacy_refills"


@pytest.fixture
def options() -> ProbeSpec:
    return ProbeSpec(personas=2, difficulties=["easy", "hard"], bottlenecks={"easy": 1, "medium": 2, "hard": 2},
                     actions={"easy": 6, "medium": 8, "hard": 8}, evidence_documents={"easy": 2, "medium": 2, "hard": 2},
                     words={"email": [60, 220], "calendar": [40, 160], "document": [80, 260]},
                     max_documents=12, token_budget=5000, max_retries=1)


@pytest.fixture
def context() -> BusinessContext:
    return BusinessContext.parse(read_response(RECORDINGS / f"{SLUG}__context__main__a1.response.md")[1], theme="t")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", max_attempts=2, provider="scripted")


def pharmacy_world(**changes) -> WorldModel:
    """A small hand-built world (test data, not a model's answer) whose everyday vocabulary names systems and
    programmes with capitals, as a real pharmacy's does: Prior Authorization, CoverMyMeds, Medicare Part D."""
    world = WorldModel(
        persona=Persona(id="p1", name="Dana Whitfield", occupation="Pharmacy Operations Lead", location="Tacoma, WA",
                        about="Runs refill and prior authorization work for two community pharmacies.",
                        role="Pharmacy operations lead", sub_business="Community pharmacy", difficulty="hard"),
        today="2026-03-02", persona_email="dana.whitfield@cascaderx.com",
        org=OrgStructure(company_name="Cascade Rx", company_type="regional pharmacy chain",
                         department="Pharmacy Operations", team_size=12, direct_reports=4,
                         reporting_to="Director of Pharmacy",
                         key_processes=["Prior Authorization follow-up in CoverMyMeds",
                                        "Medicare Part D claim reconciliation", "Refill queue triage in PioneerRx"],
                         typical_meetings=["Monday refill huddle", "Payer escalation review"],
                         email_domain="cascaderx.com"),
        personal=PersonalContext(work_style="Checklists and short written updates.",
                                 current_goals=["Cut Prior Authorization turnaround below 48 hours by 2026-04-30",
                                                "Reconcile every Medicare Part D reject weekly",
                                                "Move refill reminders to Surescripts messaging by 2026-06-01"],
                                 constraints=["Two technicians short on weekends"],
                                 communication_preferences="E-mail first, phone for urgent payer issues.",
                                 tools_used=["PioneerRx", "CoverMyMeds", "Surescripts", "Medicare Part D portal"],
                                 peak_productivity_time="Early morning",
                                 biggest_challenges=["Prescriber offices that answer Prior Authorization requests late"]),
        relationships=[
            Relationship(name="Lena Ortiz", role="Prescriber, family medicine", type="stakeholder",
                         interaction="Signs Prior Authorization forms sent through CoverMyMeds.", status="good",
                         frequency="weekly", department="", email="lena.ortiz@northsoundclinic.org"),
            Relationship(name="Omar Haddad", role="Pharmacy technician", type="colleague",
                         interaction="Works the Medicare Part D reject queue.", status="good", frequency="daily",
                         department="Pharmacy Operations", email="omar.haddad@cascaderx.com"),
            Relationship(name="Grace Liu", role="Director of Pharmacy", type="manager",
                         interaction="Approves escalations and staffing.", status="good", frequency="weekly",
                         department="Pharmacy Operations", email="grace.liu@cascaderx.com"),
        ])
    return world.model_copy(update=changes)



from synthetic import synthetic_chain  # noqa: E402  (re-exported for the tests)
