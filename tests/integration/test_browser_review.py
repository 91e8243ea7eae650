"""The Prefect UI as a reviewer uses it: headless Chromium on a paused generation.

A generation with ``--review ui`` pauses at the SOP gate on this module's Prefect server; the
browser opens the flow run, reads the review page, fills the Resume form and submits it. The
flow must resume and the decision must be in DuckDB. Screenshots of every review page land in
``artifacts/test-screenshots/`` (or ``$SOPFORGE_TEST_SCREENSHOTS``) for a person to look at.
Chromium comes from Debian (``make system-deps``) and Playwright from the locked dev group.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from playwright.sync_api import sync_playwright

import browser_support as ui
from answers import by_stage, prompt_text
from cli_support import ROOT, own_prefect_server
from review_support import FAST_POLL, FEEDBACK, ONLY_SOP_GATE, finish, generate_args, reviews, wait_for_gate
from sopforge.llm.testserver import FakeLLMServer
from sopforge.orchestration.gates import review_key

pytestmark = [pytest.mark.prefect, pytest.mark.xdist_group("browser")]  # one at a time: both mostly wait
SHOTS = Path(os.environ.get("SOPFORGE_TEST_SCREENSHOTS", ROOT / "artifacts" / "test-screenshots"))


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    """A Prefect server of this module's own, not the session's: under the other workers' flows, the shared
    server's SQLite can answer the UI's resume with 503, which the Prefect UI does not retry."""
    with own_prefect_server(tmp_path_factory.mktemp("browser-prefect")) as api:
        yield api


@pytest.fixture
def page():
    problem = ui.skip_reason()
    assert problem is None, f"{problem}: run `make system-deps` (the tests need the Debian chromium)"
    with sync_playwright() as pw:
        browser = ui.launch(pw)
        try:
            yield ui.new_page(browser)
        finally:
            browser.close()


def flow_run_of(cli, run_id: str) -> str:
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        return con.execute("SELECT flow_run_id FROM runs WHERE id = ?", [run_id]).fetchone()[0]


def open_review_page(page, prefect_api: str, run_id: str, flow_run_id: str, shot: str) -> str:
    """The SOP review page the gate published, as the UI renders it (screenshot saved)."""
    text = ui.artifact_text(page, prefect_api, flow_run_id, key=review_key(run_id, "sop"))
    ui.screenshot(page, SHOTS / shot)
    return text


def test_a_reviewer_approves_the_sop_in_the_prefect_ui(cli, prefect_api, page):
    with FakeLLMServer(by_stage()) as server:
        proc = cli.start(*generate_args(server, "--review", "ui", *ONLY_SOP_GATE), env=FAST_POLL)
        run_id = wait_for_gate(cli, "sop", 1, proc)
        flow_run_id = flow_run_of(cli, run_id)

        text = open_review_page(page, prefect_api, run_id, flow_run_id, "approve-1-review-page.png")
        assert f"Review: sop v1 of run {run_id}" in text
        assert "5. Main Procedure" in text and "Checks" in text, "the SOP and its checks are readable in the UI"

        ui.wait_for_resume_available(page, prefect_api, flow_run_id)
        dialog = ui.open_resume_form(page)
        assert "Review: sop v1" in ui.form_description(dialog), "the form shows what is being decided"
        ui.fill_resume_form(page, dialog, {"decision": "approve", "reviewer": "ui-reviewer"})
        ui.screenshot(page, SHOTS / "approve-2-resume-form.png", full_page=False)
        assert ui.submit_resume_form(page, dialog)["status"] == "ACCEPT"
        ui.park(page)
        summary = finish(proc)

    assert summary["status"] == "succeeded" and summary["export"]
    assert reviews(cli, run_id) == [("sop", 1, "approve", "ui-reviewer", "ui", None)]


def test_a_reviewer_rejects_with_feedback_in_the_ui_and_the_stage_is_regenerated_with_it(cli, prefect_api, page):
    with FakeLLMServer(by_stage()) as server:
        proc = cli.start(*generate_args(server, "--review", "ui", *ONLY_SOP_GATE), env=FAST_POLL)
        run_id = wait_for_gate(cli, "sop", 1, proc)
        flow_run_id = flow_run_of(cli, run_id)
        open_review_page(page, prefect_api, run_id, flow_run_id, "reject-1-review-page.png")

        sent = len(server.requests)
        ui.resume_with(page, prefect_api, flow_run_id, {"decision": "reject", "feedback": FEEDBACK, "reviewer": "ui-reviewer"},
                       screenshot_to=SHOTS / "reject-2-resume-form.png")
        ui.park(page)
        wait_for_gate(cli, "sop", 2, proc)
        regenerated = server.requests[sent:]
        assert len(regenerated) == 1 and FEEDBACK in prompt_text(regenerated[0].json, "openai")

        text = open_review_page(page, prefect_api, run_id, flow_run_id, "reject-3-second-review-page.png")
        assert f"Review: sop v2 of run {run_id}" in text
        ui.resume_with(page, prefect_api, flow_run_id, {"decision": "approve", "reviewer": "ui-reviewer"})
        ui.park(page)
        summary = finish(proc)

    assert summary["status"] == "succeeded"
    assert reviews(cli, run_id) == [("sop", 1, "reject", "ui-reviewer", "ui", FEEDBACK),
                                    ("sop", 2, "approve", "ui-reviewer", "ui", None)]
