"""The family evaluation protocol: resume keys and call keys (what recordings and resuming rely on)."""

from __future__ import annotations

from pathlib import Path

from sopforge.evaluation import EvalContext, EvalItem, EvalOptions
from sopforge.settings import Settings


def options(**changes) -> EvalOptions:
    return EvalOptions(**{"families": ["sop_tools"], "provider": "replay", "model": "recorded", **changes})


def test_the_resume_key_changes_with_every_option_that_changes_results():
    base = options()
    assert base.key() == options().key()
    for change in ({"model": "other"}, {"agent": "react"}, {"limit": 3}, {"temperature": 0.0},
                   {"ablations": True}, {"max_steps": 4}):
        assert options(**change).key() != base.key(), change


def test_step_limits_default_to_sop_bench_caps():
    assert options().steps == 10
    assert options(agent="react").steps == 15
    assert options(agent="react", max_steps=3).steps == 3


def test_call_keys_are_stable_file_safe_and_name_the_agent_not_the_model(tmp_path: Path):
    ctx = EvalContext(eval_id="e-1", run_id="r-1", theme_slug="pharmacy_refills", export_dir=tmp_path,
                      options=options(model="m1"), settings=Settings(home=tmp_path))
    item = EvalItem(suite="sop_bench", agent="fc", item_id="base/with distractors/RR-1")
    key = ctx.call_key("sop_tools", item, 2)
    assert key == "pharmacy_refills/eval_sop_tools/sop_bench.fc.base_with_distractors_RR-1/t2"
    other_model = EvalContext(eval_id="e-2", run_id="r-1", theme_slug="pharmacy_refills", export_dir=tmp_path,
                              options=options(model="m2"), settings=Settings(home=tmp_path))
    assert other_model.call_key("sop_tools", item, 2) == key
    assert ctx.call_key("sop_tools", item.model_copy(update={"agent": "react"}), 2) != key
