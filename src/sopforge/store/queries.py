"""SQL of the sopforge store, as small functions over an open connection.

Every value reaches DuckDB as a ``?`` parameter; no SQL is built from values. Functions here
never open, commit or close connections: ``Store`` decides transaction boundaries, so a
stage's artifact, edges, validations and stage-run update commit or vanish together.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timezone
from typing import Any

import duckdb

from sopforge.llm.types import LLMCallRecord, sha256_json
from sopforge.checks import CheckResult
from sopforge.funnel import COUNTS as FUNNEL_COUNTS, FunnelRow

from .owner import Owner
from .records import LIVE_STATUSES, ArtifactRecord, RunRecord, StageRunRecord, ValidationRecord

Con = duckdb.DuckDBPyConnection

_JSON_COLUMNS = {"config", "content", "details", "params", "prompt", "raw", "tool_calls", "options", "artifacts",
                 "output", "score"}


def now() -> datetime:
    """Current time in UTC; Python's clock, so stage windows and call times compare exactly."""
    return datetime.now(timezone.utc)


def new_id(prefix: str, hex_digits: int) -> str:
    """A short readable id such as ``r-3fa94c0b12``."""
    return f"{prefix}-{secrets.token_hex((hex_digits + 1) // 2)[:hex_digits]}"


def to_json(value: Any, *, what: str) -> str:
    """Serialise for a JSON column, refusing anything JSON cannot represent.

    Strict on purpose: silently stringifying an object would store something nobody can
    query or load back.

    Raises:
        ValueError: ``value`` holds objects JSON cannot encode (or NaN/Infinity).
    """
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from exc


def content_hash(content: Any) -> str:
    """sha256 of canonical JSON; the same function the LLM layer uses for request hashes."""
    return sha256_json(content)


def fetch_dicts(con: Con, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Run a query and return rows as dicts, with JSON columns decoded."""
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    rows = []
    for values in cur.fetchall():
        row = dict(zip(names, values))
        for key in _JSON_COLUMNS.intersection(row):
            if isinstance(row[key], str):
                row[key] = json.loads(row[key])
        rows.append(row)
    return rows


def fetch_one(con: Con, sql: str, params: list[Any] | None = None) -> dict[str, Any] | None:
    rows = fetch_dicts(con, sql, params)
    return rows[0] if rows else None


# --- runs ---------------------------------------------------------------------------------

def insert_run(con: Con, run_id: str, theme: str, theme_slug: str, config: dict[str, Any], owner: Owner) -> None:
    ts = now()
    con.execute(
        "INSERT INTO runs (id, theme, theme_slug, config, status, error, flow_run_id, created_at, updated_at, "
        "owner_host, owner_pid, owner_started, heartbeat_at) VALUES (?, ?, ?, ?, 'running', NULL, NULL, ?, ?, ?, ?, ?, ?)",
        [run_id, theme, theme_slug, to_json(config, what="run config"), ts, ts, owner.host, owner.pid,
         owner.started, ts],
    )


def run_owner(run: RunRecord) -> Owner | None:
    """The recorded owner of a run (None for runs stored before owners were recorded)."""
    if run.owner_host is None or run.owner_pid is None:
        return None
    return Owner(run.owner_host, run.owner_pid, run.owner_started)


def owner_gone(run: RunRecord) -> bool:
    """True when the run needs a live process (running, awaiting_review) and its owner is gone."""
    owner = run_owner(run)
    return run.status in LIVE_STATUSES and owner is not None and not owner.alive(run.heartbeat_at)


def interrupted_error(run: RunRecord) -> str:
    owner = run_owner(run)
    return (f"interrupted: its process ({owner.describe() if owner else 'unknown'}) is gone; "
            f"resume it with `sopforge rerun {run.id}`")


def interrupt_run(con: Con, run_id: str, error: str, stage_error: str, *, only_live: bool = False) -> None:
    """Record a run as ``interrupted``: its stage attempts still running too, its open review requests
    expired (nobody waits at that gate any more). ``only_live``: leave a run that already ended as it is."""
    ts = now()
    live = " AND list_contains(?, status)" if only_live else ""
    con.execute(f"UPDATE runs SET status = 'interrupted', error = coalesce(error, ?), updated_at = ? WHERE id = ?{live}",
                [error, ts, run_id, *([list(LIVE_STATUSES)] if only_live else [])])
    con.execute("UPDATE stage_runs SET status = 'interrupted', finished_at = ?, error = ? "
                "WHERE run_id = ? AND status = 'running'", [ts, stage_error, run_id])
    con.execute("UPDATE review_requests SET status = 'expired', closed_at = ? WHERE run_id = ? AND status = 'open'",
                [ts, run_id])


def run_record(row: dict[str, Any]) -> RunRecord:
    """A ``runs`` row as the user should see it: a live status whose owner is gone is ``interrupted``."""
    run = RunRecord(**row)
    if owner_gone(run):
        run = run.model_copy(update={"status": "interrupted", "error": run.error or interrupted_error(run)})
    return run


def runs_matching(con: Con, prefix: str) -> list[RunRecord]:
    """Runs whose id equals or starts with ``prefix`` (with or without the ``r-``)."""
    exact = fetch_dicts(con, "SELECT * FROM runs WHERE id = ?", [prefix])
    if exact:
        return [run_record(exact[0])]
    rows = fetch_dicts(
        con, "SELECT * FROM runs WHERE starts_with(id, ?) OR starts_with(id, 'r-' || ?) "
             "ORDER BY created_at DESC LIMIT 10", [prefix, prefix])
    return [run_record(r) for r in rows]


# --- stage runs ---------------------------------------------------------------------------

def insert_stage_run(con: Con, run_id: str, stage: str, *, status: str = "running",
                     artifact_id: str | None = None, family: str | None = None) -> str:
    """Insert the next attempt of ``stage`` in ``run_id`` and return its id."""
    attempt = con.execute(
        "SELECT coalesce(max(attempt), 0) + 1 FROM stage_runs WHERE run_id = ? AND stage = ?",
        [run_id, stage]).fetchone()[0]
    stage_run_id = new_id("s", 12)
    ts = now()
    con.execute(
        "INSERT INTO stage_runs (id, run_id, stage, family, attempt, status, artifact_id, error, started_at, "
        "finished_at, llm_calls, input_tokens, output_tokens, cost_usd) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, 0, 0, 0, 0)",
        [stage_run_id, run_id, stage, family, attempt, status, artifact_id, ts,
         None if status == "running" else ts],
    )
    return stage_run_id


def finish_stage_run(con: Con, stage_run_id: str, status: str, *, artifact_id: str | None,
                     error: str | None) -> None:
    """Close a stage run and copy in the LLM accounting of calls made while it ran.

    Calls are matched by run and stage and by ``created_at`` within the attempt's window,
    so earlier attempts of the same stage keep their own totals.

    Raises:
        ValueError: No stage run has that id.
    """
    row = con.execute("SELECT run_id, stage, started_at FROM stage_runs WHERE id = ?",
                      [stage_run_id]).fetchone()
    if row is None:
        raise ValueError(f"unknown stage run {stage_run_id!r}")
    run_id, stage, started_at = row
    finished_at = now()
    n, tin, tout, cost = con.execute(
        "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cost_usd), 0) FROM llm_calls "
        "WHERE run_id = ? AND stage = ? AND created_at >= ? AND created_at <= ?",
        [run_id, stage, started_at, finished_at]).fetchone()
    con.execute(
        "UPDATE stage_runs SET status = ?, artifact_id = coalesce(?, artifact_id), error = ?, "
        "finished_at = ?, llm_calls = ?, input_tokens = ?, output_tokens = ?, cost_usd = ? "
        "WHERE id = ?",
        [status, artifact_id, error, finished_at, n, tin, tout, cost, stage_run_id],
    )


def reject_stage_answers(con: Con, stage_run_id: str) -> int:
    """Flag the calls a stage attempt made (same window as ``finish_stage_run``) as rejected."""
    row = con.execute("SELECT run_id, stage, started_at FROM stage_runs WHERE id = ?", [stage_run_id]).fetchone()
    if row is None:
        raise ValueError(f"unknown stage run {stage_run_id!r}")
    run_id, stage, started_at = row
    where = "run_id = ? AND stage = ? AND created_at >= ?"
    (count,) = con.execute(f"SELECT count(*) FROM llm_calls WHERE {where}", [run_id, stage, started_at]).fetchone()
    con.execute(f"UPDATE llm_calls SET rejected = TRUE WHERE {where}", [run_id, stage, started_at])
    return count


def stage_runs_for(con: Con, run_id: str) -> list[StageRunRecord]:
    rows = fetch_dicts(con, "SELECT * FROM stage_runs WHERE run_id = ? ORDER BY started_at, attempt",
                       [run_id])
    return [StageRunRecord(**r) for r in rows]


# --- artifacts ----------------------------------------------------------------------------

def insert_artifact(con: Con, *, run_id: str, stage: str, family: str | None, kind: str, content_json: str,
                    content_sha: str, input_key: str, template_id: str | None,
                    template_hash: str | None, model: str | None, status: str) -> tuple[str, int]:
    """Insert the next version of ``(run_id, stage)``; return ``(artifact_id, version)``."""
    version = con.execute(
        "SELECT coalesce(max(version), 0) + 1 FROM artifacts WHERE run_id = ? AND stage = ?",
        [run_id, stage]).fetchone()[0]
    artifact_id = new_id("a", 12)
    con.execute(
        "INSERT INTO artifacts (id, run_id, stage, family, kind, version, content, content_hash, input_key, "
        "template_id, template_hash, model, created_at, status) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [artifact_id, run_id, stage, family, kind, version, content_json, content_sha, input_key,
         template_id, template_hash, model, now(), status],
    )
    return artifact_id, version


def supersede_earlier(con: Con, run_id: str, stage: str, keep_id: str) -> None:
    """Mark earlier live versions of ``(run_id, stage)`` superseded; rejected ones stay rejected
    and approved ones stay approved (an approval is never silently replaced)."""
    con.execute(
        "UPDATE artifacts SET status = 'superseded' WHERE run_id = ? AND stage = ? AND id <> ? "
        "AND status IN ('draft', 'validated')",
        [run_id, stage, keep_id],
    )


def missing_artifacts(con: Con, ids: list[str]) -> list[str]:
    """Those of ``ids`` that are not in ``artifacts``."""
    if not ids:
        return []
    present = {r[0] for r in con.execute("SELECT id FROM artifacts WHERE list_contains(?, id)",
                                         [ids]).fetchall()}
    return [i for i in ids if i not in present]


def insert_rows(con: Con, table: str, columns: list[str], rows: list[list[Any]], chunk: int = 100) -> None:
    """Insert ``rows`` with one ``INSERT ... VALUES (...), (...)`` per ``chunk`` rows (``table`` and ``columns``
    are constants of this package). DuckDB parses and plans each statement, about a millisecond here, which a
    statement per row (or ``executemany``, which runs one per row) pays for every row: 40 validations took
    48 ms one at a time, 37 with ``executemany``, 9 in one statement."""
    row = "(" + ", ".join("?" for _ in columns) + ")"
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES " + ", ".join(row for _ in part),
                    [value for r in part for value in r])


def insert_edges(con: Con, child: str, parents: list[str]) -> None:
    """Record that ``child`` was built from each of ``parents``."""
    insert_rows(con, "artifact_edges", ["child", "parent"],
                [[child, parent] for parent in dict.fromkeys(parents)])  # dedupe, keep order


def insert_dataset_rows(con: Con, artifact_id: str, rows: list[dict[str, Any]], id_field: str | None) -> None:
    """Bulk-insert rows through an Arrow table: thousands of rows in one statement, not one each."""
    import pyarrow as pa

    table = pa.table({
        "artifact_id": [artifact_id] * len(rows),
        "ordinal": list(range(len(rows))),
        "row_id": [None if id_field is None else str(r.get(id_field)) for r in rows],
        "data": [to_json(r, what=f"dataset row {i}") for i, r in enumerate(rows)],
    })
    con.register("_incoming_rows", table)
    try:
        con.execute("INSERT INTO dataset_rows SELECT artifact_id, ordinal, row_id, data::JSON FROM _incoming_rows")
    finally:
        con.unregister("_incoming_rows")


def dataset_rows(con: Con, artifact_id: str) -> list[dict[str, Any]]:
    found = con.execute("SELECT data FROM dataset_rows WHERE artifact_id = ? ORDER BY ordinal", [artifact_id]).fetchall()
    return [json.loads(d) for (d,) in found]


def insert_funnel(con: Con, artifact_id: str, run_id: str, stage: str, rows: list[FunnelRow], *,
                  family: str | None = None) -> None:
    insert_rows(con, "funnel", ["artifact_id", "run_id", "stage", "family", "ordinal", "component", "item_type",
                                *FUNNEL_COUNTS],
                [[artifact_id, run_id, stage, family, i, r.component, r.item_type, *(getattr(r, c) for c in FUNNEL_COUNTS)]
                 for i, r in enumerate(rows)])


def funnel_rows(con: Con, artifact_id: str) -> list[FunnelRow]:
    found = con.execute(f"SELECT component, item_type, {', '.join(FUNNEL_COUNTS)} FROM funnel "
                        "WHERE artifact_id = ? ORDER BY ordinal", [artifact_id]).fetchall()
    return [FunnelRow(component=c, item_type=t, **dict(zip(FUNNEL_COUNTS, counts))) for c, t, *counts in found]


def insert_validations(con: Con, artifact_id: str, checks: list[CheckResult],
                       details_json: list[str]) -> None:
    """Store check results in the order they ran (``details_json`` pre-serialised)."""
    ts = now()
    insert_rows(con, "validations", ["id", "artifact_id", "ordinal", "check_name", "passed", "severity", "message",
                                     "details", "created_at"],
                [[new_id("v", 12), artifact_id, ordinal, check.name, check.passed, check.severity, check.message,
                  details, ts] for ordinal, (check, details) in enumerate(zip(checks, details_json, strict=True))])


def get_artifact(con: Con, artifact_id: str) -> ArtifactRecord | None:
    row = fetch_one(con, "SELECT * FROM artifacts WHERE id = ?", [artifact_id])
    return ArtifactRecord(**row) if row else None


def artifacts_where(con: Con, clause: str, params: list[Any]) -> list[ArtifactRecord]:
    """Artifacts matching ``WHERE <clause>`` (a constant of this package; values go in ``params``)."""
    rows = fetch_dicts(con, f"SELECT * FROM artifacts WHERE {clause}", params)
    return [ArtifactRecord(**r) for r in rows]


def validations_for(con: Con, artifact_id: str) -> list[ValidationRecord]:
    rows = fetch_dicts(con, "SELECT * FROM validations WHERE artifact_id = ? ORDER BY ordinal",
                       [artifact_id])
    return [ValidationRecord(**r) for r in rows]


DESCENDANTS_SQL = """
WITH RECURSIVE descendants(id) AS (
    SELECT child FROM artifact_edges WHERE parent = ?
    UNION
    SELECT e.child FROM artifact_edges e JOIN descendants d ON e.parent = d.id
)
SELECT a.* FROM artifacts a JOIN descendants d ON a.id = d.id
ORDER BY a.created_at, a.id
"""


# --- llm calls ----------------------------------------------------------------------------

_CALL_COLUMNS = list(LLMCallRecord.model_fields)


def insert_call(con: Con, record: LLMCallRecord, params: dict[str, Any]) -> None:
    """Insert one call; recording the same call id twice keeps the first row."""
    values = record.model_dump()
    values["params"] = to_json(params, what="LLM call params")
    values["prompt"] = to_json(values["prompt"], what="LLM call prompt")
    values["raw"] = None if values["raw"] is None else to_json(values["raw"], what="LLM raw response")
    values["tool_calls"] = None if values["tool_calls"] is None else to_json(values["tool_calls"], what="LLM tool calls")
    created = values["created_at"]
    if created.tzinfo is None:  # the record's default is UTC; treat naive times the same way
        values["created_at"] = created.replace(tzinfo=timezone.utc)
    placeholders = ", ".join("?" for _ in _CALL_COLUMNS)
    con.execute(
        f"INSERT INTO llm_calls ({', '.join(_CALL_COLUMNS)}) VALUES ({placeholders}) "
        "ON CONFLICT (id) DO NOTHING",
        [values[c] for c in _CALL_COLUMNS],
    )


def calls_where(con: Con, clause: str, params: list[Any]) -> list[LLMCallRecord]:
    """Calls matching ``WHERE <clause>`` (a constant of this package; values go in ``params``)."""
    rows = fetch_dicts(con, f"SELECT {', '.join(_CALL_COLUMNS)} FROM llm_calls WHERE {clause}", params)
    return [LLMCallRecord(**r) for r in rows]
