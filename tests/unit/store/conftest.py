"""Fixtures for store tests: a real DuckDB file under tmp_path, never a mock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sopforge.llm.types import LLMCallRecord
from sopforge.store import ArtifactRecord, ArtifactWrite, Store, release_connections


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "sopforge.duckdb"


@pytest.fixture
def store(db_path: Path) -> Store:
    return Store(db_path, lock_timeout=20)


@pytest.fixture
def run_id(store: Store) -> str:
    return store.create_run("pharmacy prescription refills", "pharmacy-prescription-refills",
                            {"provider": "scripted", "model": "fake-1", "params": {"temperature": 0.1}})


@pytest.fixture
def sql(db_path: Path) -> Callable[..., list[tuple[Any, ...]]]:
    """Run plain SQL against the file the way a user would (read-only, own connection)."""

    def run(query: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        release_connections()  # calls are written behind: write them before reading the file another way
        con = duckdb.connect(str(db_path), read_only=True)
        try:
            return con.execute(query, params or []).fetchall()
        finally:
            con.close()

    return run


@pytest.fixture
def save(store: Store) -> Callable[..., ArtifactRecord]:
    """Save an artifact with sensible defaults; keyword arguments override them."""

    def _save(run_id: str, stage: str, **overrides: Any) -> ArtifactRecord:
        fields: dict[str, Any] = {
            "run_id": run_id, "stage": stage, "kind": stage.title() + "Doc",
            "content": {"title": f"{stage} doc"}, "input_key": f"key-{stage}",
            "template_id": f"teller/{stage}", "template_hash": "t" * 64, "model": "fake-1",
            "status": "validated",
        }
        fields.update(overrides)
        return store.save_artifact(ArtifactWrite(**fields))

    return _save


@pytest.fixture
def make_call() -> Callable[..., LLMCallRecord]:
    """Build an LLM call record as the gateway would (each with a fresh id)."""
    counter = iter(range(1, 1_000_000))

    def _call(run_id: str | None, stage: str, *, request_hash: str = "h1", error: str | None = None,
              response: str | None = "ok", created_at: datetime | None = None, **extra: Any) -> LLMCallRecord:
        fields: dict[str, Any] = {
            "id": f"c-{next(counter):04d}", "run_id": run_id, "call_key": f"pharmacy/{stage}/main/a1",
            "request_hash": request_hash, "stage": stage, "provider": "scripted", "model": "fake-1",
            "params": {"temperature": 0.1, "max_tokens": 100},
            "prompt": {"system": None, "messages": [{"role": "user", "content": "hi"}]},
            "response": response, "error": error,
            "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01,
        }
        if created_at is not None:
            fields["created_at"] = created_at
        fields.update(extra)
        return LLMCallRecord(**fields)

    return _call
