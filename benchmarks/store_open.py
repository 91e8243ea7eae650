"""What one store connection costs, attached to the process's DuckDB instance (how the store opens its file)
against a new DuckDB instance per connection (how it did before); one run, both ways alternating.

The store opens its file for every operation and closes it at once (``sopforge.store.connection``), so
the open is paid dozens of times per command. Each round makes one write (a row in its own transaction,
as the store's writes are) and one read-only query, each on its own connection, the two ways in turn;
the file is a store with the schema and a few runs. Prints the median CPU milliseconds per connection
of each way and the ratio.

    .venv/bin/python benchmarks/store_open.py [N]      # default 40 rounds
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import duckdb  # noqa: E402

from sopforge.store import Store  # noqa: E402
from sopforge.store.connection import open_connection  # noqa: E402


def attached(db: Path, read_only: bool) -> Callable:
    return lambda: open_connection(db, read_only=read_only, lock_timeout=10)


def new_instance(db: Path, read_only: bool) -> Callable:
    return lambda: duckdb.connect(str(db), read_only=read_only)


def one(connect: Callable, write: bool, i: int) -> float:
    start = time.process_time()
    with connect() as con:
        if write:
            con.begin()
            con.execute("INSERT INTO bench VALUES (?, ?)", [i, "x" * 200])
            con.commit()
        else:
            con.execute("SELECT count(*), max(i) FROM bench").fetchall()
    return time.process_time() - start


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sopforge.duckdb"
        store = Store(db)
        for i in range(5):
            store.create_run(f"theme {i}", f"t{i}", {})
        with open_connection(db, read_only=False, lock_timeout=10) as con:
            con.execute("CREATE TABLE bench (i INTEGER, s VARCHAR)")
        ways = {"attached to the process's instance": attached, "a new instance per connection": new_instance}
        cpu: dict[tuple[str, bool], list[float]] = {(w, write): [] for w in ways for write in (True, False)}
        for i in range(n):
            for name, way in ways.items():
                for write in (True, False):
                    cpu[(name, write)].append(one(way(db, read_only=not write), write, i))
    print(f"{n} rounds, median CPU per connection:")
    for write in (True, False):
        new, old = (statistics.median(cpu[(w, write)]) * 1000 for w in ways)
        print(f"  {'write' if write else 'read '}: attached {new:5.1f} ms, new instance {old:5.1f} ms, "
              f"ratio {new / old:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
