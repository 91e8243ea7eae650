"""Building providers from settings, and the one-seam rule for vendor SDKs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sopforge
from sopforge.errors import UserError
from sopforge.llm import (
    AnthropicProvider,
    ExchangeProvider,
    OpenAIProvider,
    ReplayProvider,
    ScriptedProvider,
    build_gateway,
    build_provider,
    default_model,
)
from sopforge.llm.testserver import reply


def test_unknown_provider_lists_the_choices(settings):
    with pytest.raises(UserError) as info:
        build_provider("gemini", settings=settings)
    assert str(info.value) == "unknown provider 'gemini': choose one of anthropic, openai, replay, exchange, scripted"


def test_missing_anthropic_key_says_how_to_fix_it(settings):
    with pytest.raises(UserError) as info:
        build_provider("anthropic", settings=settings)
    assert str(info.value) == ("ANTHROPIC_API_KEY is not set: export it, or run the offline example with "
                               "--provider replay")


def test_missing_openai_key_says_how_to_fix_it(settings):
    with pytest.raises(UserError, match=r"^OPENAI_API_KEY is not set: export it.*--provider replay"):
        build_provider("openai", settings=settings)


def test_keys_are_read_from_the_environment(monkeypatch, tmp_path):
    from sopforge.settings import Settings

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    provider = build_provider("anthropic", settings=Settings(_env_file=None, home=tmp_path))
    assert isinstance(provider, AnthropicProvider)
    assert "sk-from-env" not in repr(provider)


def test_openai_compatible_server_needs_no_key(server, settings, make_request):
    server.enqueue(reply("from a local model"))
    provider = build_provider("openai", settings=settings, base_url=server.openai_base_url)

    assert isinstance(provider, OpenAIProvider)
    response = build_gateway(settings, provider=provider).complete(make_request(model="llama3"))
    assert response.text == "from a local model"
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_offline_providers_use_the_configured_folders(make_settings, tmp_path):
    settings = make_settings(exchange_dir=tmp_path / "ex", recordings_dir=tmp_path / "rec", exchange_wait_seconds=3)
    exchange = build_provider("exchange", settings=settings)
    replay = build_provider("replay", settings=settings)
    assert isinstance(exchange, ExchangeProvider) and exchange.folder == tmp_path / "ex"
    assert exchange.wait_seconds == 3
    assert isinstance(replay, ReplayProvider) and replay.folder == tmp_path / "rec"
    assert isinstance(build_provider("scripted", settings=settings), ScriptedProvider)


def test_build_gateway_uses_the_settings_provider(make_settings, tmp_path):
    gateway = build_gateway(make_settings(provider="replay", recordings_dir=tmp_path))
    assert gateway.provider == "replay"


@pytest.mark.parametrize(("name", "model"), [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4o-mini"),
                                             ("replay", "recorded"), ("exchange", "exchange"),
                                             ("scripted", "scripted")])
def test_default_models(name, model):
    assert default_model(name) == model


def test_default_model_rejects_unknown_provider():
    with pytest.raises(UserError, match="unknown provider 'x'"):
        default_model("x")


def test_only_the_llm_providers_import_vendor_sdks():
    package = Path(sopforge.__file__).parent
    allowed = {package / "llm" / "providers" / "anthropic.py", package / "llm" / "providers" / "openai.py"}
    pattern = re.compile(r"^\s*(import|from)\s+(anthropic|openai)\b", re.MULTILINE)
    offenders = [str(path.relative_to(package)) for path in package.rglob("*.py")
                 if path not in allowed and pattern.search(path.read_text(encoding="utf-8"))]
    assert offenders == []
