"""Every command that opens a damaged ``sopforge.duckdb`` says so in one line and exits 2."""

from __future__ import annotations

import pytest

from cli_support import ROOT
from test_bad_input import assert_one_line_error, run
from sopforge.store import Store

COMMANDS = [
    ("runs",), ("runs", "--json"), ("show", "r-0"), ("rerun", "r-0"), ("review", "list"),
    ("runs", "delete", "r-0"), ("runs", "prune", "--status", "failed"),
    ("generate", str(ROOT / "examples/themes/pharmacy_refills.yaml")),
]


def damaged_home(tmp_path, damage: str):
    """A home whose database (with one run in it) was damaged; tests/unit/store covers more kinds."""
    home = tmp_path / "home"
    db = home / "sopforge.duckdb"
    Store(db).create_run("pharmacy refills", "pharmacy", {"rows": ["x" * 200] * 2000})
    data = db.read_bytes()
    if damage == "garbage header":
        db.write_bytes(b"\x00garbage\xff" * 500 + data[5000:])
    else:
        db.write_bytes(data[: 3 * 4096 + 100])
    return home, db


@pytest.mark.parametrize("damage, command", [("garbage header", c) for c in COMMANDS]
                         + [("truncated", ("runs",)), ("truncated", ("show", "r-0"))], ids=str)
def test_each_command_names_the_damaged_file_and_the_way_out(tmp_path, damage, command):
    home, db = damaged_home(tmp_path, damage)
    proc = run(home, *command)
    assert proc.returncode == 2, proc.stderr
    assert_one_line_error(proc, str(db), "damaged", "restore it from a backup", "move it aside")
    assert ("not a DuckDB file" if damage == "garbage header" else "truncated") in proc.stderr


def store_with_dataset(home):
    """A home whose store holds a run with 5000 dataset rows (several data blocks of their own)."""
    from sopforge.store import ArtifactWrite

    db = home / "sopforge.duckdb"
    store = Store(db)
    run_id = store.create_run("pharmacy refills", "pharmacy_refills", {"spec": {"theme": "pharmacy refills"}})
    rows = [{"row_id": f"R-{i:05d}", "note": f"row {i} " * 20} for i in range(5000)]
    store.save_artifact(ArtifactWrite(run_id=run_id, stage="dataset", kind="Dataset", content={"rows": len(rows)},
                                      input_key="k", rows=rows, row_id_field="row_id"))
    import duckdb

    with duckdb.connect(str(db)) as con:
        con.execute("CHECKPOINT")
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall()]
        used = {t: {b for (b,) in con.execute(f"SELECT DISTINCT block_id FROM pragma_storage_info('{t}') "
                                              "WHERE block_id >= 0").fetchall()} for t in tables}
    only_rows = used["dataset_rows"] - set().union(*(b for t, b in used.items() if t != "dataset_rows"))
    return db, run_id, sorted(only_rows)


@pytest.mark.parametrize("damage", ["dataset_rows block overwritten", "cut short in dataset_rows"])
@pytest.mark.parametrize("command", ["generate", "rerun"])
def test_a_run_on_a_damaged_store_stops_in_one_line_before_any_server_starts(tmp_path, damage, command):
    home = tmp_path / "home"
    db, run_id, blocks = store_with_dataset(home)
    data = bytearray(db.read_bytes())
    if damage == "cut short in dataset_rows":  # the file ends where dataset_rows' last block of its own starts
        data = data[: 3 * 4096 + blocks[-1] * 262144]
    else:  # 64 bytes in a block only dataset_rows reads: `runs` and `show` never look at it
        start = 3 * 4096 + blocks[0] * 262144 + 16
        data[start:start + 64] = b"\xab" * 64
    db.write_bytes(bytes(data))
    args = ("generate", str(ROOT / "examples/themes/pharmacy_refills.yaml")) if command == "generate" else ("rerun", run_id)
    proc = run(home, *args)
    assert proc.returncode == 2, proc.stderr
    assert_one_line_error(proc, str(db), "damaged", "checksum" if "overwritten" in damage else "truncated")
    assert not (home / "prefect").exists()  # refused before the home's Prefect server was started
