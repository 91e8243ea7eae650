"""The fake server itself: what later stages' tests rely on when they script it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from sopforge.llm.providers._http import parse_retry_after
from sopforge.llm.testserver import FakeLLMServer, reply, status

pytestmark = pytest.mark.timeout(30)


def post(url: str, payload: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_responder_answers_by_stage_once_the_queue_is_empty():
    seen = []

    def responder(body, protocol):
        seen.append(protocol)
        return f"answer for {body['messages'][-1]['content']}"

    with FakeLLMServer(responder=responder) as server:
        server.enqueue(reply("scripted first"))
        _, first = post(f"{server.anthropic_base_url}/v1/messages", {"model": "m", "messages": [
            {"role": "user", "content": "a"}]})
        _, second = post(f"{server.openai_base_url}/chat/completions", {"model": "m", "messages": [
            {"role": "user", "content": "b"}]})

    assert first["content"][0]["text"] == "scripted first" and first["type"] == "message"
    assert second["choices"][0]["message"]["content"] == "answer for b"
    assert second["object"] == "chat.completion" and "prompt_tokens" in second["usage"]
    assert seen == ["openai"]
    assert [(r.protocol, r.json["messages"][0]["content"]) for r in server.requests] == [
        ("anthropic", "a"), ("openai", "b")]


def test_unscripted_request_fails_clearly():
    with FakeLLMServer() as server:
        code, body = post(f"{server.openai_base_url}/chat/completions", {"messages": []})
    assert code == 400 and "no scripted action" in body["error"]["message"]


def test_a_failing_responder_is_reported_not_dropped():
    def responder(body, protocol):
        raise KeyError("stage")

    with FakeLLMServer(responder=responder) as server:
        code, body = post(f"{server.anthropic_base_url}/v1/messages", {"messages": []})
    assert code == 400 and "responder raised KeyError" in body["error"]["message"]


def test_status_action_sends_retry_after_header():
    with FakeLLMServer() as server:
        server.enqueue(status(429, retry_after=3))
        request = urllib.request.Request(f"{server.anthropic_base_url}/v1/messages", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 429 and info.value.headers["retry-after"] == "3"


def test_server_listens_on_loopback_only_and_releases_its_port():
    server = FakeLLMServer().start()
    assert server.anthropic_base_url.startswith("http://127.0.0.1:")
    assert server.openai_base_url.endswith("/v1")
    server.stop()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after": "2"}, 2.0),
    ({"Retry-After": "1.5"}, 1.5),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
    ({"retry-after": "soon"}, None),
    ({}, None),
])
def test_retry_after_header_forms(headers, expected):
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(headers, now=now) == (pytest.approx(expected) if expected is not None else None)
