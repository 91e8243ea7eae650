"""The agents and the MCP environment server, on a small in-memory environment (no sandbox, no network).

The server is driven by the official SDK's own client (in process); the models are scripted
through the gateway, so the agents' loops, step limits and error paths are the real ones.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from sopforge.evaluation.agents import McpToolbox, run_fc, run_react
from sopforge.evaluation.mcp_server import CONTROL_TOOLS, STATE_URI, TASKS_URI, build_server
from sopforge.evaluation.protocol import EnvTool, ToolOutcome
from sopforge.llm import Gateway, ScriptedProvider
from sopforge.llm.types import LLMRequest, LLMResponse, Message, ToolCall
from sopforge.settings import Settings

pytestmark = pytest.mark.timeout(60)

SCHEMA = {"type": "object", "properties": {"case_id": {"type": "string"}}, "required": ["case_id"],
          "additionalProperties": False}


class Session:
    def __init__(self) -> None:
        self.records: dict[str, Any] = {}
        self.calls: list[str] = []

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        if tool not in ("lookup", "record"):
            return ToolOutcome(error=f"unknown tool {tool!r}")
        if not isinstance(arguments.get("case_id"), str):
            return ToolOutcome(error="arguments do not match the schema of lookup: case_id is required")
        self.calls.append(tool)
        if tool == "record":
            self.records[arguments["case_id"]] = "denied"
            return ToolOutcome(result={"record_id": arguments["case_id"]})
        if arguments["case_id"] == "boom":
            return ToolOutcome(error="ValueError: the tool raised")
        return ToolOutcome(result={"case_id": arguments["case_id"], "limit": 7})

    def reset(self) -> None:
        self.records, self.calls = {}, []

    def state(self) -> dict[str, Any]:
        return {"state_diff": {"decisions": dict(self.records)}, "calls": list(self.calls)}


class Environment:
    name = "toy"
    instructions = "Look the case up, then record the decision."

    def tools(self) -> list[EnvTool]:
        return [EnvTool(name="lookup", description="Look up a case.", input_schema=SCHEMA),
                EnvTool(name="record", description="[WRITE] Record the decision.", input_schema=SCHEMA, writes=True)]

    def tasks(self) -> list[dict[str, Any]]:
        return [{"task_id": "C-1", "inputs": {"case_id": "C-1"}}]

    def new_session(self) -> Session:
        return Session()


def gateway(script, tmp_path) -> Gateway:
    return Gateway(ScriptedProvider(script), ledger=None, settings=Settings(_env_file=None, home=tmp_path))


def request(turn, messages, tools) -> LLMRequest:
    return LLMRequest(messages=messages, model="m", call_key=f"toy/eval/x/t{turn}", stage="eval", tools=tools)


def calls(*pairs) -> LLMResponse:
    return LLMResponse(text="", provider="scripted", model="m",
                       tool_calls=[ToolCall(id=f"c{i}", name=n, **a) for i, (n, a) in enumerate(pairs)])


async def with_client(fn, control: bool = False):
    async with Client(build_server(Environment(), control=control), mode="legacy") as client:
        return await fn(client)


def test_the_server_lists_write_marks_and_refuses_bad_arguments_as_tool_results():
    async def go(client):
        tools = (await client.list_tools()).tools
        bad = await client.call_tool("lookup", {"case": 1})
        unknown = await client.call_tool("nope", {})
        good = await client.call_tool("lookup", {"case_id": "C-1"})
        tasks = json.loads((await client.read_resource(TASKS_URI)).contents[0].text)
        return tools, bad, unknown, good, tasks

    tools, bad, unknown, good, tasks = anyio.run(with_client, go)
    assert {t.name: t.annotations.read_only_hint for t in tools} == {"lookup": True, "record": False}
    assert not set(CONTROL_TOOLS) & {t.name for t in tools}
    assert bad.is_error and "schema" in bad.content[0].text
    assert unknown.is_error and "unknown tool" in unknown.content[0].text
    assert not good.is_error and json.loads(good.content[0].text)["limit"] == 7
    assert tasks == [{"task_id": "C-1", "inputs": {"case_id": "C-1"}}]


def test_each_session_has_its_own_state_and_control_tools_reset_it():
    async def writer(client):
        await client.call_tool("record", {"case_id": "C-1"})
        before = json.loads((await client.read_resource(STATE_URI)).contents[0].text)
        await client.call_tool("sopforge_reset", {})
        after = json.loads((await client.call_tool("sopforge_database_state", {})).content[0].text)
        return before, after

    async def both():
        server = build_server(Environment(), control=True)
        async with Client(server, mode="legacy") as one, Client(server, mode="legacy") as two:
            await one.call_tool("record", {"case_id": "C-1"})
            other = json.loads((await two.read_resource(STATE_URI)).contents[0].text)
        return other

    before, after = anyio.run(with_client, writer, True)
    assert before["state_diff"] == {"decisions": {"C-1": "denied"}}
    assert after["state_diff"] == {"decisions": {}} and after["calls"] == []
    assert anyio.run(both)["state_diff"] == {"decisions": {}}, "a session never sees another's writes"


def test_fc_agent_runs_calls_reports_errors_back_and_answers(tmp_path):
    script = [calls(("lookup", {"arguments": {"case_id": "boom"}}), ("lookup", {"raw_arguments": "{oops"})),
              calls(("lookup", {"arguments": {"case_id": "C-1"}})),
              "<final_response>{\"decision\": \"deny\"}</final_response>"]
    provider_gateway = gateway(script, tmp_path)

    async def go(client):
        return await run_fc(provider_gateway, McpToolbox(client), request, Message(role="user", content="go"), 5)

    run = anyio.run(with_client, go)
    assert run.completed and run.final.startswith("<final_response>") and run.turns == 3
    assert [(c["tool"], c["error"]) for c in run.calls] == [("lookup", True), ("lookup", True), ("lookup", False)]
    assert "not a JSON object" in run.calls[1]["result"]
    second = provider_gateway.backend.requests[1]
    assert [r.is_error for r in second.messages[-1].tool_results] == [True, True]


def test_an_agent_that_loops_stops_at_the_step_limit(tmp_path):
    looping = gateway(lambda r: calls(("lookup", {"arguments": {"case_id": "C-1"}})), tmp_path)

    async def go(client):
        return await run_fc(looping, McpToolbox(client), request, Message(role="user", content="go"), 3)

    run = anyio.run(with_client, go)
    assert not run.completed and run.turns == 3 and "step limit" in run.error and len(run.calls) == 3


def test_react_needs_a_tool_before_answering_and_explains_a_bad_action(tmp_path):
    script = ["Thought: done\nFinal Answer: deny",
              "Thought: look\nAction: lookup\nAction Input: not json",
              "Thought: look\nAction: lookup\nAction Input: {\"case_id\": \"C-1\"}\nObservation: made up",
              "Thought: I now know the final answer\nFinal Answer: <final_response>{}</final_response>"]
    react_gateway = gateway(script, tmp_path)

    async def go(client):
        return await run_react(react_gateway, McpToolbox(client), request, Message(role="user", content="go"), 6)

    run = anyio.run(with_client, go)
    assert run.completed and run.turns == 4
    observations = [m.content for m in react_gateway.backend.requests[-1].messages if m.role == "user"][1:]
    assert observations[0] == "Observation: Call at least one tool before the final answer."
    assert observations[1].startswith("Observation: ERROR: Action Input is not valid JSON")
    assert json.loads(observations[2].removeprefix("Observation: "))["limit"] == 7, "the model's own observation is cut"
