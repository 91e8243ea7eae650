"""A provider error that quotes the API key: the run fails cleanly and the key leaks nowhere.

OpenAI's 401 body quotes the key it was given, half-masked (``sk-canar**********Z123``). The fake
server returns that body to the real SDK inside a real ``sopforge generate``; the fragment must be
absent from the DuckDB file, stderr, stdout and the flow run's Prefect logs.
"""

from __future__ import annotations

import duckdb
import httpx
import pytest

from answers import THEME
from sopforge.llm.testserver import FakeLLMServer, status

pytestmark = pytest.mark.prefect

KEY = "sk-canary-4d1c-0000-Z123"
FRAGMENT = "sk-canar**********Z123"
BODY = (f"Incorrect API key provided: {FRAGMENT}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.")


def prefect_logs(api: str, flow_run_id: str) -> str:
    response = httpx.post(f"{api}/logs/filter", json={"logs": {"flow_run_id": {"any_": [flow_run_id]}},
                                                       "limit": 200}, timeout=30)
    response.raise_for_status()
    return "\n".join(entry["message"] for entry in response.json())


def test_a_401_quoting_the_key_fails_the_run_without_leaking_the_fragment(cli, prefect_api):
    with FakeLLMServer() as server:
        server.enqueue(status(401, message=BODY))
        result = cli("generate", "--theme", THEME, "--slug", "key_leak", "--provider", "openai", "--model", "m",
                     "--base-url", server.openai_base_url, env={"OPENAI_API_KEY": KEY})
    assert result.code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "HTTP 401" in errors[0] and "Incorrect API key provided: [redacted]" in errors[0]

    db = cli.home / "sopforge.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        run_error, flow_run_id = con.execute("SELECT error, flow_run_id FROM runs").fetchone()
        stage_error = con.execute("SELECT error FROM stage_runs WHERE stage = 'context'").fetchone()[0]
        call_error = con.execute("SELECT error FROM llm_calls").fetchone()[0]
    for stored in (run_error, stage_error, call_error):
        assert "HTTP 401" in stored and "[redacted]" in stored, stored
    logs = prefect_logs(prefect_api, flow_run_id)
    assert "HTTP 401" in logs  # the failure is logged, so the check below looks at the right text

    for where, text in {"stdout": result.stdout, "stderr": result.stderr, "prefect logs": logs}.items():
        assert "canar" not in text and "Z123" not in text, where
    for f in cli.home.iterdir():
        if f.is_file():
            assert b"canar" not in f.read_bytes() and b"Z123" not in f.read_bytes(), f
