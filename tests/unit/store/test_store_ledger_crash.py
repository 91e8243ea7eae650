"""The ledger under crashes and concurrency: every saved answer is found, no paid call is lost.

Issue 21: a fresh process looking up several saved answers at once missed some (the set of answered
hashes was published empty and filled afterwards), calls answered in the last half second before a
SIGKILL were neither in ``llm_calls`` nor in the budget, a second process asking a prompt that
another one had in flight paid for it again, and so did one asking a prompt another process had
answered after the first one read its answered set (a concurrent run of the same theme).
"""

from __future__ import annotations

import threading
import time

import pytest

from sopforge.store import Store, release_connections


@pytest.fixture(autouse=True)
def written_before_the_next_test():
    """Calls recorded here are written now, not by a flush timer firing during the next test."""
    yield
    release_connections()


def test_a_fresh_store_answers_every_saved_call_to_every_simultaneous_reader(store, run_id, make_call):
    hashes = [f"saved-{i}" for i in range(30)]
    for h in hashes:
        store.record_call(make_call(run_id, "manipulations", request_hash=h, response=f"answer {h}"))
    store._flush()
    misses: list[str] = []
    for _ in range(5):  # five fresh processes' worth of stores, each raced by 40 readers from its first lookup on
        fresh = Store(store.path)
        start = threading.Barrier(40)

        def look(h: str, fresh: Store = fresh, start: threading.Barrier = start) -> None:
            start.wait()
            found = fresh.cached_response(h)
            if found is None or found.response != f"answer {h}":
                misses.append(h)

        threads = [threading.Thread(target=look, args=(hashes[i % len(hashes)],)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert misses == []


# --- across processes: a child process asks the fake server through the real gateway, then dies -------

CHILD = r"""
import sys, time
from pathlib import Path
from sopforge.store import Store, base
base.FLUSH_SECONDS = 120  # nothing is written behind before the kill: only a journal can save the calls
from sopforge.llm import Gateway, LLMRequest, Message
from sopforge.llm.providers.openai import OpenAIProvider
from sopforge.settings import Settings

db, url, run_id, items, linger = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(","), sys.argv[5]
if linger == "exit":
    base.FLUSH_SECONDS = 0.5
gateway = Gateway(OpenAIProvider("sk-test", url, 60.0), ledger=Store(Path(db)),
                  settings=Settings(home=Path(db).parent), run_id=run_id)
for item in items:
    gateway.complete(LLMRequest(messages=[Message(role="user", content=f"question {item}")], model="gpt-4o-mini",
                                call_key=f"slug/stage/{item}/a1", stage="stage"))
    print("answered", item, flush=True)
if linger != "exit":
    time.sleep(600)
"""


def ask(item: str):
    from sopforge.llm import LLMRequest, Message

    return LLMRequest(messages=[Message(role="user", content=f"question {item}")], model="gpt-4o-mini",
                      call_key=f"slug/stage/{item}/a1", stage="stage")


def start_child(db_path, server, run_id: str, items: list[str], linger: str = "sleep"):
    """A process asking ``items``; it then sleeps with its calls only journaled, or exits (``linger="exit"``)
    with them committed."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", CHILD, str(db_path), server.openai_base_url, run_id, ",".join(items),
                             linger],
                            stdout=subprocess.PIPE, text=True)


def gateway_for(db_path, server, run_id: str):
    from sopforge.llm import Gateway
    from sopforge.llm.providers.openai import OpenAIProvider
    from sopforge.settings import Settings

    return Gateway(OpenAIProvider("sk-test", server.openai_base_url, 60.0), ledger=Store(db_path),
                   settings=Settings(home=db_path.parent), run_id=run_id)


def test_calls_answered_just_before_a_sigkill_are_in_the_ledger_and_never_paid_again(db_path, run_id):
    from sopforge.llm.testserver import FakeLLMServer

    items = [f"i{n}" for n in range(5)]
    with FakeLLMServer(lambda body, proto: "answer") as server:
        child = start_child(db_path, server, run_id, items)
        try:
            for item in items:
                assert child.stdout.readline().split() == ["answered", item]
        finally:
            child.kill()
            child.wait()
        paid = len(server.requests)
        assert paid == len(items)

        resumed = Store(db_path)
        calls = resumed.calls_for_run(run_id)
        assert sorted(c.call_key for c in calls) == sorted(f"slug/stage/{i}/a1" for i in items)
        assert resumed.run_cost(run_id) == sum(c.cost_usd for c in calls) > 0  # what --max-cost counts
        gateway = gateway_for(db_path, server, run_id)
        answers = [gateway.complete(ask(item)) for item in items]
        assert [a.from_cache for a in answers] == [True] * len(items)
        assert len(server.requests) == paid  # the provider was not paid twice
    assert not list(db_path.with_name(db_path.name + ".ledger").glob("journal-*"))  # folded, then removed


def test_a_second_process_waits_for_a_call_in_flight_instead_of_paying_again(db_path, run_id):
    from sopforge.llm.testserver import FakeLLMServer, slow

    with FakeLLMServer(lambda body, proto: "answer") as server:
        server.enqueue(slow(2.0, "the first process's answer"))
        child = start_child(db_path, server, run_id, ["same"])
        try:
            deadline = time.monotonic() + 60
            while not server.requests:  # the child's call is in flight
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.02)
            answer = gateway_for(db_path, server, run_id).complete(ask("same"))
            assert child.stdout.readline().split() == ["answered", "same"]
        finally:
            child.kill()
            child.wait()
        assert answer.text == "the first process's answer" and answer.from_cache
        assert len(server.requests) == 1


def test_a_claim_whose_process_was_killed_does_not_hold_up_the_next_one(db_path, run_id):
    from sopforge.llm.testserver import FakeLLMServer, slow

    with FakeLLMServer(lambda body, proto: "fresh answer") as server:
        server.enqueue(slow(30.0, "never delivered"))
        child = start_child(db_path, server, run_id, ["same"])
        deadline = time.monotonic() + 60
        while not server.requests:
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.02)
        child.kill()  # killed with the claim held and the call in flight
        child.wait()
        started = time.monotonic()
        answer = gateway_for(db_path, server, run_id).complete(ask("same"))
        waited = time.monotonic() - started
    assert answer.text == "fresh answer" and not answer.from_cache
    assert waited < 10  # the claim's owner is gone: not the half hour a live claimant may take


@pytest.mark.parametrize("linger, asker", [("sleep", "read before"), ("exit", "read before"), ("sleep", "fresh")])
def test_a_prompt_another_live_process_answered_after_this_one_looked_is_not_paid_again(db_path, run_id, linger,
                                                                                         asker):
    """``read before``: this process read its answered set before the child answered. ``fresh``: a Store made after
    the child answered and before its write-behind committed the answer (a run makes a Store per stage)."""
    from sopforge.llm.testserver import FakeLLMServer

    with FakeLLMServer(lambda body, proto: "answer") as server:
        gateway = gateway_for(db_path, server, run_id)
        gateway.complete(ask("mine"))  # this process has read its set of answered hashes
        child = start_child(db_path, server, run_id, ["same"], linger)
        try:
            assert child.stdout.readline().split() == ["answered", "same"]
            if linger == "exit":
                assert child.wait(timeout=60) == 0  # its call is committed and its journal removed
            if asker == "fresh":
                gateway = gateway_for(db_path, server, run_id)
            answer = gateway.complete(ask("same"))  # no claim to wait for: the child's call has ended
        finally:
            child.kill()
            child.wait()
        assert answer.from_cache and answer.text == "answer"
        assert len(server.requests) == 2, "'mine' once, 'same' once: not paid again"


def test_a_claim_created_but_not_yet_written_is_waited_for_not_taken_over(db_path):
    """Its creator is between the exclusive create and the write of its owner: taking it over made both pay."""
    from sopforge.store import journal

    folder = journal.ledger_dir(db_path)
    folder.mkdir(parents=True)
    claim = folder / "claim-h1"
    claim.write_text("")  # what another process's claim looks like for a moment
    taken = threading.Event()

    def take() -> None:
        with journal.claim_file(db_path, "h1", max_wait=60):
            taken.set()

    taker = threading.Thread(target=take)
    taker.start()
    assert not taken.wait(1.0), "an empty claim younger than a few seconds has an owner still writing it"
    claim.unlink()  # its owner's call ended
    assert taken.wait(10)
    taker.join()


def test_a_new_reader_of_a_long_answered_log_reads_whole_recent_lines_only(db_path):
    from sopforge.store import journal

    hashes = [f"{n:064x}" for n in range(3000)]  # 195 KB: longer than the lookback
    for h in hashes:
        journal.announce_answer(db_path, h)
    log = journal.AnsweredLog(db_path)
    assert log.announced(hashes[-1]) and log.announced(hashes[-1000])
    assert not log.announced(hashes[0]), "committed long ago: the database read finds it"
    assert all(len(h) == 64 for h in log._seen), "no line cut at the lookback's start"
    journal.announce_answer(db_path, "new")
    assert log.announced("new")
