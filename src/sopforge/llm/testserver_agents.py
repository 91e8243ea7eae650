"""Script the fake LLM server as a tool-using agent, in either wire protocol.

An agent evaluation talks to the model over many turns: each request carries the conversation so
far (the task, the model's earlier tool calls and their results). A test decides what the scripted
agent does next from that conversation with a *policy*, and :func:`agent_responder` turns it into
a :class:`~sopforge.llm.testserver.FakeLLMServer` responder:

* with native tool use (the request offers ``tools``) the reply carries real tool calls, as
  Anthropic ``tool_use`` blocks or OpenAI ``tool_calls``, read by the real SDKs;
* without tools (the ReAct text agent) the reply is ``Thought/Action/Action Input`` text, or
  ``Final Answer:`` when the policy is done; observations are read back from the user turns.

The policy sees an :class:`AgentView` (the system prompt, the first user message, the tools offered
and the calls made so far with their results) and returns a :class:`Move`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from sopforge.llm.testserver import Action, Responder

__all__ = ["AgentView", "Move", "PastCall", "agent_responder", "tool_reply", "view_of"]

_ACTION = re.compile(r"Action:\s*(.+?)\s*\nAction Input:\s*(.+?)\s*$", re.DOTALL)


def tool_reply(text: str = "", calls: list[tuple[str, dict[str, Any] | str]] | None = None) -> Action:
    """A 200 whose answer carries ``calls`` as native tool calls (and ``text``, if any)."""
    return Action("reply", text=text, tool_calls=tuple(calls or ()))


@dataclass
class PastCall:
    """A tool call the agent made earlier in the conversation, with what came back."""

    name: str
    arguments: dict[str, Any] | str
    result: str | None = None
    is_error: bool = False

    def result_json(self) -> Any:
        """The result parsed as JSON (None when it is not JSON)."""
        try:
            return json.loads(self.result or "")
        except ValueError:
            return None


@dataclass
class AgentView:
    """The conversation of one request, as a policy reads it."""

    protocol: str
    system: str
    task: str
    tools: list[str] | None
    calls: list[PastCall] = field(default_factory=list)
    turns: int = 0

    @property
    def native(self) -> bool:
        """True when the request offers tools (native tool use), False for a text (ReAct) agent."""
        return self.tools is not None


@dataclass
class Move:
    """What the scripted agent does this turn: call tools, or answer (``calls`` empty)."""

    calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    text: str = ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def _result_text(content: Any) -> str:
    return content if isinstance(content, str) else _text(content)


def view_of(body: dict[str, Any], protocol: str) -> AgentView:
    """Read the conversation of a request body (either protocol, native tools or ReAct text)."""
    messages = body.get("messages") or []
    system = _text(body.get("system")) if protocol == "anthropic" else ""
    if protocol == "openai" and messages and messages[0].get("role") == "system":
        system = _text(messages[0].get("content"))
        messages = messages[1:]
    tools = body.get("tools")
    names = None if tools is None else [t.get("name") or (t.get("function") or {}).get("name") for t in tools]
    view = AgentView(protocol=protocol, system=system, task=_text(messages[0].get("content")) if messages else "",
                     tools=names)
    by_id: dict[str, PastCall] = {}
    for message in messages[1:]:
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            view.turns += 1
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_use":
                    by_id[block["id"]] = PastCall(block.get("name", ""), block.get("input") or {})
                    view.calls.append(by_id[block["id"]])
            for item in message.get("tool_calls") or []:
                function = item.get("function") or {}
                raw = function.get("arguments") or "{}"
                try:
                    arguments: dict[str, Any] | str = json.loads(raw)
                except ValueError:
                    arguments = raw
                by_id[item["id"]] = PastCall(function.get("name", ""), arguments)
                view.calls.append(by_id[item["id"]])
            if names is None:  # ReAct: the action is in the text
                match = _ACTION.search(_text(content))
                if match:
                    try:
                        arguments = json.loads(match.group(2))
                    except ValueError:
                        arguments = match.group(2)
                    view.calls.append(PastCall(match.group(1).strip(), arguments))
        elif role == "tool":
            past = by_id.get(message.get("tool_call_id", ""))
            if past is not None:
                past.result = _text(content)
                past.is_error = past.result.startswith("ERROR:")
        elif role == "user":
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block.get("tool_use_id") in by_id:
                    past = by_id[block["tool_use_id"]]
                    past.result, past.is_error = _result_text(block.get("content")), bool(block.get("is_error"))
            text = _text(content)
            if names is None and text.lstrip().startswith("Observation:") and view.calls:
                view.calls[-1].result = text.split("Observation:", 1)[1].strip()
    return view


def agent_responder(policy: Callable[[AgentView], Move]) -> Responder:
    """A responder that answers every request as the agent ``policy`` describes."""

    def respond(body: dict[str, Any], protocol: str) -> str | Action:
        view = view_of(body, protocol)
        move = policy(view)
        if view.native:
            return tool_reply(move.text, move.calls)
        if move.calls:  # ReAct takes one action per turn
            name, arguments = move.calls[0]
            shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
            return f"Thought: I need to call {name}.\nAction: {name}\nAction Input: {shown}"
        return f"Thought: I now know the final answer\nFinal Answer: {move.text}"

    return respond
