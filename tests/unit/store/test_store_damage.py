"""A damaged database file is one clear line naming the file, the damage and the way out.

Every case damages a real DuckDB file written by ``Store``: garbage over its header, a data
block whose checksum no longer matches, a file cut short, an empty file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from sopforge.errors import UserError
from sopforge.store import ArtifactWrite, Store

BLOCK = 262144  # DuckDB's storage block: data blocks follow the 3 x 4 KiB file headers
HEADERS = 3 * 4096


def _filled(path: Path) -> Store:
    """A store with enough rows that its tables span several data blocks, checkpointed to disk."""
    store = Store(path, lock_timeout=5)
    run_id = store.create_run("pharmacy prescription refills", "pharmacy", {"provider": "scripted"})
    rows = [{"row_id": f"R-{i:05d}", "note": f"row {i} " * 20} for i in range(5000)]
    store.save_artifact(ArtifactWrite(run_id=run_id, stage="dataset", kind="Dataset", content={"rows": len(rows)},
                                      input_key="k", rows=rows, row_id_field="row_id"))
    with duckdb.connect(str(path)) as con:
        con.execute("CHECKPOINT")
    return store


def _garbage_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(b"this is not a database " * 200 + data[4600:])


def _bad_block_checksum(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for offset in range(HEADERS + 64, HEADERS + BLOCK, 4096):  # every page of the first data block
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: HEADERS + 1000])


def _emptied(path: Path) -> None:
    path.write_bytes(b"")


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "garbage header": (_garbage_header, "not a DuckDB file"),
    "bad block checksum": (_bad_block_checksum, "checksum"),
    "truncated": (_truncated, "truncated"),
    "empty file": (_emptied, "not a DuckDB file"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_file_is_one_line_naming_it_the_damage_and_the_fix(tmp_path, damage):
    path = tmp_path / "home" / "sopforge.duckdb"
    _filled(path)
    corrupt, what = DAMAGE[damage]
    corrupt(path)

    fresh = Store(path, lock_timeout=5)  # a new process sees only the file
    attempts = {
        "list_runs": lambda: fresh.list_runs(),
        "run_summary": lambda: [fresh.run_summary(r.id) for r in fresh.list_runs()],
        "check_writable": fresh.check_writable,
        "create_run": lambda: fresh.create_run("t", "t", {}),
    }
    for name, attempt in attempts.items():
        with pytest.raises(UserError) as err:
            attempt()
        message = str(err.value)
        assert "\n" not in message, name
        assert str(path) in message and what in message, (name, message)
        assert "restore it from a backup" in message and "move it aside" in message, message


def test_an_unrelated_duckdb_error_is_not_called_damage(tmp_path):
    store = _filled(tmp_path / "sopforge.duckdb")
    with store._read() as con, pytest.raises(duckdb.CatalogException):
        con.execute("SELECT * FROM no_such_table")


def _blocks_of(path: Path, table: str) -> set[int]:
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall()]
        used = {t: {b for (b,) in con.execute(f"SELECT DISTINCT block_id FROM pragma_storage_info('{t}') "
                                              "WHERE block_id >= 0").fetchall()} for t in tables}
    return used[table] - set().union(*(b for t, b in used.items() if t != table))


def _dataset_rows_block_overwritten(path: Path) -> None:
    """64 bytes overwritten at the start of a data block that only ``dataset_rows`` reads."""
    block = min(_blocks_of(path, "dataset_rows"))
    data = bytearray(path.read_bytes())
    start = HEADERS + block * BLOCK + 16
    data[start:start + 64] = b"\xab" * 64
    path.write_bytes(bytes(data))


def _cut_to_a_third(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


@pytest.mark.parametrize("damage, what", [(_dataset_rows_block_overwritten, "checksum"), (_cut_to_a_third, "truncated")],
                         ids=["a dataset_rows block overwritten", "cut to a third"])
def test_a_store_opened_for_work_is_verified_whole(tmp_path, damage, what):
    # Issue 21: `generate` reported success on a store whose dataset_rows failed DuckDB's checksum,
    # because nothing it did read that table; the store is now read whole where a run opens it.
    path = tmp_path / "home" / "sopforge.duckdb"
    _filled(path)
    damage(path)
    fresh = Store(path, lock_timeout=5)
    for name, attempt in {"verify": fresh.verify, "check_writable": fresh.check_writable}.items():
        with pytest.raises(UserError) as err:
            attempt()
        message = str(err.value)
        assert "\n" not in message and str(path) in message and what in message, (name, message)


def test_verifying_a_sound_store_reads_it_and_changes_nothing(tmp_path):
    path = tmp_path / "home" / "sopforge.duckdb"
    _filled(path)
    before = path.read_bytes()
    Store(path).verify()
    assert path.read_bytes() == before
