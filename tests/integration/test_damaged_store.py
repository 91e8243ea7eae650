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
