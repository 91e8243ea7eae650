"""LLM calls: the store as the gateway's ``CallLedger`` (records and response cache)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sopforge.llm.types import CallLedger


def _ledger(store) -> CallLedger:
    return store  # type-checks only if Store satisfies the protocol the gateway depends on


def test_recorded_calls_round_trip_every_field(store, run_id, make_call):
    record = make_call(run_id, "sop", template_id="teller/sop", template_hash="f" * 64,
                       raw={"id": "msg_1", "usage": {"input_tokens": 100}}, cached_tokens=7,
                       latency_ms=812.5, transport_attempts=3, attempt=2)
    _ledger(store).record_call(record)

    (stored,) = store.calls_for_run(run_id)
    assert stored.model_dump(exclude={"created_at"}) == record.model_dump(exclude={"created_at"})
    assert stored.created_at == record.created_at


def test_cached_response_ignores_failed_calls_and_prefers_the_newest(store, run_id, make_call):
    ledger = _ledger(store)
    now = datetime.now(timezone.utc)
    ledger.record_call(make_call(run_id, "sop", request_hash="h", error="HTTP 429", response=None))
    # A failed call may still carry text (e.g. a truncated body); it must never be served.
    ledger.record_call(make_call(run_id, "sop", request_hash="h", error="stop_reason=max_tokens",
                                 response="{\"partial\": "))
    assert ledger.cached_response("h") is None

    ledger.record_call(make_call(run_id, "sop", request_hash="h", response="old",
                                 created_at=now - timedelta(minutes=5)))
    ledger.record_call(make_call(run_id, "sop", request_hash="h", response="new", created_at=now))
    ledger.record_call(make_call(run_id, "sop", request_hash="h", error="timeout", response="late",
                                 created_at=now + timedelta(minutes=1)))

    assert ledger.cached_response("h").response == "new"
    assert ledger.cached_response("other") is None


def test_cache_works_across_runs_and_without_a_run(store, make_call):
    store.record_call(make_call(None, "context", request_hash="h2", response="answer"))
    assert store.cached_response("h2").response == "answer"


def test_recording_the_same_call_twice_keeps_one_row(store, run_id, make_call, sql):
    record = make_call(run_id, "sop")
    store.record_call(record)
    store.record_call(record)
    assert sql("SELECT count(*) FROM llm_calls") == [(1,)]


def test_calls_for_run_filters_by_stage(store, run_id, make_call):
    other = store.create_run("t", "t", {})
    store.record_call(make_call(run_id, "sop"))
    store.record_call(make_call(run_id, "schema"))
    store.record_call(make_call(other, "sop"))

    assert [c.stage for c in store.calls_for_run(run_id)] == ["sop", "schema"]
    assert [c.stage for c in store.calls_for_run(run_id, stage="schema")] == ["schema"]


def test_secret_looking_params_are_redacted(store, run_id, make_call, sql):
    store.record_call(make_call(run_id, "sop", params={"temperature": 0.2, "api_key": "sk-LEAK"}))
    assert sql("SELECT params->>'$.temperature', params->>'$.api_key' FROM llm_calls") == [
        ("0.2", "[redacted]")]


def test_llm_calls_are_indexed_for_cache_and_run_lookups(store, sql):
    store.check_writable()
    indexes = {r[0] for r in sql("SELECT sql FROM duckdb_indexes() WHERE table_name = 'llm_calls'")}
    assert any("(request_hash)" in s for s in indexes)
    assert any("(run_id)" in s for s in indexes)


def test_rejected_answers_stay_recorded_but_are_never_served_from_cache(tmp_path):
    """A stage that failed validation must re-sample the model when re-run."""
    from sopforge.llm.types import LLMCallRecord
    from sopforge.store import Store

    store = Store(tmp_path / "s.duckdb")
    run_id = store.create_run("theme", "slug", {})
    stage_run = store.start_stage(run_id, "sop")
    store.record_call(LLMCallRecord(id="c-1", run_id=run_id, call_key="slug/sop/main/a1", request_hash="h1",
                                    stage="sop", provider="openai", model="m", response="bad answer"))
    assert store.cached_response("h1") is not None
    assert store.reject_answers(stage_run) == 1
    assert store.cached_response("h1") is None
    assert [c.response for c in store.calls_for_run(run_id)] == ["bad answer"]


def test_a_call_being_written_is_still_a_cache_hit(store, run_id, make_call, monkeypatch):
    # The write-behind takes queued calls off the queue, then commits them: a lookup in between (a
    # parallel item asking the same prompt) must still find the answer, or the same prompt is paid twice.
    from sopforge.store import queries

    assert store.cached_response("warm-up") is None  # the set of answered hashes is loaded now
    seen_mid_write = []
    insert = queries.insert_call

    def insert_and_look(con, record, params):
        seen_mid_write.append(store.cached_response(record.request_hash))
        insert(con, record, params)

    monkeypatch.setattr(queries, "insert_call", insert_and_look)
    store.record_call(make_call(run_id, "manipulations", request_hash="same-prompt", response="verdict"))
    store._flush()
    assert [r.response if r else None for r in seen_mid_write] == ["verdict"]
    assert store.cached_response("same-prompt").response == "verdict"


def test_calls_recorded_before_the_cache_is_first_read_are_hits(store, run_id, make_call):
    store.record_call(make_call(run_id, "sop", request_hash="early", response="answer"))
    assert store.cached_response("early").response == "answer"  # still queued
    store._flush()
    fresh = type(store)(store.path)
    assert fresh.cached_response("early").response == "answer"  # written: found in the file


def test_concurrent_first_lookups_wait_for_the_answered_set(store, run_id, make_call, db_path):
    """A fan-out starts many lookups at once on a fresh Store: none may see the set before it is filled
    (an evaluation's first items paid again for answers already in the file)."""
    import threading
    import time
    from contextlib import contextmanager

    from sopforge.store import Store, release_connections

    store.record_call(make_call(run_id, "eval_sop_tools", request_hash="known", response="cached"))
    store.calls_for_run(run_id)  # written to the file
    release_connections()

    class SlowReader(Store):
        @contextmanager
        def _read(self, *, flush: bool = True):
            time.sleep(0.2)  # the set's query is slow enough for the other lookups to arrive meanwhile
            with super()._read(flush=flush) as con:
                yield con

    fresh = SlowReader(db_path, lock_timeout=20)
    found: list[object] = []
    threads = [threading.Thread(target=lambda: found.append(fresh.cached_response("known"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert [f is not None and f.response == "cached" for f in found] == [True] * 4
