"""Fixtures of the sandbox tests: the scene a hostile snippet would leave its effects in."""

from __future__ import annotations

import secrets
import socket
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
    yield Scene(marker=tmp_path / "outside" / "MARKER", listener=server, canaries=canaries)
    server.close()
