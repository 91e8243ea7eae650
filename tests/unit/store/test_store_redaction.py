"""Key-like fragments in provider error text never reach the store, whatever path they take.

An OpenAI 401 quotes the key it was given, half-masked (``sk-canar**********Z123``): even masked,
it tells a reader the key's prefix, length and last characters. The fake server returns such a
body through the real SDKs; the DuckDB file (and its write-ahead log) is then searched byte by
byte, and every text column with SQL.
"""

from __future__ import annotations

import duckdb
import pytest

from sopforge.errors import ProviderError
from sopforge.llm.gateway import Gateway
from sopforge.llm.providers.anthropic import AnthropicProvider
from sopforge.llm.providers.openai import OpenAIProvider
from sopforge.llm.testserver import FakeLLMServer, status
from sopforge.llm.types import LLMRequest, Message
from sopforge.settings import Settings
from sopforge.store.redact import REDACTED, redact_text

FRAGMENT = "sk-canar**********Z123"
OPENAI_401 = (f"Incorrect API key provided: {FRAGMENT}. You can find your API key at "
              "https://platform.openai.com/account/api-keys.")


@pytest.mark.parametrize("text, secret", [
    (OPENAI_401, FRAGMENT),
    ("invalid x-api-key: sk-ant-api03-AbCdEfGhIjKlMnOp", "sk-ant-api03-AbCdEfGhIjKlMnOp"),
    ("proxy said: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "eyJhbGciOiJIUzI1NiJ9.payload"),
    ("GET /v1?api_key=abc123secretvalue&model=m failed", "abc123secretvalue"),
    ('{"password": "hunter2hunter2"}', "hunter2hunter2"),
    ("AWS key AKIAIOSFODNN7EXAMPLE was refused", "AKIAIOSFODNN7EXAMPLE"),
    ("hub token hf_AbCdEfGhIjKlMnOpQrSt rejected", "hf_AbCdEfGhIjKlMnOpQrSt"),
    ("key ending in ab********yz is not valid", "ab********yz"),
])
def test_key_like_fragments_are_replaced_and_the_rest_kept(text, secret):
    redacted = redact_text(text)
    assert secret not in redacted and REDACTED in redacted
    # Only the fragment goes: what surrounds it still explains the error.
    before, after = text.split(secret)
    assert redacted.startswith(before.removesuffix("Bearer ")) and redacted.endswith(after)


@pytest.mark.parametrize("text", [
    "max_tokens: 8192, temperature 0.1", "risk-free task-1 uses sk-learn", "check the API key",
    "openai returned HTTP 429: rate limited (retry-after 2s)", "5.3 Deny when refills_remaining = 0",
])
def test_ordinary_text_is_left_alone(text):
    assert redact_text(text) == text


def test_provider_errors_are_redacted_when_raised():
    err = ProviderError(f"openai returned HTTP 401: {OPENAI_401}", retryable=False, status=401)
    assert FRAGMENT not in str(err) and "Incorrect API key provided" in str(err)


def _stored_text(db_path) -> str:
    """Every text column of every table, as one string (what a user's SQL could ever see)."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return "\n".join(str(row) for t in tables for row in con.execute(f"SELECT * FROM {t}").fetchall())


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_401_quoting_the_key_leaves_no_fragment_in_the_store(tmp_path, store, db_path, run_id, protocol):
    settings = Settings(_env_file=None, home=tmp_path / "home", max_retries=0, request_timeout_seconds=5.0)
    with FakeLLMServer() as server:
        server.enqueue(status(401, message=OPENAI_401))
        provider = (OpenAIProvider("sk-canary-0000-Z123", server.openai_base_url, 5.0) if protocol == "openai"
                    else AnthropicProvider("sk-canary-0000-Z123", server.anthropic_base_url, 5.0))
        gateway = Gateway(provider, ledger=store, settings=settings, run_id=run_id)
        stage_run = store.start_stage(run_id, "context")
        with pytest.raises(ProviderError) as raised:
            gateway.complete(LLMRequest(messages=[Message(role="user", content="hi")], model="m",
                                        call_key="t/context/main/a1", stage="context"))
    # What the executor and the run lifecycle store for a failed stage and run.
    store.finish_stage(stage_run, "failed", error=str(raised.value))
    store.set_run_status(run_id, "failed", error=f"context: {raised.value}")

    assert FRAGMENT not in str(raised.value)
    stored = _stored_text(db_path)
    assert "Incorrect API key provided" in stored and REDACTED in stored  # the error itself is kept
    assert "canar" not in stored and "Z123" not in stored
    for f in (p for p in db_path.parent.rglob("*") if p.is_file()):  # the database, its WAL, the call journal
        assert b"canar" not in f.read_bytes(), f


def test_store_writes_redact_errors_given_directly(store, db_path, run_id, make_call):
    """Errors that never were a ProviderError (a wrapped SDK bug, a stage's own text) are redacted too."""
    store.record_call(make_call(run_id, "context", error=f"APIError: {OPENAI_401}", response=None))
    stage_run = store.start_stage(run_id, "context")
    store.finish_stage(stage_run, "failed", error=OPENAI_401)
    store.set_run_status(run_id, "failed", error=OPENAI_401)
    assert "canar" not in _stored_text(db_path)
    assert store.get_run(run_id).error.startswith("Incorrect API key provided: [redacted].")
