"""The host copies a folder as data only (issue 20, item 1 and 2): regular files, no links, capped."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from sopforge.errors import UserError
from sopforge.sandbox.staging import StagingLimits, read_regular_file, stage_folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "tools.py").write_text("class XManager:\n    pass\n")
    (src / "data" / "rows.csv").write_text("a,b\n1,2\n")
    return src


def refused(staged) -> dict[str, str]:
    return {r.path: r.reason for r in staged.refused}


def test_regular_files_are_copied_with_modes_the_sandbox_user_can_read(tmp_path: Path, folder: Path):
    os.chmod(folder / "tools.py", 0o600)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "tools.cpython-311.pyc").write_bytes(b"\0" * 16)
    staged = stage_folder(folder, tmp_path / "copy")
    assert staged.ok and sorted(staged.files) == ["data/rows.csv", "tools.py"]
    assert (tmp_path / "copy" / "data" / "rows.csv").read_text() == "a,b\n1,2\n"
    assert stat.S_IMODE((tmp_path / "copy" / "tools.py").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "copy" / "data").stat().st_mode) == 0o755
    assert not (tmp_path / "copy" / "__pycache__").exists()


@pytest.mark.parametrize("target", ["/proc/self/environ", "/dev/zero", "../outside.txt", "tools.py"])
def test_symlinks_are_refused_never_followed(tmp_path: Path, folder: Path, target: str):
    (folder / "data" / "notes.txt").symlink_to(target)
    staged = stage_folder(folder, tmp_path / "copy")
    assert not staged.ok and "symbolic link" in refused(staged)["data/notes.txt"]
    assert not (tmp_path / "copy" / "data" / "notes.txt").exists()
    assert (tmp_path / "copy" / "tools.py").exists()  # the rest is still copied


def test_a_linked_folder_is_refused_not_walked(tmp_path: Path, folder: Path):
    (folder / "etc").symlink_to("/etc")
    staged = stage_folder(folder, tmp_path / "copy")
    assert list(refused(staged)) == ["etc"] and not (tmp_path / "copy" / "etc").exists()


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, folder: Path):
    os.mkfifo(folder / "helper.py")
    done: list = []
    worker = threading.Thread(target=lambda: done.append(stage_folder(folder, tmp_path / "copy")), daemon=True)
    worker.start()
    worker.join(10)
    assert done, "staging blocked on a FIFO"
    assert "FIFO" in refused(done[0])["helper.py"]


def test_a_socket_is_refused(tmp_path: Path, folder: Path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "helper.sock"))
    try:
        staged = stage_folder(folder, tmp_path / "copy")
    finally:
        server.close()
    assert "socket" in refused(staged)["helper.sock"]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_a_device_node_is_refused(tmp_path: Path, folder: Path):
    os.mknod(folder / "helper.py", stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero's numbers
    staged = stage_folder(folder, tmp_path / "copy")
    assert "device node" in refused(staged)["helper.py"]


def test_hard_links_to_outside_files_are_refused_inside_ones_kept(tmp_path: Path, folder: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-canary")
    os.link(secret, folder / "notes.txt")
    os.link(folder / "data" / "rows.csv", folder / "rows_again.csv")
    staged = stage_folder(folder, tmp_path / "copy")
    assert list(refused(staged)) == ["notes.txt"] and "outside the folder" in refused(staged)["notes.txt"]
    assert not (tmp_path / "copy" / "notes.txt").exists()
    assert (tmp_path / "copy" / "rows_again.csv").read_text() == "a,b\n1,2\n"


def test_a_sparse_4_gib_file_is_refused_before_anything_is_written(tmp_path: Path, folder: Path):
    with open(folder / "big.csv", "wb") as handle:
        handle.truncate(4 * 1024 ** 3)
    started = time.monotonic()
    staged = stage_folder(folder, tmp_path / "copy")
    assert time.monotonic() - started < 5
    assert "4294967296 bytes" in refused(staged)["big.csv"]
    assert not (tmp_path / "copy" / "big.csv").exists()


@pytest.mark.parametrize("name", ["helper.cpython-311-x86_64-linux-gnu.so", "helper.abi3.so", "helper.so",
                                  "libx.so.1", "helper.pyd"])
def test_native_extension_modules_are_refused(tmp_path: Path, folder: Path, name: str):
    (folder / name).write_bytes(b"\x7fELF" + b"\0" * 60)
    staged = stage_folder(folder, tmp_path / "copy")
    assert "native extension" in refused(staged)[name]


def test_folder_size_entry_and_depth_caps(tmp_path: Path, folder: Path):
    (folder / "a.txt").write_bytes(b"x" * 3000)
    (folder / "b.txt").write_bytes(b"x" * 3000)
    deep = folder.joinpath(*["d"] * 5)
    deep.mkdir(parents=True)
    staged = stage_folder(folder, tmp_path / "c1", limits=StagingLimits(max_total_bytes=4000, max_depth=3))
    reasons = refused(staged)
    assert "exceeds 4000 bytes" in reasons["b.txt"] and "nested deeper than 3" in reasons["d/d/d/d"]
    many = stage_folder(folder, tmp_path / "c2", limits=StagingLimits(max_entries=3))
    assert many.refused_count == 1 and "more than 3 entries" in many.refused[0].reason


def test_the_folder_itself_must_be_a_readable_directory(tmp_path: Path):
    with pytest.raises(UserError, match="cannot read the folder"):
        stage_folder(tmp_path / "missing", tmp_path / "copy")


def test_read_regular_file_refuses_what_is_not_a_small_regular_file(tmp_path: Path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    assert read_regular_file(tmp_path / "ok.py") == b"x = 1\n"
    (tmp_path / "link.py").symlink_to("/dev/zero")
    with pytest.raises(UserError, match="symbolic link"):
        read_regular_file(tmp_path / "link.py")
    with pytest.raises(UserError, match="not a regular file"):
        read_regular_file(tmp_path / "link.py", follow=True)
    os.mkfifo(tmp_path / "fifo.py")
    with pytest.raises(UserError, match="FIFO"):
        read_regular_file(tmp_path / "fifo.py")
    with pytest.raises(UserError, match="at most 3"):
        read_regular_file(tmp_path / "ok.py", max_bytes=3)
