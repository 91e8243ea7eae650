"""Later stages' slow set-up (``StageSpec.warm_up``) overlaps a stage's model calls, not its own set-up."""

from __future__ import annotations

from pathlib import Path

from sopforge.orchestration import executor
from sopforge.run_request import resolve_spec, run_config
from sopforge.settings import Settings
from sopforge.store import Store

ROOT = Path(__file__).resolve().parents[3]
THEME_FILE = ROOT / "examples" / "themes" / "pharmacy_refills.yaml"


def test_a_stage_builds_its_provider_before_the_later_stages_warm_up(tmp_path, monkeypatch):
    # Importing a provider's SDK is the first stage's critical path; Great Expectations imported in a
    # thread beside it (the dataset stage's warm-up) held the interpreter half the time.
    events: list[str] = []
    build_provider = executor.build_provider

    def recording_build(*args, **kwargs):
        provider = build_provider(*args, **kwargs)
        events.append("provider built")
        return provider

    def recording_warm_up(specs):
        events.append("warm-up of " + ", ".join(spec.name for spec in specs if spec.warm_up is not None))

    monkeypatch.setattr(executor, "build_provider", recording_build)
    monkeypatch.setattr(executor, "warm_up", recording_warm_up)
    settings = Settings(home=tmp_path / "home")
    spec, base = resolve_spec(THEME_FILE, None, {"families": ["sop_tools"]})
    run_id = Store(settings.db_path).create_run(spec.theme, spec.slug, run_config(spec, base, settings))

    outcome = executor.execute_stage(run_id, "context", settings=settings)
    assert not outcome.reused and outcome.llm_calls == 1
    assert events == ["provider built", "warm-up of dataset"]
