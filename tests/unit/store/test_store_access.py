"""Access to the file: other processes, locks, threads and unwritable paths."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sopforge.errors import UserError
from sopforge.store import Store
from sopforge.store.connection import open_connection

READER = textwrap.dedent("""
    import sys, time
    from sopforge.store import Store
    store = Store(sys.argv[1], lock_timeout=20)
    # Read until the writer's progress has been seen twice over; counted in reads, not seconds,
    # because importing sopforge on a loaded CI host can take most of any fixed window.
    counts, reads, deadline = [], 0, time.monotonic() + float(sys.argv[2])
    while (reads < 5 or len(set(counts)) < 3) and time.monotonic() < deadline:
        runs = store.list_runs(limit=1000)
        assert not counts or len(runs) >= counts[-1], "runs disappeared"
        counts.append(len(runs))
        if runs:
            store.run_summary(runs[0].id)
        reads += 1
    print(reads, len(set(counts)), counts[-1])
""")

HOLDER = textwrap.dedent("""
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1], read_only=sys.argv[3] == "ro")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    con.close()
""")


def _python(script: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _hold_lock(db_path, seconds: float, mode: str = "rw") -> subprocess.Popen:
    holder = _python(HOLDER, db_path, seconds, mode)
    assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
    return holder


def test_another_process_reads_while_this_one_writes(db_path, save):
    store = Store(db_path, lock_timeout=20)
    store.check_writable()
    reader = _python(READER, db_path, 60)

    written = 0
    while reader.poll() is None:  # write for as long as the other process reads
        run_id = store.create_run(f"theme {written}", f"theme-{written}", {})
        stage_run = store.start_stage(run_id, "context")
        save(run_id, "context", stage_run_id=stage_run)
        written += 1

    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    reads, distinct_counts, seen = map(int, out.split())
    assert reads >= 5
    assert distinct_counts >= 3  # the reader saw the writer's progress, not one frozen snapshot
    assert 0 < seen <= written
    assert len(store.list_runs(limit=1000)) == written


def test_a_lock_held_too_long_is_a_one_line_user_error_naming_the_file(db_path):
    Store(db_path).check_writable()
    holder = _hold_lock(db_path, 10)
    try:
        store = Store(db_path, lock_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(UserError, match="another sopforge process") as err:
            store.create_run("t", "t", {})
        assert time.monotonic() - started >= 0.5  # it did wait before giving up
        assert str(db_path) in str(err.value) and "\n" not in str(err.value)
        with pytest.raises(UserError, match="another sopforge process"):
            store.list_runs()  # readers are blocked by a writer too
    finally:
        holder.kill()
        holder.wait()


def test_a_briefly_held_lock_is_waited_out(db_path):
    Store(db_path).check_writable()
    holder = _hold_lock(db_path, 1)
    try:
        run_id = Store(db_path, lock_timeout=20).create_run("t", "t", {})
    finally:
        holder.wait(timeout=30)
    assert Store(db_path).get_run(run_id).theme == "t"


FILE_LOCK_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1] + ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
""")


def test_the_file_lock_keeps_other_processes_out_before_duckdb_opens_and_after_it_closes(db_path):
    # DuckDB's own lock does not cover a connection's opening and closing (benchmarks/store_lost_writes.py):
    # a process holding only sopforge's lock on <database>.lock, with no DuckDB connection at all, keeps
    # readers and writers out.
    Store(db_path).check_writable()
    holder = _python(FILE_LOCK_HOLDER, db_path, 10)
    assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
    try:
        store = Store(db_path, lock_timeout=0.5)
        with pytest.raises(UserError, match="in use by another sopforge process"):
            store.create_run("t", "t", {})
        with pytest.raises(UserError, match="in use by another sopforge process"):
            store.list_runs()
    finally:
        holder.kill()
        holder.wait()
    assert Store(db_path, lock_timeout=0.5).list_runs() == []  # and the lock is free again once it is gone


def test_one_file_reached_by_two_paths_is_one_file_to_this_process(tmp_path):
    # A link to the home and the home itself: DuckDB opens both as one database, which refuses a read-only
    # connection while a read-write one is open. The second thread waits for the first one's connection.
    home = tmp_path / "home"
    link = tmp_path / "link"
    link.symlink_to(home, target_is_directory=True)
    Store(home / "sopforge.duckdb").check_writable()
    writing = threading.Event()

    def write_for_a_while() -> None:
        with open_connection(home / "sopforge.duckdb", read_only=False, lock_timeout=5) as con:
            writing.set()
            time.sleep(0.5)
            con.execute("CREATE TABLE marker (i INTEGER)")

    writer = threading.Thread(target=write_for_a_while)
    writer.start()
    assert writing.wait(10)
    with open_connection(link / "sopforge.duckdb", read_only=True, lock_timeout=5) as con:
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'marker'").fetchone() == (1,)
    writer.join()


@pytest.mark.parametrize("inner_path", ["same", "link"])
def test_a_connection_opened_inside_another_shares_its_lock(tmp_path, inner_path):
    home = tmp_path / "home"
    (tmp_path / "link").symlink_to(home, target_is_directory=True)
    db_path = home / "sopforge.duckdb"
    Store(db_path).check_writable()
    with open_connection(db_path, read_only=False, lock_timeout=2) as outer:
        inner_db = db_path if inner_path == "same" else tmp_path / "link" / "sopforge.duckdb"
        with open_connection(inner_db, read_only=False, lock_timeout=2) as inner:  # would wait for itself
            inner.execute("CREATE TABLE nested (i INTEGER)")
        outer.execute("INSERT INTO nested VALUES (1)")
    assert Store(db_path).list_runs() == []


def test_reads_do_not_take_the_write_lock(db_path):
    store = Store(db_path, lock_timeout=0)
    run_id = store.create_run("t", "t", {})
    holder = _hold_lock(db_path, 10, mode="ro")  # e.g. `sopforge status` in another terminal
    try:
        assert store.get_run(run_id).theme == "t"  # readers share the file at once
        with pytest.raises(UserError, match="in use by another sopforge process"):
            Store(db_path, lock_timeout=0.3).create_run("t", "t", {})  # writers must wait
    finally:
        holder.kill()
        holder.wait()


def test_threads_of_one_process_can_mix_reads_and_writes(store):
    store.check_writable()

    def work(i: int) -> None:
        run_id = store.create_run(f"t{i}", f"t{i}", {})
        store.list_runs()
        store.get_run(run_id)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(20)))
    assert len(store.list_runs()) == 20


def _assert_unwritable(store: Store, path) -> None:
    with pytest.raises(UserError) as err:
        store.check_writable()
    message = str(err.value)
    assert str(path) in message and "SOPFORGE_HOME" in message and "\n" not in message
    with pytest.raises(UserError):
        store.create_run("t", "t", {})


def test_parent_that_cannot_be_created_is_a_user_error(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    path = tmp_path / "afile" / "home" / "sopforge.duckdb"
    _assert_unwritable(Store(path), path)


def test_a_file_in_the_way_is_named(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(UserError, match=f"{tmp_path / 'afile'} is a file, not a folder"):
        Store(tmp_path / "afile" / "home" / "sopforge.duckdb").check_writable()


def test_a_home_linked_to_a_missing_folder_names_the_link(tmp_path):
    home = tmp_path / "home"
    home.symlink_to(tmp_path / "gone")
    path = home / "sopforge.duckdb"
    _assert_unwritable(Store(path), path)
    with pytest.raises(UserError, match=f"{home} is a link to {tmp_path / 'gone'}, which does not exist"):
        Store(path).check_writable()


def test_a_directory_at_the_database_path_is_a_user_error(tmp_path):
    path = tmp_path / "sopforge.duckdb"
    path.mkdir()
    _assert_unwritable(Store(path), path)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_a_read_only_folder_is_a_user_error(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        _assert_unwritable(Store(folder / "sopforge.duckdb"), folder / "sopforge.duckdb")
    finally:
        folder.chmod(0o700)


def test_check_writable_creates_a_ready_database(tmp_path):
    path = tmp_path / "new" / "deeper" / "sopforge.duckdb"
    Store(path).check_writable()
    assert path.is_file()
    assert Store(path).list_runs() == []
