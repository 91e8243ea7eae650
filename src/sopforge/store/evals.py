"""Evaluation results in the store: ``eval_runs`` and ``eval_items`` (migration 010).

An item row is written once, when the item finishes, in its own short transaction, so a crash or a
Ctrl-C loses at most the items in flight; a resumed evaluation skips every item that has a row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from sopforge.errors import UserError

from . import queries as q
from .base import StoreBase, transaction

__all__ = ["EVAL_STATUSES", "EvalResults", "EvalRunRecord"]

EVAL_STATUSES = ("running", "succeeded", "failed", "interrupted", "pending")


class EvalRunRecord(BaseModel):
    """One row of ``eval_runs``."""

    id: str
    run_id: str
    options_key: str
    options: dict[str, Any]
    provider: str
    model: str
    agent: str
    artifacts: list[str] = Field(default_factory=list)
    export_dir: str
    status: str
    error: str | None = None
    items_total: int | None = None
    started_at: datetime
    finished_at: datetime | None = None


class EvalResults(StoreBase):
    """The store's evaluation tables (mixed into ``Store``)."""

    def create_eval(self, run_id: str, options: dict[str, Any], options_key: str, *, artifacts: list[str],
                    export_dir: str) -> str:
        """A new evaluation of ``run_id``, status ``running``; returns its id (``e-…``)."""
        with self._write() as con, transaction(con):
            eval_id = q.new_id("e", 8)
            con.execute("INSERT INTO eval_runs (id, run_id, options_key, options, provider, model, agent, artifacts, "
                        "export_dir, status, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
                        [eval_id, run_id, options_key, q.to_json(options, what="eval options"), options["provider"],
                         options["model"], options["agent"], q.to_json(artifacts, what="eval artifacts"),
                         export_dir, q.now()])
        return eval_id

    def resumable_eval(self, run_id: str, options_key: str) -> EvalRunRecord | None:
        """The newest unfinished evaluation of ``run_id`` with these options, or None."""
        with self._read() as con:
            row = q.fetch_one(con, "SELECT * FROM eval_runs WHERE run_id = ? AND options_key = ? AND status <> "
                              "'succeeded' ORDER BY started_at DESC LIMIT 1", [run_id, options_key])
        return EvalRunRecord(**row) if row else None

    def get_eval(self, eval_id_or_prefix: str) -> EvalRunRecord:
        """An evaluation by id or unique prefix.

        Raises:
            UserError: None or several match.
        """
        with self._read() as con:
            rows = q.fetch_dicts(con, "SELECT * FROM eval_runs WHERE starts_with(id, ?) ORDER BY started_at DESC",
                                 [eval_id_or_prefix])
        if len(rows) != 1:
            what = "no" if not rows else f"{len(rows)}"
            raise UserError(f"{what} evaluation matches {eval_id_or_prefix!r}: `sopforge eval report` lists them")
        return EvalRunRecord(**rows[0])

    def latest_eval(self, run_id: str | None = None) -> EvalRunRecord | None:
        """The newest evaluation (of one run, or of any)."""
        with self._read() as con:
            row = q.fetch_one(con, "SELECT * FROM eval_runs WHERE (? IS NULL OR run_id = ?) ORDER BY started_at DESC "
                              "LIMIT 1", [run_id, run_id])
        return EvalRunRecord(**row) if row else None

    def list_evals(self, limit: int = 50) -> list[EvalRunRecord]:
        with self._read() as con:
            rows = q.fetch_dicts(con, "SELECT * FROM eval_runs ORDER BY started_at DESC LIMIT ?", [limit])
        return [EvalRunRecord(**r) for r in rows]

    def set_eval_status(self, eval_id: str, status: str, *, error: str | None = None,
                        items_total: int | None = None) -> None:
        """Record how the evaluation stands (finished_at set unless it is running)."""
        if status not in EVAL_STATUSES:
            raise ValueError(f"eval status must be one of {EVAL_STATUSES}, got {status!r}")
        with self._write() as con, transaction(con):
            con.execute("UPDATE eval_runs SET status = ?, error = ?, items_total = coalesce(?, items_total), "
                        "finished_at = CASE WHEN ? = 'running' THEN NULL ELSE ? END WHERE id = ?",
                        [status, error, items_total, status, q.now(), eval_id])

    def done_items(self, eval_id: str, *, with_errors: bool = True) -> set[tuple[str, str, str, str]]:
        """(family, suite, agent, item_id) of the items already stored (those with errors optionally left out)."""
        with self._read() as con:
            rows = con.execute("SELECT family, suite, agent, item_id FROM eval_items WHERE eval_id = ? AND "
                               "(? OR status = 'done')", [eval_id, with_errors]).fetchall()
        return {tuple(r) for r in rows}

    def forget_errors(self, eval_id: str) -> int:
        """Delete the items stored with an error, so that they run again (``--retry-errors``)."""
        with self._write() as con, transaction(con):
            (n,) = con.execute("SELECT count(*) FROM eval_items WHERE eval_id = ? AND status = 'error'", [eval_id]).fetchone()
            con.execute("DELETE FROM eval_items WHERE eval_id = ? AND status = 'error'", [eval_id])
        return n

    def save_item(self, eval_id: str, family: str, record: dict[str, Any]) -> None:
        """Store one finished item (replacing an errored row when it was run again)."""
        values = [eval_id, family, record["suite"], record["agent"], record["item_id"],
                  "error" if record.get("error") else "done",
                  q.to_json(record.get("output") or {}, what="eval item output"),
                  q.to_json(record.get("score") or {}, what="eval item score"), record.get("error"),
                  int(record.get("llm_calls", 0)), int(record.get("input_tokens", 0)),
                  int(record.get("output_tokens", 0)), float(record.get("cost_usd", 0.0)),
                  float(record.get("latency_ms", 0.0)), q.now()]
        with self._write() as con, transaction(con):
            con.execute("DELETE FROM eval_items WHERE eval_id = ? AND family = ? AND suite = ? AND agent = ? "
                        "AND item_id = ?", values[:5])
            con.execute("INSERT INTO eval_items (eval_id, family, suite, agent, item_id, status, output, score, error, "
                        "llm_calls, input_tokens, output_tokens, cost_usd, latency_ms, finished_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)

    def eval_items(self, eval_id: str, family: str | None = None) -> list[dict[str, Any]]:
        """Stored items of an evaluation (of one family), in a stable order."""
        with self._read() as con:
            return q.fetch_dicts(con, "SELECT * FROM eval_items WHERE eval_id = ? AND (? IS NULL OR family = ?) "
                                 "ORDER BY family, suite, agent, item_id", [eval_id, family, family])
