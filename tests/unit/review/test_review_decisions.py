"""Gate decisions applied to a real DuckDB store (no Prefect): auto verdicts, approve, reject, edit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sopforge.review.gate import apply_decision, auto_decide
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.verify.schema_checks import check_schema
from sopforge.families.sop_tools.verify.sop_checks import check_sop
from sopforge.settings import Settings
from sopforge.store import ArtifactWrite, Store

ANSWERS = Path(__file__).resolve().parents[2] / "fixtures" / "answers"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home")


@pytest.fixture
def store(settings: Settings) -> Store:
    return Store(settings.db_path)


@pytest.fixture
def chain(store: Store):
    """A run holding validated context, schema and SOP artifacts built from the fixture answers."""
    context = BusinessContext.parse((ANSWERS / "context.txt").read_text(), theme="pharmacy prescription refills")
    schema = DataSchema.parse((ANSWERS / "schema.txt").read_text())
    sop = SOPDocument.parse((ANSWERS / "sop.txt").read_text(), title=context.task.sop_title)
    run_id = store.create_run("pharmacy prescription refills", "pharmacy", {})
    saved = {}
    for stage, artifact, checks, parents in (("context", context, [], []),
                                             ("schema", schema, check_schema(schema), ["context"]),
                                             ("sop", sop, check_sop(sop, schema), ["context", "schema"])):
        saved[stage] = store.save_artifact(ArtifactWrite(
            run_id=run_id, stage=stage, kind=stage, content=artifact.model_dump(mode="json"), input_key=f"k-{stage}",
            parents=[saved[p].id for p in parents], checks=checks, stage_run_id=store.start_stage(run_id, stage)))
    return run_id, saved


def decide(store, settings, run_id, artifact, **kwargs):
    return apply_decision(store, settings, run_id, artifact, source="cli", **kwargs)


def test_auto_gate_approves_only_when_every_check_passed(store, chain):
    run_id, saved = chain
    sop = saved["sop"]
    assert all(c.passed for c in store.validations_for(sop.id))
    outcome = auto_decide(store, run_id, sop)
    assert outcome.action == "continue" and "checks passed" in outcome.message
    review = store.reviews_for(sop.id)[-1]
    assert (review.decision, review.source, review.reviewer) == ("approve", "auto", "auto")
    # 'approved' is kept for people: a later --review ui run still shows this SOP to a reviewer.
    assert store.get_artifact(sop.id).status == "validated"


def test_auto_gate_stops_on_a_failing_warning(store, chain):
    run_id, saved = chain
    sop = SOPDocument.model_validate(saved["sop"].content)
    text = sop.text.replace("the patient identified by `patient_id`", "the patient", 1)
    warned = SOPDocument.parse(f"<SOP>{text}</SOP>", title=sop.title)
    checks = check_sop(warned, DataSchema.model_validate(saved["schema"].content))
    assert [c.name for c in checks if not c.passed] == ["sop.inputs_listed"]
    record = store.save_artifact(ArtifactWrite(run_id=run_id, stage="sop", kind="sop", input_key="k2",
                                               content=warned.model_dump(mode="json"), checks=checks))
    outcome = auto_decide(store, run_id, record)
    assert outcome.action == "stop" and "sop.inputs_listed (warning)" in outcome.message
    assert store.reviews_for(record.id)[-1].decision == "needs_review"


def test_approve_is_final_and_reject_needs_feedback(store, settings, chain):
    run_id, saved = chain
    sop = saved["sop"]
    refused = decide(store, settings, run_id, sop, decision="reject", feedback=" ")
    assert refused.action == "ask_again" and "reject needs feedback" in refused.message
    assert store.get_artifact(sop.id).status == "validated"
    assert decide(store, settings, run_id, sop, decision="approve", reviewer="dana").action == "continue"
    assert store.get_artifact(sop.id).status == "approved"
    assert auto_decide(store, run_id, store.get_artifact(sop.id)).message.endswith("was approved earlier")
    assert [r.decision for r in store.reviews_for(sop.id)] == ["refused", "approve"]


def test_reject_with_feedback_regenerates_and_bars_reuse(store, settings, chain):
    run_id, saved = chain
    outcome = decide(store, settings, run_id, saved["sop"], decision="reject", feedback="cite the 7-day window")
    assert (outcome.action, outcome.feedback) == ("regenerate", "cite the 7-day window")
    assert store.get_artifact(saved["sop"].id).status == "rejected"
    assert store.find_reusable_artifact("sop", "k-sop") is None


def test_rejecting_the_release_stops_the_run(store, settings, chain):
    run_id, saved = chain
    package = store.save_artifact(ArtifactWrite(run_id=run_id, stage="package", kind="package", content={"x": 1},
                                                input_key="k-p", parents=[saved["sop"].id]))
    outcome = decide(store, settings, run_id, package, decision="reject", feedback="oracle too easy")
    assert (outcome.action, outcome.feedback) == ("stop", "oracle too easy") and "oracle too easy" in outcome.message


def test_a_valid_sop_edit_is_stored_as_an_approved_version_with_a_diff(store, settings, chain):
    run_id, saved = chain
    sop = saved["sop"]
    text = sop.content["text"].replace("2. Scope", "2. Scope\nSigned off by the pharmacy lead.", 1)
    outcome = decide(store, settings, run_id, sop, decision="edit", edited_artifact=text, reviewer="lee")
    assert outcome.action == "continue" and outcome.artifact_id != sop.id
    new = store.get_artifact(outcome.artifact_id)
    assert (new.version, new.status, new.input_key) == (2, "approved", sop.input_key)
    assert [p.id for p in store.parents_of(new.id)] == [p.id for p in store.parents_of(sop.id)]
    assert store.artifact_for_stage(run_id, "sop").id == new.id, "downstream stages read the edit"
    assert store.get_artifact(sop.id).status == "superseded"
    review = store.reviews_for(sop.id)[-1]
    assert review.result_artifact_id == new.id and "+Signed off by the pharmacy lead." in review.edit_diff
    assert {c.check_name for c in store.validations_for(new.id)} == {c.name for c in check_sop(
        SOPDocument.model_validate(new.content), DataSchema.model_validate(saved["schema"].content))}


@pytest.mark.parametrize("stage, text, reason", [
    ("sop", "1. Purpose\nRefills.\n", "edited sop fails"),
    ("sop", "", "is empty"),
    ("schema", "fields: [unclosed", "not valid JSON or YAML"),
    ("schema", "- a list\n- not a mapping\n", "must be a JSON/YAML mapping"),
    ("schema", json.dumps({"fields": "nope"}), "does not fit the artifact's shape"),
])
def test_a_bad_edit_is_refused_and_changes_nothing(store, settings, chain, stage, text, reason):
    run_id, saved = chain
    before = store.artifacts_for_run(run_id)
    outcome = decide(store, settings, run_id, saved[stage], decision="edit", edited_artifact=text)
    assert outcome.action == "ask_again" and reason in outcome.message, outcome.message
    assert store.artifacts_for_run(run_id) == before
    review = store.reviews_for(saved[stage].id)[-1]
    assert (review.decision, review.comment) == ("refused", outcome.message)


def test_schema_edit_as_yaml_and_unchanged_or_computed_artifacts(store, settings, chain):
    run_id, saved = chain
    schema = saved["schema"]
    same = decide(store, settings, run_id, schema, decision="edit", edited_artifact=json.dumps(schema.content))
    assert same.action == "ask_again" and "identical" in same.message
    content = dict(schema.content)
    content["fields"] = [dict(f) for f in content["fields"]]
    content["fields"][0]["description"] = "Edited description of the first field."
    edited = decide(store, settings, run_id, schema, decision="edit", edited_artifact=yaml.safe_dump(content))
    assert edited.action == "continue"
    assert store.get_artifact(edited.artifact_id).content["fields"][0]["description"] == "Edited description of the first field."
    package = store.save_artifact(ArtifactWrite(run_id=run_id, stage="package", kind="package", content={"x": 1},
                                                input_key="k-p"))
    computed = decide(store, settings, run_id, package, decision="edit", edited_artifact="{}")
    assert computed.action == "ask_again" and "cannot be edited" in computed.message
