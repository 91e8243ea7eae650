"""Independent calls inside a stage run concurrently, and that never changes an artifact.

The chain runs through the real executor, the OpenAI SDK and the fake server with the plain
sequential map; then the stages that fan out (distractors, manipulations) are generated again with
a concurrent map (the semantics of the flow's Prefect mapper: items submitted at once, results
collected in item order) while the server answers each request after a random delay, so calls
finish in an order unrelated to the order they were made. Their artifacts must have the same
content hash as the sequential ones.
"""

from __future__ import annotations

import contextvars
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from answers import THEME, by_stage
from sopforge.ask import sequential_map
from sopforge.llm.testserver import FakeLLMServer
from sopforge.orchestration.executor import execute_stage
from sopforge.run_request import resolve_spec, run_config
from sopforge.settings import Settings
from sopforge.store import Store


def threaded_map(fn, items, label="item"):
    """Every item at once, results in item order: what prefect_map does with Prefect task runs
    (which also run each item in a copy of the caller's context, so nested fan-outs stay concurrent)."""
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
    return [f.result() for f in futures]


def jittery(seed: int):
    """The recorded answers, each after a random delay (0-300 ms): completion order is scrambled."""
    answer, rng, lock = by_stage(), random.Random(seed), threading.Lock()

    def respond(body: dict, protocol: str) -> str:
        with lock:
            delay = rng.uniform(0, 0.3)
        time.sleep(delay)
        return answer(body, protocol)

    return respond


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_concurrent_calls_in_any_completion_order_build_the_same_artifacts(tmp_path):
    settings = Settings(home=tmp_path / "home", openai_api_key="sk-test", max_concurrency=16)
    with FakeLLMServer(jittery(seed=1)) as server:
        spec, base = resolve_spec(None, THEME, {"slug": "pharmacy_refills", "provider": "openai", "model": "m",
                                                "base_url": server.openai_base_url, "families": ["sop_tools"]})
        run_id = Store(settings.db_path).create_run(spec.theme, spec.slug, run_config(spec, base, settings))
        sequential = {stage.name: execute_stage(run_id, stage.name, settings=settings, mapper=sequential_map)
                      for stage in spec.plan().stages}
        assert server.max_in_flight == 1
        # The stages that fan out, generated again (forced: no reuse, no response cache) with every
        # independent call at once, answered in an order unrelated to the order they were asked.
        concurrent = {stage: execute_stage(run_id, stage, settings=settings, mapper=threaded_map, force=True)
                      for stage in ("distractors", "manipulations")}
        most_at_once = server.max_in_flight
    assert most_at_once > 4, "the SOP variants, dialogues and operators should have been asked at the same time"
    for stage, outcome in concurrent.items():
        # The same asks: a forced run has no response cache, so an ask the sequential run answered
        # from its cache (a retry cycle whose prompt repeats an earlier one) is a call here.
        asks = outcome.llm_calls + outcome.cache_hits
        assert not outcome.reused and asks == sequential[stage].llm_calls + sequential[stage].cache_hits
        assert outcome.artifact.id != sequential[stage].artifact.id
        assert outcome.artifact.content_hash == sequential[stage].artifact.content_hash, stage
