"""Native tool use through the seam: both SDKs against the fake server, the ledger and cache, exchange and replay."""

from __future__ import annotations

import json

import pytest

from sopforge.errors import ResponsePending
from sopforge.llm import ExchangeProvider, Gateway, ReplayProvider
from sopforge.llm.testserver_agents import Move, agent_responder, tool_reply
from sopforge.llm.types import LLMRequest, Message, ToolCall, ToolResult, ToolSpec, sha256_json
from sopforge.store import Store

pytestmark = pytest.mark.timeout(30)

MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}
LOOKUP = ToolSpec(name="getPrescriptionRecord", description="Look up a refill request.",
                  input_schema={"type": "object", "properties": {"request_id": {"type": "string"}},
                                "required": ["request_id"]})


def first_turn(model: str, call_key: str = "demo/eval_sop_tools/sop_bench.fc.RR-1/t1") -> LLMRequest:
    return LLMRequest(system="Follow the SOP.", messages=[Message(role="user", content="Handle request RR-1.")],
                      model=model, call_key=call_key, stage="eval_sop_tools", tools=[LOOKUP])


def test_text_prompts_hash_as_before_tools_existed(make_request):
    """Recorded demo answers are matched by prompt hash: a prompt without tools must not change it."""
    request = make_request("Name three refill steps.")
    assert request.prompt_hash() == sha256_json(
        {"system": "You write SOPs.", "messages": [{"role": "user", "content": "Name three refill steps."}]})
    with_tools = request.model_copy(update={"tools": [LOOKUP]})
    assert with_tools.prompt_hash() != request.prompt_hash()


def test_a_tool_call_round_trip_through_each_sdk(protocol, server, settings, http_provider):
    def policy(view):
        if not view.calls:
            return Move(calls=[("getPrescriptionRecord", {"request_id": "RR-1"})])
        return Move(text=f"saw {view.calls[0].result} (error={view.calls[0].is_error})")

    server.responder = agent_responder(policy)
    gateway = Gateway(http_provider(protocol), ledger=None, settings=settings)
    request = first_turn(MODELS[protocol])

    response = gateway.complete(request)

    [call] = response.tool_calls
    assert (call.name, call.arguments) == ("getPrescriptionRecord", {"request_id": "RR-1"})
    assert response.stop_reason in ("tool_use", "tool_calls")
    tools_sent = server.requests[0].json["tools"]
    assert json.dumps(tools_sent).count("request_id") >= 1 and len(tools_sent) == 1

    second = request.model_copy(update={"messages": [
        *request.messages, Message(role="assistant", content="", tool_calls=response.tool_calls),
        Message(role="user", content="", tool_results=[ToolResult(call_id=call.id, content='{"drug": "x"}')])]})
    answer = gateway.complete(second)

    assert answer.tool_calls == [] and answer.text == 'saw {"drug": "x"} (error=False)'


def test_arguments_that_are_not_json_are_kept_for_the_agent_to_report(server, settings, http_provider):
    server.enqueue(tool_reply("", [("getPrescriptionRecord", "{request_id: RR-1")]))
    response = Gateway(http_provider("openai"), ledger=None, settings=settings).complete(first_turn("gpt-4o-mini"))

    [call] = response.tool_calls
    assert call.arguments == {} and call.raw_arguments == "{request_id: RR-1"


def test_tool_calls_are_recorded_and_served_again_from_the_response_cache(server, settings, http_provider, tmp_path):
    server.enqueue(tool_reply("checking", [("getPrescriptionRecord", {"request_id": "RR-1"})]))
    store = Store(tmp_path / "db.duckdb")
    gateway = Gateway(http_provider("anthropic"), ledger=store, settings=settings, run_id="r-1")

    first = gateway.complete(first_turn("claude-sonnet-4-5"))
    again = gateway.complete(first_turn("claude-sonnet-4-5"))

    assert again.from_cache and len(server.requests) == 1
    assert again.tool_calls == first.tool_calls and again.text == "checking"
    [record] = Store(tmp_path / "db.duckdb").calls_for_run("r-1")
    assert record.tool_calls[0]["name"] == "getPrescriptionRecord"


def test_exchange_shows_tools_and_how_to_call_them_and_reads_calls_back(tmp_path):
    folder = tmp_path / "exchange"
    request = first_turn("exchange")
    with pytest.raises(ResponsePending) as info:
        ExchangeProvider(folder).send(request)
    text = open(info.value.request_path, encoding="utf-8").read()
    assert "## tools" in text and "### getPrescriptionRecord" in text and '"request_id"' in text
    assert "## how to answer" in text and "<tool_call>" in text

    response_file = info.value.request_path.replace(".request.md", ".response.md")
    with open(response_file, "w", encoding="utf-8") as handle:
        handle.write('I will look it up.\n<tool_call>{"name": "getPrescriptionRecord", "arguments": '
                     '{"request_id": "RR-1"}}</tool_call>\n<tool_call>{"name": "x", "arguments": [1]}</tool_call>\n')
    for provider in (ExchangeProvider(folder), ReplayProvider(folder)):
        response = provider.send(request)
        assert response.text == "I will look it up."
        good, bad = response.tool_calls
        assert (good.name, good.arguments, good.raw_arguments) == ("getPrescriptionRecord", {"request_id": "RR-1"}, None)
        assert bad.name == "x" and bad.raw_arguments is not None
        assert good.id != bad.id


def test_exchange_renders_the_conversation_with_calls_and_results(tmp_path):
    call = ToolCall(id="c1", name="getPrescriptionRecord", arguments={"request_id": "RR-1"})
    request = first_turn("exchange").model_copy(update={"messages": [
        Message(role="user", content="Handle request RR-1."),
        Message(role="assistant", content="", tool_calls=[call]),
        Message(role="user", content="", tool_results=[ToolResult(call_id="c1", content="boom", is_error=True)])]})
    with pytest.raises(ResponsePending) as info:
        ExchangeProvider(tmp_path).send(request)
    text = open(info.value.request_path, encoding="utf-8").read()
    assert '<tool_call>{"name": "getPrescriptionRecord", "arguments": {"request_id": "RR-1"}}</tool_call>' in text
    assert '<tool_result name="getPrescriptionRecord" error="true">boom</tool_result>' in text


def test_a_text_request_keeps_tool_call_tags_as_text(tmp_path, make_request):
    """Only a request that offers tools is read for calls: a ReAct agent's text stays text."""
    request = make_request("Answer.", call_key="demo/eval_sop_tools/x/t1")
    (tmp_path / "demo__eval_sop_tools__x__t1.response.md").write_text('<tool_call>{"name": "a"}</tool_call>')
    response = ExchangeProvider(tmp_path).send(request)
    assert response.tool_calls == [] and "<tool_call>" in response.text
