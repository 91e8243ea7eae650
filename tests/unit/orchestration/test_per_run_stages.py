"""Per-run stages (the packages): made again by every run, an earlier approval of the same inputs carried over."""

from __future__ import annotations

from sopforge.checks import CheckResult
from sopforge.families import plan
from sopforge.orchestration.executor import carry_approval
from sopforge.store import ArtifactWrite, ReviewWrite, Store


def _package(store: Store, run_id: str):
    return store.save_artifact(ArtifactWrite(run_id=run_id, stage="package", kind="PackageManifest",
                                             content={"export_dir": f"exports/{run_id}"}, input_key="same inputs",
                                             status="validated"))


def test_every_family_package_is_made_by_every_run():
    assert {s.name for s in plan(("sop_tools", "probe", "maze")).stages if s.per_run} == {
        "package", "probe_package", "maze_package"}
    assert all(not s.uses_llm for s in plan(("sop_tools", "probe", "maze")).stages if s.per_run)


def test_an_approval_of_the_same_inputs_carries_over_when_the_checks_pass(tmp_path):
    store = Store(tmp_path / "sopforge.duckdb")
    first, second = store.create_run("t", "t", {}), store.create_run("t", "t", {})
    earlier = _package(store, first)
    store.record_review(ReviewWrite(artifact_id=earlier.id, run_id=first, decision="approve", reviewer="dana", source="ui"))
    earlier = store.get_artifact(earlier.id)
    passing = [CheckResult(name="package.oracle_tsr", passed=True, severity="error", message="ok")]
    failing = [CheckResult(name="package.oracle_tsr", passed=False, severity="error", message="0.9")]

    carried = carry_approval(store, _package(store, second), earlier, passing)
    assert carried.status == "approved"
    [review] = store.reviews_for(carried.id)
    assert (review.decision, review.reviewer) == ("approve", "dana") and earlier.id in review.comment and first in review.comment

    assert carry_approval(store, _package(store, second), earlier, failing).status == "validated"
    unapproved = _package(store, first)
    assert carry_approval(store, _package(store, second), unapproved, passing).status == "validated"
