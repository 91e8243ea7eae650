"""Overruling a check (issue 19): in the theme file, on the command line, at a review gate; recorded, never silent.

A heuristic that is wrong for a domain must not end a run with no way forward: a person can waive it
with a reason, the failed check stays visible (failed, with the reason), and the run continues.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from sopforge.ask import ask_until_valid
from sopforge.checks import CheckResult, apply_waivers, blocking_failures, check
from sopforge.cli.generate import parse_waivers, ways_out
from sopforge.errors import UserError, ValidationFailed
from sopforge.orchestration.executor import run_waivers
from sopforge.prompts import RenderedPrompt
from sopforge.review.gate import apply_decision, auto_decide
from sopforge.settings import Settings
from sopforge.store import ArtifactWrite, Store
from sopforge.theme import build_spec

PROMPT = RenderedPrompt(text="Say a number inside <n></n>.", template_id="test/number", template_hash="t" * 64,
                        prompt_hash="p" * 64)


class Number(BaseModel):
    value: int


def spread_check(raw: str) -> tuple[Number, list[CheckResult]]:
    n = Number(value=int(raw.strip("<n/>")))
    return n, [check("num.spread", n.value > 10, "the number barely varies")]


def test_a_waived_check_stays_failed_but_no_longer_blocks():
    checks = [check("a.one", False, "bad"), check("a.two", True, "fine"), check("a.three", False, "worse")]
    waived = apply_waivers(checks, {"a.one": "thresholds are fixed per country", "a.two": "never failed"})
    assert [c.passed for c in waived] == [False, True, False]
    assert waived[0].waived == "thresholds are fixed per country" and waived[1].waived is None
    assert [c.name for c in blocking_failures(waived)] == ["a.three"]


def test_the_ask_loop_accepts_an_answer_whose_only_failure_is_waived(scripted, tmp_path):
    settings = Settings(home=tmp_path / "h", max_attempts=1, waivers={"num.spread": "small numbers are right here"})
    llm, provider = scripted(["<n>4</n>"])
    result = ask_until_valid(llm, PROMPT, parse_and_check=spread_check, stage="num", call_key_prefix="d/num/main",
                             settings=settings, model="m", temperature=0.1)
    assert result.artifact.value == 4 and len(provider.requests) == 1
    [spread] = result.checks
    assert not spread.passed and spread.waived == "small numbers are right here"
    with pytest.raises(ValidationFailed):  # without the waiver the same answer fails
        ask_until_valid(scripted(["<n>4</n>"])[0], PROMPT, parse_and_check=spread_check, stage="num",
                        call_key_prefix="d/num/main", settings=settings.model_copy(update={"waivers": {}}),
                        model="m", temperature=0.1)


@pytest.mark.parametrize(("waive", "message"), [
    ({"numeric spread": "x"}, "is not a check name"),
    ({"dataset.realism.numeric_spread": " "}, "give the reason for overruling dataset.realism.numeric_spread"),
])
def test_a_waiver_without_a_check_name_or_a_reason_is_refused(waive, message):
    with pytest.raises(UserError, match=message):
        build_spec({"theme": "customs clearance", "waive": waive}, source="theme.yaml")


def test_command_line_waivers_need_a_reason():
    assert parse_waivers(["dataset.realism.numeric_spread=fixed per country"]) == {
        "dataset.realism.numeric_spread": "fixed per country"}
    with pytest.raises(UserError, match="write CHECK=REASON"):
        parse_waivers(["dataset.realism.numeric_spread"])


def test_a_stopped_stage_says_what_the_user_can_do_next():
    error = ValidationFailed("dataset: final checks dataset.realism.correlations failed: …",
                             report=[{"name": "dataset.realism.correlations", "message": "m"}])
    line = str(ways_out(error, "r-1a2b"))
    assert line.startswith("dataset: final checks dataset.realism.correlations failed: …")
    assert "`sopforge rerun r-1a2b --from dataset`" in line
    upstream = str(ways_out(error, "r-1a2b", ["schema", "sop"]))
    assert "`sopforge rerun r-1a2b --from dataset` or one it reads (schema, sop) when the cause is there" in upstream
    assert '`sopforge rerun r-1a2b --waive dataset.realism.correlations="why it is wrong here"`' in line
    assert "\n" not in line


def test_a_failed_package_names_the_dataset_it_reads_only_through_the_tools_and_the_reference():
    """The insurance trial's export audit failed on two rows whose report date precedes the loss: the data."""
    from sopforge.cli.generate import _upstream

    spec = build_spec({"theme": "claims", "families": ["sop_tools"]}, source="t")
    assert _upstream(spec, "package") == ["schema", "sop", "api_graph", "dataset", "tools", "reference", "distractors",
                                          "manipulations"]
    assert _upstream(spec, "tools") == ["schema", "sop", "api_graph", "dataset"]
    assert _upstream(spec, "schema") == [] and _upstream(spec, "no such stage") == []


def test_a_check_that_knows_its_cause_is_upstream_sends_the_user_there_with_the_words_to_use():
    error = ValidationFailed("tools: the data gives …", report=[{
        "name": "tools.data.one_value_per_input", "message": "m",
        "details": {"rerun_from": "dataset", "feedback": "rows with the same date must hold the same rate"}}])
    line = str(ways_out(error, "r-1a2b", ["schema", "sop", "api_graph", "dataset"], "tools"))
    assert '`sopforge rerun r-1a2b --from dataset --feedback "rows with the same date must hold the same rate"`' in line
    assert "--from tools" not in line and "one it reads" not in line
    assert '--waive tools.data.one_value_per_input="why it is wrong here"' in line


@pytest.fixture
def gated(tmp_path: Path):
    """A run whose artifact failed one check, waiting at a gate."""
    settings = Settings(home=tmp_path / "home")
    store = Store(settings.db_path)
    run_id = store.create_run("customs", "customs", {})
    artifact = store.save_artifact(ArtifactWrite(
        run_id=run_id, stage="sop", kind="sop", content={"text": "…"}, input_key="k",
        checks=[check("sop.thresholds", False, "no threshold"), check("sop.sections", True, "ok")]))
    return settings, store, run_id, artifact


def test_an_automatic_gate_settles_a_check_the_run_waived_after_the_artifact_was_made(gated):
    """An artifact reused by ``rerun --waive CHECK=…`` keeps its stored validations: the run's waiver settles them."""
    _, store, run_id, artifact = gated
    outcome = auto_decide(store, run_id, artifact, {"sop.thresholds": "thresholds are set per county"})
    assert outcome.action == "continue" and "waived: sop.thresholds" in outcome.message
    assert auto_decide(store, run_id, artifact, {"sop.sections": "another check"}).action == "stop"


def test_a_reviewer_waives_a_failed_check_with_a_reason_and_the_run_keeps_it(gated):
    settings, store, run_id, artifact = gated
    assert auto_decide(store, run_id, artifact).action == "stop"
    refused = apply_decision(store, settings, run_id, artifact, decision="waive", source="cli", waive="sop.thresholds")
    assert refused.action == "ask_again" and "needs the reason" in refused.message
    unknown = apply_decision(store, settings, run_id, artifact, decision="waive", source="cli", feedback="why",
                             waive="sop.sections")
    assert unknown.action == "ask_again" and "sop.sections is not a failed check of sop" in unknown.message
    outcome = apply_decision(store, settings, run_id, artifact, decision="waive", source="cli", reviewer="ana",
                             feedback="this SOP states its limits in words")
    assert outcome.action == "continue" and "overruling sop.thresholds" in outcome.message
    review = [r for r in store.reviews_for_run(run_id) if r.decision == "waive"]
    assert [(r.reviewer, r.comment) for r in review] == [("ana", "sop.thresholds: this SOP states its limits in words")]
    assert store.get_artifact(artifact.id).status == "approved"
    spec = build_spec({"theme": "customs clearance", "waive": {"dataset.realism.numeric_spread": "per country"}},
                      source="theme.yaml")
    assert run_waivers(store, spec, {}, run_id) == {"dataset.realism.numeric_spread": "per country",
                                                    "sop.thresholds": "this SOP states its limits in words"}


def test_the_automatic_gate_passes_an_artifact_whose_only_failure_was_waived(gated):
    settings, store, run_id, _ = gated
    waived = store.save_artifact(ArtifactWrite(
        run_id=run_id, stage="sop", kind="sop", content={"text": "v2"}, input_key="k2",
        checks=apply_waivers([check("sop.thresholds", False, "no threshold")], {"sop.thresholds": "limits in words"})))
    [record] = store.validations_for(waived.id)
    assert not record.passed and record.details["waived"] == "limits in words"
    assert auto_decide(store, run_id, waived).action == "continue"
