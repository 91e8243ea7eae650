"""Where a hostile snippet's effects would show, and the check that none did (issue 10 tests)."""

from __future__ import annotations

import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from hostile_corpus import Snippet

PHARMACY = Path(__file__).resolve().parents[2] / "fixtures" / "bundle" / "pharmacy"


@dataclass
class Scene:
    """Where a snippet's effects would show: a marker path, a listener, canary keys."""

    marker: Path
    listener: socket.socket
    canaries: tuple[str, ...]

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def fill(self, source: str) -> str:
        return source.replace("{MARKER}", str(self.marker)).replace("{PORT}", str(self.port))

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
    tools.write_text(tools.read_text() + "\n" + scene.fill(snippet.source))
    for name, target in snippet.files.items():
        (folder / name).symlink_to(target)
    return folder


def assert_no_effect(scene: Scene, seen: str, folder: Path, tools_text: str) -> None:
    assert not scene.marker.exists(), "the snippet wrote a file outside the sandbox"
    assert scene.connections() == 0, "the snippet reached the loopback listener"
    for canary in scene.canaries:
        assert canary not in seen, "an API key from the parent's environment leaked"
    assert (folder / "tools.py").read_text() == tools_text, "the folder's own tools.py changed"
