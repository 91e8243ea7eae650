"""SQL for deleting whole runs without breaking the lineage of the runs that remain.

A run owns its rows in every table: ``runs``, ``stage_runs``, ``llm_calls``, ``eval_runs``, ``eval_items``, ``review_requests``
and ``funnel`` by ``run_id``; ``artifacts`` it produced, with their ``validations``,
``dataset_rows``, lineage ``artifact_edges`` and ``reviews``. Another run may depend on those
artifacts: it reused one (a ``stage_runs`` row of status ``reused``), or built one of its own
artifacts from it (an ``artifact_edges`` row). Deleting the first run would leave the second
pointing at nothing, so such a deletion is refused and the dependents are named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sopforge.errors import UserError

from . import queries as q
from .base import StoreBase
from .records import LIVE_STATUSES, RunRecord

__all__ = ["Dependency", "RunDeletion", "RunHousekeeping", "delete_rows", "dependencies"]


@dataclass
class Dependency:
    """Another run that uses artifacts of a run about to be deleted.

    Attributes:
        run_id: The run that would be deleted.
        dependent_run: The run that uses its artifacts.
        artifacts: ``stage vN (id)`` of each artifact it uses.
    """

    run_id: str
    dependent_run: str
    artifacts: list[str] = field(default_factory=list)

    def describe(self) -> str:
        shown = ", ".join(self.artifacts[:4]) + (", ..." if len(self.artifacts) > 4 else "")
        return f"run {self.dependent_run} uses its artifacts ({shown})"


@dataclass
class RunDeletion:
    """What deleting runs removed from the database (or would remove, for a dry run).

    Attributes:
        runs: The runs deleted.
        artifacts: Their artifacts' ids (datasets are also files named by these ids).
        rows: Rows deleted per table.
        kept: Runs asked for but kept, with the reason (``prune`` keeps what others depend on).
    """

    runs: list[RunRecord] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)


_DEPENDENTS_SQL = """
WITH doomed AS (SELECT id, run_id, stage, version FROM artifacts WHERE list_contains($runs, run_id)),
used AS (
    SELECT s.run_id AS dependent, d.run_id AS owner, d.id, d.stage, d.version
    FROM stage_runs s JOIN doomed d ON s.artifact_id = d.id
    WHERE NOT list_contains($runs, s.run_id)
    UNION
    SELECT c.run_id, d.run_id, d.id, d.stage, d.version
    FROM artifact_edges e JOIN doomed d ON e.parent = d.id JOIN artifacts c ON c.id = e.child
    WHERE NOT list_contains($runs, c.run_id)
)
SELECT owner, dependent, list(DISTINCT stage || ' v' || version || ' (' || id || ')' ORDER BY stage || ' v' || version || ' (' || id || ')')
FROM used GROUP BY owner, dependent ORDER BY owner, dependent
"""


def dependencies(con: q.Con, run_ids: list[str]) -> list[Dependency]:
    """Runs outside ``run_ids`` that reuse, or were built from, artifacts of runs in ``run_ids``."""
    rows = con.execute(_DEPENDENTS_SQL, {"runs": run_ids}).fetchall()
    return [Dependency(owner, dependent, list(used)) for owner, dependent, used in rows]


# Each table a run owns and how its rows are found; order matters only for readability
# (there are no foreign keys, see migration 001), and everything runs in one transaction.
_DELETES = (
    ("validations", "artifact_id IN (SELECT id FROM artifacts WHERE list_contains($runs, run_id))"),
    ("dataset_rows", "artifact_id IN (SELECT id FROM artifacts WHERE list_contains($runs, run_id))"),
    ("funnel", "list_contains($runs, run_id) OR artifact_id IN "
               "(SELECT id FROM artifacts WHERE list_contains($runs, run_id))"),
    ("artifact_edges", "child IN (SELECT id FROM artifacts WHERE list_contains($runs, run_id))"),
    ("reviews", "list_contains($runs, run_id) OR artifact_id IN "
                "(SELECT id FROM artifacts WHERE list_contains($runs, run_id))"),
    ("review_requests", "list_contains($runs, run_id)"),
    ("llm_calls", "list_contains($runs, run_id)"),
    ("eval_items", "eval_id IN (SELECT id FROM eval_runs WHERE list_contains($runs, run_id))"),
    ("eval_runs", "list_contains($runs, run_id)"),
    ("stage_runs", "list_contains($runs, run_id)"),
    ("artifacts", "list_contains($runs, run_id)"),
    ("runs", "list_contains($runs, id)"),
)


def delete_rows(con: q.Con, run_ids: list[str]) -> dict[str, int]:
    """Delete every row the runs own (call inside a transaction, after :func:`dependencies` is empty).

    Returns:
        Rows deleted per table.
    """
    counts = {}
    for table, where in _DELETES:
        (n,) = con.execute(f"SELECT count(*) FROM {table} WHERE {where}", {"runs": run_ids}).fetchone()
        con.execute(f"DELETE FROM {table} WHERE {where}", {"runs": run_ids})
        counts[table] = n
    return counts


class RunHousekeeping(StoreBase):
    """Deleting runs and pruning old ones, with the lineage of the remaining runs kept whole."""

    def delete_runs(self, run_ids: list[str], *, dry_run: bool = False, force: bool = False) -> RunDeletion:
        """Delete the runs and every row they own, in one transaction.

        Args:
            run_ids: Full run ids.
            dry_run: Count what would be deleted, then roll back.
            force: Delete a run that still looks live (running or paused, with its process alive
                or unknown).

        Raises:
            UserError: A run is still live (without ``force``), or another run uses its artifacts.
        """
        with self._write() as con:
            con.begin()  # the checks and the deletes see the same rows: nobody writes in between
            try:
                runs = [q.run_record(r) for r in q.fetch_dicts(
                    con, "SELECT * FROM runs WHERE list_contains(?, id) ORDER BY created_at", [run_ids])]
                live = [r for r in runs if r.status in LIVE_STATUSES]
                if live and not force:
                    r = live[0]
                    raise UserError(f"run {r.id} is still {r.status.replace('_', ' ')}"
                                    f"{f' (pid {r.owner_pid} on {r.owner_host})' if r.owner_pid else ''}: "
                                    f"stop it first, or pass --force if you know its process is gone")
                blocking = dependencies(con, run_ids)
                if blocking:
                    first = blocking[0]
                    others = sorted({d.dependent_run for d in blocking})
                    raise UserError(f"run {first.run_id} cannot be deleted: {first.describe()}; delete "
                                    f"{', '.join(others)} too (in the same command), or keep it")
                artifacts = [a for (a,) in con.execute(
                    "SELECT id FROM artifacts WHERE list_contains(?, run_id) ORDER BY id", [run_ids]).fetchall()]
                rows = delete_rows(con, run_ids)
            except BaseException:
                con.rollback()
                raise
            if dry_run:
                con.rollback()
            else:
                con.commit()
        return RunDeletion(runs=runs, artifacts=artifacts, rows=rows)

    def prune(self, statuses: list[str], *, before: datetime | None = None, dry_run: bool = False) -> RunDeletion:
        """Delete every run with one of ``statuses`` (created before ``before``), except those
        other runs depend on: a failed run's context is often what its successful rerun reused.

        Returns:
            What was deleted, and in ``kept`` each matching run that was kept and why.
        """
        bad = sorted(set(statuses) & set(LIVE_STATUSES))
        if bad:
            raise UserError(f"runs that are {', '.join(bad)} cannot be pruned: stop them first")
        with self._read() as con:
            candidates = [q.run_record(r) for r in q.fetch_dicts(con, "SELECT * FROM runs ORDER BY created_at")]
            chosen = {r.id for r in candidates if r.status in statuses and (before is None or r.created_at < before)}
            kept: dict[str, str] = {}
            while True:  # dropping one run from the set can make a run it used depended on from outside
                outside = [d for d in dependencies(con, sorted(chosen)) if d.dependent_run not in chosen]
                if not outside:
                    break
                for d in outside:
                    chosen.discard(d.run_id)
                    kept.setdefault(d.run_id, d.describe())
        if not chosen:
            return RunDeletion(kept=kept)
        deletion = self.delete_runs(sorted(chosen), dry_run=dry_run)
        deletion.kept = kept
        return deletion
