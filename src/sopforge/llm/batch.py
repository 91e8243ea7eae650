"""Batch APIs (``--batch``): a stage's concurrent calls go to the provider as one batch job.

OpenAI's Batch API and Anthropic's Message Batches answer within hours at half price. A stage's
independent calls already arrive together (``sopforge.ask.fan_out`` runs them concurrently), so
the gateway hands each call to a :class:`Batcher`, which waits a moment for the calls that arrive
with it, submits them as one job (one per model), records the job in the store *before* waiting
(``batch_jobs``, migration 008), polls it, and gives each caller its own answer. The answers are
recorded like any other call (with the job id, costed at batch prices), so the response cache
serves them afterwards.

A run that stops while a job is in progress (a crash, Ctrl-C, a stopped worker) loses nothing: the
next run of the same stage asks the same requests (same request hashes), the batcher finds them
in a job still open in the store and polls that job instead of submitting (and paying for) them
again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sopforge.errors import ProviderError
from sopforge.llm.types import LLMRequest, LLMResponse

__all__ = ["BatchJobs", "BatchProvider", "Batcher"]

COLLECT_SECONDS = 0.5


class BatchProvider(Protocol):
    """What a provider with a batch API offers (OpenAIProvider, AnthropicProvider)."""

    name: str

    def submit_batch(self, requests: dict[str, LLMRequest]) -> str: ...

    def batch_status(self, job_id: str) -> str: ...

    def batch_results(self, job_id: str, requests: dict[str, LLMRequest]) -> dict[str, LLMResponse | ProviderError]: ...


class BatchJobs(Protocol):
    """Where batch jobs are remembered across runs (the Store implements it)."""

    def open_batch_job(self, request_hash: str, provider: str, model: str) -> str | None: ...

    def record_batch_job(self, job_id: str, *, run_id: str | None, stage: str, provider: str, model: str,
                         request_hashes: list[str]) -> None: ...

    def finish_batch_job(self, job_id: str, status: str, error: str | None = None) -> None: ...


@dataclass
class _Waiter:
    request: LLMRequest
    key: str
    done: threading.Event = field(default_factory=threading.Event)
    response: LLMResponse | None = None
    error: BaseException | None = None

    def settle(self, outcome: LLMResponse | BaseException) -> None:
        if isinstance(outcome, BaseException):
            self.error = outcome
        else:
            self.response = outcome
        self.done.set()


class Batcher:
    """Collects the calls of one stage into batch jobs and waits for their answers.

    Args:
        backend: the provider (must have a batch API).
        jobs: the store, remembering jobs so a resumed run polls instead of resubmitting.
        run_id, stage: recorded with each job.
        poll_seconds: how often a job's status is asked.
        collect_seconds: how long the first call of a job waits for others to join it.
    """

    def __init__(self, backend: BatchProvider, jobs: BatchJobs, *, run_id: str | None, stage: str,
                 poll_seconds: float, collect_seconds: float = COLLECT_SECONDS,
                 sleep: Callable[[float], None] = time.sleep):
        self.backend, self.jobs = backend, jobs
        self.run_id, self.stage = run_id, stage
        self.poll_seconds, self.collect_seconds = poll_seconds, collect_seconds
        self._sleep = sleep
        self._lock = threading.Lock()
        self._waiting: list[_Waiter] = []
        self._collecting = False

    def send(self, request: LLMRequest) -> LLMResponse:
        """The answer to ``request``, through a batch job (blocks until the job has ended)."""
        waiter = _Waiter(request, request.request_hash(self.backend.name))
        with self._lock:
            self._waiting.append(waiter)
            if not self._collecting:
                self._collecting = True
                threading.Thread(target=self._run, name=f"batch {self.stage}", daemon=True).start()
        waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        assert waiter.response is not None
        return waiter.response

    def _run(self) -> None:
        self._sleep(self.collect_seconds)
        with self._lock:
            waiters, self._waiting, self._collecting = self._waiting, [], False
        try:
            for job_id, group in self._jobs_for(waiters).items():
                self._collect(job_id, group)
        except BaseException as err:  # noqa: BLE001 - every caller gets the error, none hangs
            for waiter in waiters:
                if not waiter.done.is_set():
                    waiter.settle(err)

    def _jobs_for(self, waiters: list[_Waiter]) -> dict[str, list[_Waiter]]:
        """Job id -> its callers: open jobs that already hold a request (a resumed run), then new
        jobs, one per model, for the rest (recorded before anyone waits on them)."""
        jobs: dict[str, list[_Waiter]] = {}
        fresh: dict[str, list[_Waiter]] = {}
        for waiter in waiters:
            open_job = self.jobs.open_batch_job(waiter.key, self.backend.name, waiter.request.model)
            if open_job is not None:
                jobs.setdefault(open_job, []).append(waiter)
            else:
                fresh.setdefault(waiter.request.model, []).append(waiter)
        for model, group in fresh.items():
            requests = {w.key: w.request for w in group}  # identical requests share one custom id
            job_id = self.backend.submit_batch(requests)
            self.jobs.record_batch_job(job_id, run_id=self.run_id, stage=self.stage, provider=self.backend.name,
                                       model=model, request_hashes=list(requests))
            jobs[job_id] = group
        return jobs

    def _collect(self, job_id: str, group: list[_Waiter]) -> None:
        while (status := self.backend.batch_status(job_id)) == "pending":
            self._sleep(self.poll_seconds)
        if status != "ended":
            self.jobs.finish_batch_job(job_id, status, f"the provider reports the job {status}")
            for waiter in group:
                waiter.settle(ProviderError(f"{self.backend.name}: batch {job_id} {status}", retryable=True))
            return
        results = self.backend.batch_results(job_id, {w.key: w.request for w in group})
        self.jobs.finish_batch_job(job_id, "ended")
        for waiter in group:
            waiter.settle(results.get(waiter.key) or ProviderError(
                f"{self.backend.name}: batch {job_id} has no result for a request", retryable=True))
