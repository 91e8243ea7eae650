"""A process that opts in (the CLI) keeps its read-only connection between reads: a burst of reads
opens the file once, a write in between is seen, and another process still gets to write."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import duckdb
import pytest

from sopforge.store import Store, linger_reads
from sopforge.store import connection

LINGERING_READER = textwrap.dedent("""
    import sys, time
    from sopforge.store import Store, linger_reads
    linger_reads()
    store = Store(sys.argv[1], lock_timeout=20)
    print("reading", flush=True)
    deadline, reads = time.monotonic() + float(sys.argv[2]), 0
    while time.monotonic() < deadline:
        store.list_runs(limit=1000)
        reads += 1
    print(reads)
""")


@pytest.fixture
def opened(monkeypatch) -> list[bool]:
    """Every time the store opens the file: read_only of each open."""
    seen: list[bool] = []
    real = connection._attach

    def counting(key, *, read_only):
        seen.append(read_only)
        return real(key, read_only=read_only)

    monkeypatch.setattr(connection, "_attach", counting)
    return seen


@pytest.fixture
def lingering():
    linger_reads()
    yield
    linger_reads(False)


def test_a_burst_of_reads_opens_the_file_once_and_sees_a_write_in_between(tmp_path, opened, lingering):
    store = Store(tmp_path / "s.duckdb")
    first = store.create_run("pharmacy refills", "pharmacy", {})
    opened.clear()
    for _ in range(10):
        assert [r.id for r in store.list_runs()] == [first]
    assert opened == [True]  # ten reads, one read-only open
    second = store.create_run("loans", "loans", {})  # closes the kept connection, writes, ...
    assert {r.id for r in store.list_runs()} == {first, second}  # ... and the next read sees it
    assert opened == [True, False, True]


def test_without_it_every_read_opens_the_file(tmp_path, opened):
    store = Store(tmp_path / "s.duckdb")
    store.create_run("pharmacy refills", "pharmacy", {})
    opened.clear()
    for _ in range(10):
        store.list_runs()
    assert opened == [True] * 10


def test_a_kept_connection_is_closed_when_idle_or_released(tmp_path, lingering):
    store = Store(tmp_path / "s.duckdb")
    store.create_run("pharmacy refills", "pharmacy", {})
    store.list_runs()
    assert connection._idle
    connection.close_idle()
    assert not connection._idle
    with duckdb.connect(str(tmp_path / "s.duckdb")) as con:  # read-write in this process: nothing holds it
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_another_process_writes_while_a_lingering_one_reads_without_pause(tmp_path):
    db = tmp_path / "s.duckdb"
    writer = Store(db, lock_timeout=20)
    writer.create_run("first", "first", {})
    reader = subprocess.Popen([sys.executable, "-c", LINGERING_READER, str(db), "6"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert reader.stdout.readline().strip() == "reading", reader.stderr.read()
    for i in range(5):  # each waits for a gap the reader leaves at least every MAX_AGE_SECONDS
        writer.create_run(f"theme {i}", f"t{i}", {})
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert int(out.split()[-1]) > 10 and err == ""  # it read all along, and left no leak report at exit
    assert len(writer.list_runs()) == 6
