"""Apply the numbered SQL migrations in ``migrations/`` to a sopforge DuckDB file.

Migrations live next to this module as ``migrations/NNN_name.sql``. Each is applied once, in
order, inside its own transaction, and recorded in ``schema_migrations`` with a checksum of
its text. Applying is idempotent: reopening a database applies only what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources

import duckdb

from sopforge.errors import UserError

# This module is not called ``migrations.py``: that name is the folder of SQL files, and a
# module and a folder of the same name in one package make imports ambiguous to readers.

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")

_CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    checksum    TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL
)
"""


@dataclass(frozen=True)
class Migration:
    """One migration file.

    Attributes:
        version: The ``NNN`` prefix as an integer; migrations apply in this order.
        name: The part of the file name after the prefix, without ``.sql``.
        sql: The script text (may hold several statements).
    """

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """sha256 of the script, stored so an edited, already-applied migration is noticed."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def load_migrations() -> list[Migration]:
    """Read every ``NNN_name.sql`` shipped with the package, sorted by version.

    Returns:
        The migrations in the order they must be applied.

    Raises:
        RuntimeError: Two files share a version number (a packaging mistake).
    """
    folder = resources.files("sopforge.store").joinpath("migrations")
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        match = _NAME_RE.match(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise RuntimeError(f"two migrations share version {version:03d}: "
                               f"{found[version].name} and {match.group(2)}")
        found[version] = Migration(version, match.group(2), entry.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


def latest_version() -> int:
    """Highest migration version shipped with this code (0 when there are none)."""
    migrations = load_migrations()
    return migrations[-1].version if migrations else 0


def applied_versions(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """Versions already applied to the open database, with their checksums.

    Works on read-only connections; a database without the ledger table has none applied.
    """
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_name = 'schema_migrations' AND table_schema = 'main' AND table_catalog = current_database()"
    ).fetchone()[0]
    if not exists:
        return {}
    rows = con.execute("SELECT version, checksum FROM schema_migrations").fetchall()
    return {int(v): c for v, c in rows}


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when every shipped migration is applied (read-only callers use this to decide
    whether they must reopen for writing before reading)."""
    applied = applied_versions(con)
    return all(m.version in applied for m in load_migrations())


def apply_migrations(con: duckdb.DuckDBPyConnection, *, db_label: str) -> list[int]:
    """Apply every pending migration, each in its own transaction.

    Args:
        con: A read-write connection to the database.
        db_label: The database path, used in error messages.

    Returns:
        The versions applied by this call (empty when the schema was already current).

    Raises:
        UserError: The database holds migrations this code does not know, i.e. it was
            written by a newer sopforge.
    """
    con.execute(_CREATE_LEDGER)
    migrations = load_migrations()
    known = {m.version for m in migrations}
    applied = applied_versions(con)

    unknown = sorted(set(applied) - known)
    if unknown:
        raise UserError(f"{db_label} was written by a newer sopforge (schema migration "
                        f"{unknown[-1]:03d} is unknown here); upgrade sopforge or point "
                        f"SOPFORGE_HOME at another folder")

    done: list[int] = []
    for migration in migrations:
        if migration.version in applied:
            if applied[migration.version] != migration.checksum:
                # Not fatal: the schema it produced is already there; the edit only matters
                # for fresh databases, which is what a developer editing it usually wants.
                log.warning("migration %03d_%s changed after it was applied to %s",
                            migration.version, migration.name, db_label)
            continue
        con.begin()
        try:
            con.execute(migration.sql)
            con.execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at) "
                "VALUES (?, ?, ?, ?)",
                [migration.version, migration.name, migration.checksum,
                 datetime.now(timezone.utc)],
            )
            con.commit()
        except BaseException:
            con.rollback()
            raise
        done.append(migration.version)
        log.info("applied migration %03d_%s to %s", migration.version, migration.name, db_label)
    return done
