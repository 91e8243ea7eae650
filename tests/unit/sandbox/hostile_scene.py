"""Where a hostile snippet's effects would show, and the check that none did (issue 10 tests)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from hostile_corpus import Snippet

PHARMACY = Path(__file__).resolve().parents[2] / "fixtures" / "bundle" / "pharmacy"


@dataclass
class Scene:
    """Where a snippet's effects would show: a marker path, a listener, canary keys."""

    marker: Path
    listener: socket.socket
    canaries: tuple[str, ...]
    root_only: Path | None = None

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def fill(self, source: str) -> str:
        return (source.replace("{MARKER}", str(self.marker)).replace("{PORT}", str(self.port))
                .replace("{ROOT_ONLY}", str(self.root_only)))

    def connections(self) -> int:
        count = 0
        self.listener.settimeout(0.05)
        while True:
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, BlockingIOError, OSError):
                return count
            conn.close()
            count += 1


def hostile_folder(base: Path, snippet: Snippet, scene: Scene, source_dir: Path = PHARMACY) -> Path:
    folder = base / f"bench-{snippet.id}"
    shutil.copytree(source_dir, folder)
    tools = folder / "tools.py"
    text = tools.read_text()
    manager = re.search(r"^class (\w+Manager)\b", text, re.MULTILINE).group(1)
    tools.write_text(text + "\n" + scene.fill(snippet.source).replace("{MANAGER}", manager))
    for name, target in snippet.files.items():
        (folder / name).symlink_to(target)
    for name, text in snippet.extra.items():
        (folder / name).write_text(text)
    for name, kind in snippet.nodes.items():
        _make_node(folder / name, kind, scene)
    return folder


def _make_node(path: Path, kind: str, scene: Scene) -> None:
    if kind.startswith("symlink:"):
        path.symlink_to(kind.split(":", 1)[1])
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("creating a device node needs root")
        os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero's numbers
    elif kind.startswith("sparse:"):
        with open(path, "wb") as handle:
            handle.truncate(int(kind.split(":", 1)[1]))
    elif kind == "native":
        path.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 57)
    elif kind == "hardlink-outside":
        secret = scene.marker.parent.parent / f"secret-{path.name}"
        secret.write_text("\n".join(scene.canaries))
        os.link(secret, path)
    else:
        raise ValueError(kind)


def assert_no_effect(scene: Scene, seen: str, folder: Path, tools_text: str) -> None:
    assert not scene.marker.exists(), "the snippet wrote a file outside the sandbox"
    assert scene.connections() == 0, "the snippet reached the loopback listener"
    for canary in scene.canaries:
        assert canary not in seen, "an API key from the parent's environment leaked"
    assert (folder / "tools.py").read_text() == tools_text, "the folder's own tools.py changed"


class HostWatch:
    """Samples, while a run is in progress, the host's total thread count and the parent's RSS
    (this process's, or that of ``pid``: the ``sopforge audit`` process of a CLI test)."""

    def __init__(self, interval: float = 0.02, pid: int | str = "self"):
        self.interval, self.pid = interval, pid
        self.base_threads = self.max_threads = _host_threads()
        self.base_rss = self.max_rss = _rss(pid) or 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.max_threads = max(self.max_threads, _host_threads())
            self.max_rss = max(self.max_rss, _rss(self.pid) or 0)

    def __enter__(self) -> HostWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def assert_untouched(self) -> None:
        # Other work on the machine moves these a little; an escape moved them by thousands of
        # threads (the issue: 17,000) and gigabytes (3.1 GiB for one record).
        assert self.max_threads - self.base_threads < 1000, (self.base_threads, self.max_threads)
        assert self.max_rss - self.base_rss < 512 * 1024 ** 2, (self.base_rss, self.max_rss)


def _host_threads() -> int:
    with open("/proc/loadavg", encoding="ascii") as handle:
        return int(handle.read().split()[3].split("/")[1])


def _rss(pid: int | str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            return next((int(line.split()[1]) * 1024 for line in handle if line.startswith("VmRSS:")), None)
    except OSError:
        return None
