"""One DuckDB instance per process: files are attached to it per connection, not opened as new instances."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb
import pytest

from sopforge.store import Store
from sopforge.store import connection, instance
from sopforge.store.connection import open_connection


@pytest.fixture
def instances(monkeypatch) -> list[str]:
    """Every DuckDB instance the store starts (the database each ``duckdb.connect`` names)."""
    started: list[str] = []
    real = duckdb.connect

    def counting(database=":memory:", *args, **kwargs):
        started.append(str(database))
        return real(database, *args, **kwargs)

    monkeypatch.setattr(connection.duckdb, "connect", counting)
    return started


def test_many_writes_and_reads_start_no_instance_per_connection(tmp_path, instances):
    store = Store(tmp_path / "s.duckdb")
    for i in range(5):
        run_id = store.create_run(f"theme {i}", f"t{i}", {})
        store.set_run_status(run_id, "succeeded")
        assert store.get_run(run_id).status == "succeeded"
    # Ten writes and five reads: at most the process's one in-memory instance was started (none when an
    # earlier test of this process started it), never the file itself.
    assert instances in ([], [":memory:"])


def test_the_file_is_detached_after_each_connection_so_another_process_can_write(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).create_run("first", "first", {})
    other = subprocess.run([sys.executable, "-c", "import duckdb, sys; "
                            "duckdb.connect(sys.argv[1]).execute('CREATE TABLE written_by_another (i INTEGER)')",
                            str(db)], capture_output=True, text=True, timeout=120)
    assert other.returncode == 0, other.stderr
    with open_connection(db, read_only=True, lock_timeout=2) as con:
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'written_by_another'"
                           ).fetchone() == (1,)


def test_a_nested_read_uses_the_write_connection_and_a_nested_write_in_a_read_is_refused(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).check_writable()
    with open_connection(db, read_only=False, lock_timeout=2) as outer:
        outer.execute("CREATE TABLE nested (i INTEGER)")
        with open_connection(db, read_only=True, lock_timeout=2) as inner:
            assert inner.execute("SELECT count(*) FROM nested").fetchone() == (0,)
        outer.execute("INSERT INTO nested VALUES (1)")  # the inner one's end left the file attached
    with open_connection(db, read_only=True, lock_timeout=2) as outer:
        with pytest.raises(duckdb.ConnectionException, match="read-only in this process"):
            with open_connection(db, read_only=False, lock_timeout=2):
                pass
        assert outer.execute("SELECT count(*) FROM nested").fetchone() == (1,)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_instance(tmp_path):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.create_run("parent", "parent", {})
    parents = instance._instance
    pid = os.fork()
    if pid == 0:  # the child: the parent's instance has none of its threads here
        code = 1
        try:
            Store(db).create_run("child", "child", {})
            code = 0 if instance._instance is not None and instance._instance is not parents else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert {r.theme for r in store.list_runs()} == {"parent", "child"}
