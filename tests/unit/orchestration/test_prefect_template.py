"""A new home's Prefect server starts from a migrated database kept once per machine."""

from __future__ import annotations

import sqlite3

import pytest

from sopforge.orchestration.prefect_template import save_template, seed_database


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL", raising=False)
    return tmp_path / "cache" / "sopforge"


def migrated_home(path):
    path.mkdir(parents=True)
    with sqlite3.connect(path / "prefect.db") as con:
        con.execute("CREATE TABLE alembic_version (version_num TEXT)")
        con.execute("INSERT INTO alembic_version VALUES ('head')")
    return path


def test_the_first_healthy_server_s_database_seeds_the_next_home(tmp_path, cache):
    assert not seed_database(tmp_path / "empty")  # nothing kept yet: Prefect creates and migrates it
    save_template(migrated_home(tmp_path / "first"))
    [kept] = cache.glob("prefect-*.db")
    new = tmp_path / "second"
    new.mkdir()
    assert seed_database(new)
    with sqlite3.connect(new / "prefect.db") as con:
        assert con.execute("SELECT version_num FROM alembic_version").fetchall() == [("head",)]
    assert not seed_database(new)  # a home's own database is never replaced


def test_a_database_configured_elsewhere_is_left_alone(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://prefect@db/prefect")
    save_template(migrated_home(tmp_path / "first"))
    assert not cache.exists()
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL")
    save_template(tmp_path / "first")
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://prefect@db/prefect")
    (tmp_path / "second").mkdir()
    assert not seed_database(tmp_path / "second")
