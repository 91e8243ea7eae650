"""The store as the LLM gateway's ledger: every call recorded, every saved answer served, no call paid twice.

``LedgerStore`` holds the ``llm_calls`` and ``batch_jobs`` side of :class:`sopforge.store.Store`
(``store.py`` holds runs, stage attempts, artifacts and reviews). Three guarantees, each against a
way a paid call used to be paid again or lost (issue 21):

- **Recorded before it can be lost.** A call is appended to this process's journal before it is queued
  for the database (``sopforge.store.journal``); a process killed before the write-behind commits it
  leaves the journal, which the next process folds into ``llm_calls``.
- **Every saved answer is a hit from the first lookup on.** The set of hashes that have an answer is
  read once per ``Store`` and published only when complete; a call recorded meanwhile joins it under
  the same lock.
- **A call in flight is waited for.** The gateway claims a request before sending it; another
  process (a resumed run, a concurrent run of the same theme) asking the same prompt waits for the
  claim and takes the answer instead of paying for it again.
- **A call another process answered since is found.** Every answer is announced in the ledger folder
  (``journal.announce_answer``) before its claim is released; a process holding a claim it did not wait
  for reads the announcements past where it last stopped, and takes an answer it finds there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sopforge.llm.types import LLMCallRecord, sha256_text

from . import journal
from . import queries as q
from .base import StoreBase, transaction
from .redact import redact_text, scrub

__all__ = ["ANSWERED", "LedgerStore"]

#: SQL condition of a call whose answer may be served from the response cache.
ANSWERED = "error IS NULL AND response IS NOT NULL AND NOT coalesce(rejected, FALSE)"


def _answers(record: Any) -> bool:
    return isinstance(record, LLMCallRecord) and record.error is None and record.response is not None


class LedgerStore(StoreBase):
    """LLM calls and batch jobs of a ``Store``; implements ``CallLedger``."""

    # --- LLM calls (CallLedger) -------------------------------------------------------

    def record_call(self, record: LLMCallRecord) -> None:
        """Store one LLM call (successful or not); secrets in ``params`` and key-like fragments in
        its error text are redacted.

        Journaled at once, then written behind (within ``FLUSH_SECONDS``, batched with the calls that
        end meanwhile), and always before any other operation of this process reads the file.
        """
        params = scrub(record.params)
        record = record.model_copy(update={"params": params, "error": redact_text(record.error)})
        self._queue_write(lambda con: q.insert_call(con, record, params), record, journaled=True)
        if _answers(record):
            journal.announce_answer(self.path, record.request_hash)
            with self._answered_lock:
                if self._answered is not None:
                    self._answered.add(record.request_hash)

    def cached_response(self, request_hash: str) -> LLMCallRecord | None:
        """The newest successful call with this request hash, or None (failed calls never
        answer from cache).

        The hashes that have an answer are read once per ``Store`` (one query), so the usual
        case, a request never asked before, costs no query at all; a call another process records
        later is found through :meth:`claim`, which waits for it.
        """
        queued = self._queued_answer(request_hash)
        if queued is not None:
            return queued
        if request_hash not in self._answered_hashes():
            return None
        return self._stored_answer(request_hash)

    @contextmanager
    def claim(self, request_hash: str, *, max_wait: float, lookup: bool = True) -> Iterator[LLMCallRecord | None]:
        """Hold the claim on a request while it is sent; yield the answer another holder recorded while
        this one waited for it (None: send it).

        Args:
            request_hash: The request about to be sent.
            max_wait: Longest this call could take its holder (timeouts and retries): a claim older than
                that is abandoned and taken over.
            lookup: False when the answer must be sampled afresh anyway (``rerun --from``).
        """
        with journal.claim_file(self.path, request_hash, max_wait=max_wait) as waited:
            found = lookup and (waited or self._answered_elsewhere(request_hash))
            yield self._answer_after_wait(request_hash) if found else None

    def _answered_elsewhere(self, request_hash: str) -> bool:
        """Whether another process announced an answer to ``request_hash`` after this one read the answered set."""
        self._answered_hashes()  # places the log's reading position, if the set was not read yet
        with self._answered_lock:
            if self._answered_log is None:
                return False
            return self._answered_log.announced(request_hash)

    def _queued_answer(self, request_hash: str) -> LLMCallRecord | None:
        for queued in reversed(self._queued()):  # recorded a moment ago, not written yet
            if _answers(queued) and queued.request_hash == request_hash:
                return queued
        return None

    def _answered_hashes(self) -> set[str]:
        # Published only once complete: a reader racing the first lookup used to see it half-filled.
        # A call recorded while it is read joins it under the same lock (record_call).
        with self._answered_lock:
            if self._answered is None:
                # Placed before the read, so an answer recorded while it runs is read from the log later.
                self._answered_log = journal.AnsweredLog(self.path)
                answered = {c.request_hash for c in self._queued() if _answers(c)}
                with self._read(flush=False) as con:
                    answered |= {h for (h,) in con.execute(
                        f"SELECT DISTINCT request_hash FROM llm_calls WHERE {ANSWERED}").fetchall()}
                self._answered = answered
            return self._answered

    def _stored_answer(self, request_hash: str) -> LLMCallRecord | None:
        with self._read(flush=False) as con:
            found = q.calls_where(con, f"request_hash = ? AND {ANSWERED} ORDER BY created_at DESC LIMIT 1",
                                  [request_hash])
        return found[0] if found else None

    def _answer_after_wait(self, request_hash: str) -> LLMCallRecord | None:
        """The answer the claim's previous holder recorded: still queued here, in its journal (not
        committed yet), or in the file (journals first: a commit empties them)."""
        found = self._queued_answer(request_hash) or journal.journaled_answer(self.path, request_hash) \
            or self._stored_answer(request_hash)
        if found is not None:
            with self._answered_lock:
                if self._answered is not None:
                    self._answered.add(request_hash)
        return found

    def reject_answers(self, stage_run_id: str) -> int:
        """Mark the answers of a failed stage attempt as rejected: kept, but never cached.

        Returns:
            How many calls were marked.
        """
        with self._answered_lock:
            self._answered = None
        with self._write() as con, transaction(con):
            return q.reject_stage_answers(con, stage_run_id)

    def call_history(self) -> dict[str, tuple[int, int]]:
        """Stage -> (mean prompt tokens, mean answer tokens) of its successful calls, over every run."""
        with self._read() as con:
            rows = con.execute(f"SELECT stage, avg(input_tokens), avg(output_tokens) FROM llm_calls "
                               f"WHERE {ANSWERED} AND input_tokens > 0 GROUP BY stage").fetchall()
        return {stage: (int(tin), int(tout)) for stage, tin, tout in rows}

    def run_cost(self, run_id: str) -> float:
        """What the run's calls cost so far (estimated from the price table)."""
        with self._read() as con:
            (usd,) = con.execute("SELECT coalesce(sum(cost_usd), 0) FROM llm_calls WHERE run_id = ?",
                                 [run_id]).fetchone()
        return float(usd)

    def calls_for_run(self, run_id: str, stage: str | None = None) -> list[LLMCallRecord]:
        """Calls recorded for a run (optionally one stage), oldest first."""
        with self._read() as con:
            return q.calls_where(con, "run_id = ? AND (? IS NULL OR stage = ?) ORDER BY created_at, id",
                                 [run_id, stage, stage])

    # --- batch jobs (sopforge.llm.batch.BatchJobs) ---------------------------------------

    def open_batch_job(self, request_hash: str, provider: str, model: str) -> str | None:
        """The newest job still open at the provider that holds this request, or None."""
        with self._read() as con:
            rows = con.execute("SELECT id, requests FROM batch_jobs WHERE status = 'submitted' AND provider = ? "
                               "AND model = ? ORDER BY created_at DESC", [provider, model]).fetchall()
        for job_id, requests in rows:
            if request_hash in json.loads(requests):
                return job_id
        return None

    def record_batch_job(self, job_id: str, *, run_id: str | None, stage: str, provider: str, model: str,
                         request_hashes: list[str]) -> None:
        """Remember a submitted job at once (not written behind): a run stopped while it is in
        progress must find it again."""
        with self._write() as con, transaction(con):
            con.execute("INSERT INTO batch_jobs (id, run_id, stage, provider, model, requests_hash, requests, status, "
                        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'submitted', now(), now())",
                        [job_id, run_id or "", stage, provider, model, sha256_text("\n".join(sorted(request_hashes))),
                         json.dumps(sorted(request_hashes))])

    def finish_batch_job(self, job_id: str, status: str, error: str | None = None) -> None:
        """A job ended (its answers are being recorded as calls) or will never answer."""
        with self._write() as con:
            con.execute("UPDATE batch_jobs SET status = ?, error = ?, updated_at = now() WHERE id = ?",
                        [status, error, job_id])

    def batch_jobs(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Batch jobs (of one run, or all), oldest first."""
        with self._read() as con:
            return q.fetch_dicts(con, "SELECT * FROM batch_jobs WHERE (? IS NULL OR run_id = ?) ORDER BY created_at",
                                 [run_id, run_id])
