"""Schema migrations: applied automatically, once, in order, and recorded."""

from __future__ import annotations

import re
from importlib import resources

import duckdb
import pytest

from sopforge.errors import UserError
from sopforge.store import Store, release_connections
from sopforge.store.migrate import load_migrations

DOCUMENTED_TABLES = {"runs", "stage_runs", "artifacts", "artifact_edges", "llm_calls",
                     "validations", "reviews", "schema_migrations"}


def test_opening_for_write_creates_the_documented_tables_and_records_migrations(store, sql, db_path):
    assert not db_path.exists()
    store.check_writable()

    tables = {r[0] for r in sql("SELECT table_name FROM information_schema.tables")}
    assert DOCUMENTED_TABLES <= tables
    recorded = sql("SELECT version, name FROM schema_migrations ORDER BY version")
    assert recorded == [(m.version, m.name) for m in load_migrations()]
    assert recorded[0] == (1, "initial")


def test_reopening_applies_nothing_twice_and_keeps_data(db_path, sql):
    first = Store(db_path)
    run_id = first.create_run("loans", "loans", {})
    applied_before = sql("SELECT version, applied_at FROM schema_migrations ORDER BY version")

    for _ in range(3):  # new instances, as separate CLI invocations would create
        again = Store(db_path)
        again.check_writable()
        again.set_run_status(run_id, "succeeded")

    assert sql("SELECT version, applied_at FROM schema_migrations ORDER BY version") == applied_before
    assert Store(db_path).get_run(run_id).status == "succeeded"


def test_a_reader_on_a_missing_file_gets_an_empty_store(store, db_path):
    assert store.list_runs() == []
    assert db_path.exists()


def test_a_reader_migrates_a_database_without_the_schema(db_path):
    db_path.parent.mkdir(parents=True)
    duckdb.connect(str(db_path)).close()  # an empty DuckDB file, e.g. from an older tool

    assert Store(db_path).list_runs() == []
    assert Store(db_path).create_run("t", "t", {}).startswith("r-")


def test_a_database_from_a_newer_sopforge_is_refused_with_one_line(db_path):
    Store(db_path).check_writable()
    release_connections()
    con = duckdb.connect(str(db_path))
    con.execute("INSERT INTO schema_migrations VALUES (999, 'future', 'x', now())")
    con.close()

    with pytest.raises(UserError, match="newer sopforge") as err:
        Store(db_path).create_run("t", "t", {})
    assert str(db_path) in str(err.value)
    assert "\n" not in str(err.value)


def test_every_shipped_sql_file_is_a_numbered_migration():
    # A misnamed file would be silently skipped, leaving databases without its tables.
    folder = resources.files("sopforge.store").joinpath("migrations")
    sql_files = sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    assert sql_files, "no migrations shipped"
    assert all(re.fullmatch(r"\d{3}_[a-z0-9_]+\.sql", name) for name in sql_files), sql_files
    versions = [m.version for m in load_migrations()]
    assert versions == sorted(set(versions)) and len(versions) == len(sql_files)
