"""Fixtures of the sandbox tests: the scene a hostile snippet would leave its effects in."""

from __future__ import annotations

import secrets
import socket
import sysconfig
from pathlib import Path

import pytest

from hostile_scene import Scene


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    canaries = (f"sk-canary-openai-{secrets.token_hex(8)}", f"sk-ant-canary-{secrets.token_hex(8)}")
    monkeypatch.setenv("OPENAI_API_KEY", canaries[0])
    monkeypatch.setenv("ANTHROPIC_API_KEY", canaries[1])
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    # A root-only file in a folder the sandbox mounts (the site-packages), holding a canary key.
    root_only = Path(sysconfig.get_paths()["purelib"]) / f"sopforge-root-only-{secrets.token_hex(6)}.txt"
    root_only.write_text(canaries[0])
    root_only.chmod(0o600)
    try:
        yield Scene(marker=tmp_path / "outside" / "MARKER", listener=server, canaries=canaries, root_only=root_only)
    finally:
        server.close()
        root_only.unlink(missing_ok=True)
