"""Shared fixtures for stage tests: recorded good answers and a scripted LLM behind the Gateway."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sopforge.llm.gateway import Gateway
from sopforge.llm.providers.scripted import ScriptedProvider
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.settings import Settings

ANSWERS = Path(__file__).resolve().parents[1] / "fixtures" / "answers"
THEME = "pharmacy prescription refills"
SLUG = "pharmacy-prescription-refills"


def read_answer(stage: str) -> str:
    return (ANSWERS / f"{stage}.txt").read_text(encoding="utf-8")


def replace_once(text: str, old: str, new: str) -> str:
    """Edit a good answer into a bad one; fail loudly if the fixture no longer has ``old``."""
    assert text.count(old) == 1, f"fixture edit target not found exactly once: {old!r}"
    return text.replace(old, new)


@pytest.fixture
def context_answer() -> str:
    return read_answer("context")


@pytest.fixture
def schema_answer() -> str:
    return read_answer("schema")


@pytest.fixture
def sop_answer() -> str:
    return read_answer("sop")


@pytest.fixture
def good_context(context_answer: str) -> BusinessContext:
    return BusinessContext.parse(context_answer, theme=THEME)


@pytest.fixture
def good_schema(schema_answer: str) -> DataSchema:
    return DataSchema.parse(schema_answer)


@pytest.fixture
def good_sop(sop_answer: str, good_context: BusinessContext) -> SOPDocument:
    return SOPDocument.parse(sop_answer, title=good_context.task.sop_title)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", max_attempts=3, provider="scripted")


@pytest.fixture
def scripted(settings: Settings) -> Callable[[list[str]], tuple[Gateway, ScriptedProvider]]:
    """Build (gateway, provider) answering from a list; the provider keeps every request."""

    def make(responses: list[str]) -> tuple[Gateway, ScriptedProvider]:
        provider = ScriptedProvider(responses)
        return Gateway(provider, ledger=None, settings=settings, sleep=lambda _s: None), provider

    return make


@pytest.fixture
def edit() -> Callable[[str, str, str], str]:
    """``edit(text, old, new)``: replace exactly one occurrence (guards against fixture drift)."""
    return replace_once


@pytest.fixture
def theme() -> str:
    return THEME


@pytest.fixture
def slug() -> str:
    return SLUG
