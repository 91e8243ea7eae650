"""A new home's Prefect server starts from a migrated database, its block types registered, kept once per machine."""

from __future__ import annotations

import sqlite3

import pytest

from sopforge.orchestration import prefect_template
from sopforge.orchestration.prefect_server import server_environment
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


class _Collection:
    """An installed Prefect collection as importlib.metadata lists it (group ``prefect.collections``)."""

    def __init__(self, name: str, dist_version: str):
        self.name, self.value = name, name.replace("-", "_")
        self.dist = type("Dist", (), {"version": dist_version})()


def test_a_template_made_with_other_prefect_collections_does_not_seed_a_home(tmp_path, cache, monkeypatch):
    installed: list[_Collection] = []
    monkeypatch.setattr(prefect_template, "entry_points", lambda group: installed if group == "prefect.collections"
                        else [])
    save_template(migrated_home(tmp_path / "first"))  # made with no collection installed
    installed.append(_Collection("prefect-aws", "0.5.0"))  # it adds block types the template lacks
    (tmp_path / "second").mkdir()
    assert not seed_database(tmp_path / "second")
    save_template(tmp_path / "first")  # a server with the collection saves its own
    assert seed_database(tmp_path / "second")
    installed[0] = _Collection("prefect-aws", "0.6.0")
    (tmp_path / "third").mkdir()
    assert not seed_database(tmp_path / "third")
    assert len(list(cache.glob("prefect-*.db"))) == 2


def test_only_a_server_started_from_the_template_skips_block_registration(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_BLOCKS_REGISTER_ON_START", raising=False)
    seeded = server_environment(tmp_path, 4200, seeded=True)
    assert seeded["PREFECT_API_BLOCKS_REGISTER_ON_START"] == "false" and seeded["PREFECT_HOME"] == str(tmp_path)
    assert "PREFECT_API_BLOCKS_REGISTER_ON_START" not in server_environment(tmp_path, 4200, seeded=False)
    monkeypatch.setenv("PREFECT_API_BLOCKS_REGISTER_ON_START", "true")  # the user's own setting wins
    assert server_environment(tmp_path, 4200, seeded=True)["PREFECT_API_BLOCKS_REGISTER_ON_START"] == "true"
