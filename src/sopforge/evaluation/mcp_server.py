"""A generated domain as an MCP server (official ``mcp`` SDK): ``sopforge mcp RUN``.

The server exposes a :class:`~sopforge.evaluation.protocol.ToolEnvironment`:

* **tools**: the domain's tools with their toolspec schemas; a write tool keeps ``[WRITE]`` at the
  start of its description and is annotated ``readOnlyHint: false`` (reads ``true``);
* **instructions**: the SOP;
* **resources**: ``sopforge://sop``, ``sopforge://tasks`` (every task as the agent sees it: its
  inputs, never its answer), ``sopforge://tasks/{task_id}`` and ``sopforge://session/state`` (this
  session's ``database_state`` view: the records its writes left, and its calls);
* with ``control=True`` two more tools for harnesses, ``sopforge_reset`` and
  ``sopforge_database_state`` (off by default: an agent under evaluation must not undo a write).

Each MCP session has its own state, seeded from the export: a stdio connection, a stateful
streamable-HTTP session (opened with the ``initialize`` handshake) or an in-process connection.
Requests of the stateless 2026-07-28 era carry no session, so they share one state per server
process unless their ``_meta`` names one under ``sopforge/session``. Tool code runs only in the
sandbox, in a worker thread so that one session's call never blocks another's. Bad arguments, an
unknown tool and a tool that raises come back as a tool result with ``isError`` (never a protocol
error, never a crash), so an agent reads what went wrong and can try again.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sopforge.evaluation.protocol import EnvSession, ToolEnvironment, ToolOutcome

__all__ = ["CONTROL_TOOLS", "SESSION_META_KEY", "SOP_URI", "STATE_URI", "TASKS_URI", "build_server", "outcome_text"]

SOP_URI = "sopforge://sop"
TASKS_URI = "sopforge://tasks"
STATE_URI = "sopforge://session/state"
SESSION_META_KEY = "sopforge/session"
CONTROL_TOOLS = ("sopforge_reset", "sopforge_database_state")
MAX_SESSIONS = 1024  # oldest sessions' states are dropped beyond this (an HTTP server runs for long)


def outcome_text(outcome: ToolOutcome) -> str:
    """What a caller reads: the result as JSON, or ``ERROR: <message>``."""
    if outcome.error is not None:
        return f"ERROR: {outcome.error}"
    return json.dumps(outcome.result, ensure_ascii=False, default=str)


class _Sessions:
    """Each client's own EnvSession, created on first use (so it starts from the seed)."""

    def __init__(self, environment: ToolEnvironment):
        self.environment = environment
        self._sessions: OrderedDict[str, tuple[EnvSession, threading.Lock]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[EnvSession, threading.Lock]:
        with self._lock:
            if key not in self._sessions:
                self._sessions[key] = (self.environment.new_session(), threading.Lock())
                while len(self._sessions) > MAX_SESSIONS:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(key)
            return self._sessions[key]


def _session_key(ctx: Any) -> str:
    """The state a request belongs to: ``_meta`` names it, else the connection (handshake era), else
    the process's default (stateless requests)."""
    meta = ctx.meta or {}
    if isinstance(meta, dict) and meta.get(SESSION_META_KEY):
        return f"meta:{meta[SESSION_META_KEY]}"
    # The SDK gives handlers a per-request ServerSession over the connection-scoped Connection,
    # whose ``state`` dict lives as long as the connection; no public accessor reaches it yet.
    connection = getattr(ctx.session, "_connection", None)
    if connection is None or connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return "default"
    return connection.state.setdefault("sopforge_session", uuid.uuid4().hex)


def _tool(tool: Any) -> types.Tool:
    return types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema,
                      annotations=types.ToolAnnotations(read_only_hint=not tool.writes,
                                                        destructive_hint=False if not tool.writes else None))


def _control_tools() -> list[types.Tool]:
    empty = {"type": "object", "properties": {}, "additionalProperties": False}
    return [types.Tool(name="sopforge_reset", description="Harness control: drop this session's writes and calls "
                       "(back to the seeded state).", input_schema=empty),
            types.Tool(name="sopforge_database_state", description="Harness control: this session's database "
                       "state view (records written, calls made).", input_schema=empty,
                       annotations=types.ToolAnnotations(read_only_hint=True))]


def _text_result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def build_server(environment: ToolEnvironment, *, control: bool = False) -> Server:
    """The MCP server of ``environment``.

    Args:
        environment: The domain (tools, SOP, tasks, sessions).
        control: Also list the harness tools ``sopforge_reset`` and ``sopforge_database_state``.
    """
    sessions = _Sessions(environment)
    tools = {t.name: t for t in environment.tools()}
    tasks = {str(t["task_id"]): t for t in environment.tasks()}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        listed = [_tool(t) for t in tools.values()]
        return types.ListToolsResult(tools=listed + (_control_tools() if control else []))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        session, lock = sessions.get(_session_key(ctx))
        if control and params.name == "sopforge_reset":
            with lock:
                session.reset()
            return _text_result("reset: the session is back to the seeded state")
        if control and params.name == "sopforge_database_state":
            return _text_result(json.dumps(session.state(), ensure_ascii=False, default=str))

        def run() -> ToolOutcome:
            with lock:  # one call at a time per session: its calls are replayed in order
                return session.call(params.name, dict(params.arguments or {}))

        outcome = await anyio.to_thread.run_sync(run)
        return _text_result(outcome_text(outcome), error=outcome.error is not None)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        fixed = [types.Resource(uri=SOP_URI, name="sop", description="The SOP the agent must follow.",
                                mime_type="text/plain"),
                 types.Resource(uri=TASKS_URI, name="tasks", description="Every task as the agent sees it "
                                "(inputs only).", mime_type="application/json"),
                 types.Resource(uri=STATE_URI, name="session state", description="This session's database "
                                "state view: records written, calls made.", mime_type="application/json")]
        return types.ListResourcesResult(resources=fixed + [
            types.Resource(uri=f"{TASKS_URI}/{task_id}", name=f"task {task_id}", mime_type="application/json")
            for task_id in tasks])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=f"{TASKS_URI}/{{task_id}}", name="task", mime_type="application/json")])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == SOP_URI:
            text, mime = environment.instructions, "text/plain"
        elif uri == TASKS_URI:
            text, mime = json.dumps(list(tasks.values()), ensure_ascii=False, default=str), "application/json"
        elif uri == STATE_URI:
            session, _ = sessions.get(_session_key(ctx))
            text, mime = json.dumps(session.state(), ensure_ascii=False, default=str), "application/json"
        elif uri.startswith(TASKS_URI + "/") and uri[len(TASKS_URI) + 1:] in tasks:
            text, mime = json.dumps(tasks[uri[len(TASKS_URI) + 1:]], ensure_ascii=False, default=str), \
                "application/json"
        else:
            raise ValueError(f"unknown resource {uri}: read {TASKS_URI} for the task list")
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)])

    return Server(f"sopforge-{environment.name}", instructions=environment.instructions,
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)
