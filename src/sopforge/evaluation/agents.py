"""The two agents SOP-Bench evaluates, over any MCP server: function calling and ReAct.

Both reach the domain only through an MCP client session (:class:`McpToolbox`), the same server code
``sopforge mcp`` serves to any other agent, and call models only through the gateway (an
``LLMClient``), so limits, the response cache, the ledger, replay and exchange all apply.

* **fc** (SOP-Bench's function-calling agent, §5 and Appendix A): the tools are offered natively
  (Anthropic ``tools``, OpenAI function calling); every tool call of a turn is run in order and its
  result sent back; the first turn without a tool call is the final answer. Arguments that are not
  a JSON object, unknown tools and schema errors come back to the model as error results.
* **react** (D.2): a text agent writing ``Thought / Action / Action Input``; each action's result
  comes back as ``Observation:``; ``Final Answer:`` ends the task, but only after at least one tool
  call (the paper's rule). An action that cannot be parsed is answered with an observation saying
  how to write one.

A run stops at the step limit (model turns) with ``error`` set: an agent that loops is a failed
task, never a hung evaluation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio

from sopforge.errors import ResponsePending
from sopforge.llm.types import LLMClient, LLMRequest, Message, ToolCall, ToolResult, ToolSpec

__all__ = ["AgentRun", "McpToolbox", "REACT_FORMAT", "run_fc", "run_react"]

REACT_FORMAT = ("Thought: <your reasoning>\nAction: <one tool name>\nAction Input: <a JSON object of arguments>\n"
                "... or, once done: Thought: I now know the final answer\nFinal Answer: <your answer>")
_ACTION = re.compile(r"Action\s*:\s*(?P<name>[^\n]+?)\s*\n\s*Action\s*Input\s*:\s*(?P<input>.+)", re.DOTALL)
_FINAL = re.compile(r"Final\s*Answer\s*:\s*(?P<answer>.+)", re.DOTALL)

# request(turn, messages, tools) -> LLMRequest: the family builds it (call key, template, model...).
RequestFactory = Callable[[int, list[Message], list[ToolSpec] | None], LLMRequest]


@dataclass
class AgentRun:
    """What an agent did on one task."""

    final: str | None = None
    completed: bool = False
    error: str | None = None
    turns: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)  # {"tool", "input", "result", "error"} in order
    transcript: list[dict[str, Any]] = field(default_factory=list)  # every model turn: text and tool calls
    llm_error: bool = False  # the model could not be reached (provider error), not the agent's fault

    def dump(self) -> dict[str, Any]:
        return {"final": self.final, "completed": self.completed, "error": self.error, "turns": self.turns,
                "calls": self.calls, "transcript": self.transcript}


class McpToolbox:
    """Tools of an MCP client session, as the agents call them."""

    def __init__(self, client: Any):
        self.client = client
        self.specs: list[ToolSpec] = []

    async def load(self) -> list[ToolSpec]:
        listed = await self.client.list_tools()
        self.specs = [ToolSpec(name=t.name, description=t.description or "", input_schema=t.input_schema)
                      for t in listed.tools]
        return self.specs

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """(result text, is_error) of one call; MCP reports every problem as an error result."""
        result = await self.client.call_tool(name, arguments)
        text = "".join(getattr(block, "text", "") for block in result.content)
        return text, bool(result.is_error)


async def _complete(llm: LLMClient, request: LLMRequest):
    # The gateway blocks (HTTP, retries, rate limits): off the event loop that serves the MCP session.
    return await anyio.to_thread.run_sync(llm.complete, request)


async def _record_call(run: AgentRun, toolbox: McpToolbox, call: ToolCall) -> ToolResult:
    if call.raw_arguments is not None:
        text, error = (f"the arguments of {call.name or 'this call'} are not a JSON object: "
                       f"{call.raw_arguments[:200]}"), True
    else:
        text, error = await toolbox.call(call.name, call.arguments)
    run.calls.append({"tool": call.name, "input": call.arguments if call.raw_arguments is None else call.raw_arguments,
                      "result": text, "error": error})
    return ToolResult(call_id=call.id, content=text, is_error=error)


async def run_fc(llm: LLMClient, toolbox: McpToolbox, request: RequestFactory, first: Message,
                 max_steps: int, *, offer_tools: bool = True) -> AgentRun:
    """The function-calling agent (see the module docstring); ``offer_tools=False`` is the no-tools baseline."""
    run = AgentRun()
    tools = await toolbox.load() if offer_tools else None
    messages = [first]
    for turn in range(1, max_steps + 1):
        run.turns = turn
        try:
            response = await _complete(llm, request(turn, messages, tools))
        except ResponsePending:
            raise  # the exchange provider waits for an answer: the item is not finished, nor failed
        except Exception as error:  # ProviderError, UserError of a provider: the item fails, the eval goes on
            run.error, run.llm_error = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}", True
            return run
        run.transcript.append({"turn": turn, "text": response.text,
                               "tool_calls": [c.model_dump() for c in response.tool_calls]})
        if not response.tool_calls or tools is None:
            run.final, run.completed = response.text, True
            return run
        # Providers name calls with random ids; ours depend only on the turn, so the conversation (and
        # so every later prompt) is the same when an item runs again: its turns come from the cache.
        calls = [c.model_copy(update={"id": f"call_t{turn}_{i}"}) for i, c in enumerate(response.tool_calls)]
        messages.append(Message(role="assistant", content=response.text, tool_calls=calls))
        results = [await _record_call(run, toolbox, call) for call in calls]
        messages.append(Message(role="user", content="", tool_results=results))
    run.error = f"step limit: no final answer after {max_steps} model turns"
    return run


def _action(text: str) -> tuple[str, dict[str, Any] | None, str | None] | None:
    """(tool, arguments, problem) of a ReAct action, or None when the turn has none."""
    match = _ACTION.search(text)
    if match is None:
        return None
    name, raw = match.group("name").strip().strip("`"), match.group("input").strip()
    raw = re.sub(r"^```(?:json)?\s*|\s*```$", "", raw.split("\nObservation:")[0].strip())
    try:
        value = json.JSONDecoder().raw_decode(raw)[0]
    except ValueError:
        return name, None, f"Action Input is not valid JSON: {raw[:200]}"
    if not isinstance(value, dict):
        return name, None, "Action Input must be a JSON object of the tool's arguments"
    return name, value, None


async def run_react(llm: LLMClient, toolbox: McpToolbox, request: RequestFactory, first: Message,
                    max_steps: int) -> AgentRun:
    """The ReAct text agent (see the module docstring). ``first`` must already describe the tools."""
    run = AgentRun()
    await toolbox.load()
    messages = [first]
    for turn in range(1, max_steps + 1):
        run.turns = turn
        try:
            response = await _complete(llm, request(turn, messages, None))
        except ResponsePending:
            raise
        except Exception as error:
            run.error, run.llm_error = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}", True
            return run
        # A model that writes its own "Observation:" is cut there, as LangChain's ReAct does.
        text = response.text.split("\nObservation:")[0].strip()
        run.transcript.append({"turn": turn, "text": text})
        action = _action(text)
        final = _FINAL.search(text)
        if final is not None and action is None:
            if run.calls:
                run.final, run.completed = final.group("answer").strip(), True
                return run
            observation = "Call at least one tool before the final answer."
        elif action is None:
            observation = f"No action found. Use exactly this format:\n{REACT_FORMAT}"
        else:
            name, arguments, problem = action
            if problem is not None:
                run.calls.append({"tool": name, "input": None, "result": problem, "error": True})
                observation = f"ERROR: {problem}"
            else:
                result, error = await toolbox.call(name, arguments or {})
                run.calls.append({"tool": name, "input": arguments, "result": result, "error": error})
                observation = result
        messages += [Message(role="assistant", content=text), Message(role="user", content=f"Observation: {observation}")]
    run.error = f"step limit: no final answer after {max_steps} model turns"
    return run
