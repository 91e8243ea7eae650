"""``--batch`` end to end: a run killed while its batch job is in progress is resumed by polling the
same job, never by submitting (and paying for) its requests again."""

from __future__ import annotations

import json
import time

import duckdb
import pytest

from answers import RECORDED_CALLS, THEME, by_stage
from sopforge.llm.testserver import FakeLLMServer

pytestmark = pytest.mark.prefect


@pytest.mark.timeout(900)
def test_a_batch_run_killed_mid_job_resumes_by_polling_the_same_job(cli):
    args = ("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools", "--provider",
            "openai", "--model", "gpt-4o-mini", "--batch", "--json")
    env = {"OPENAI_API_KEY": "sk-test", "SOPFORGE_BATCH_POLL_SECONDS": "0.2"}
    with FakeLLMServer(by_stage(), batch_seconds=600) as server:
        proc = cli.start(*args, "--base-url", server.openai_base_url, env=env)
        deadline = time.monotonic() + 300
        while not any(job.polls for job in server.batches.jobs.values()):  # submitted, recorded, being polled
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        proc.kill()
        proc.wait()
        (first_job,) = server.batches.jobs

        server.batch_seconds = 0  # the provider finishes the job meanwhile
        resumed = cli(*args, "--base-url", server.openai_base_url, env=env)
        jobs = dict(server.batches.jobs)
    assert resumed.code == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "succeeded" and summary["llm_calls"] == RECORDED_CALLS
    submitted = [job.requests[i]["custom_id"] for job in jobs.values() for i in range(len(job.requests))]
    assert len(submitted) == len(set(submitted)) == RECORDED_CALLS  # every request submitted exactly once
    assert jobs[first_job].polls > 1  # the resumed run polled the job the killed one had submitted

    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        calls = con.execute("SELECT batch_id, input_tokens, output_tokens, cost_usd FROM llm_calls").fetchall()
        statuses = {s for (s,) in con.execute("SELECT status FROM batch_jobs").fetchall()}
    assert all(batch_id in jobs for batch_id, *_ in calls)
    assert statuses == {"ended"}
    for _, tokens_in, tokens_out, cost in calls:  # gpt-4o-mini at half of 0.15 / 0.60 USD per million
        assert cost <= (tokens_in * 0.15 + tokens_out * 0.60) / 2 / 1e6 + 1e-12
