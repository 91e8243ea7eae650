"""``sopforge mcp RUN``: serve a generated domain to any MCP client (stdio or streamable HTTP on loopback)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from sopforge.cli.output import err, handle_errors
from sopforge.errors import UserError

HOST = "127.0.0.1"


def environment_for(run: str, home: Path | None, family: str, options: dict[str, str]):
    """The tool environment of a run's export, built by the family's evaluation spec.

    Raises:
        UserError: No such run, no export, a family without an environment, or bad options.
    """
    from sopforge.cli.inspect import existing_store
    from sopforge.families import load_family

    settings, store = existing_store(home)
    record = store.get_run(run)
    spec = load_family(family).evaluation
    if spec is None or spec.environment is None:
        raise UserError(f"the {family} family has no tool environment to serve: use --family sop_tools")
    export_dir = settings.exports_dir / record.id
    if not export_dir.is_dir():
        raise UserError(f"run {record.id} has no export at {export_dir} (status {record.status}): "
                        f"finish it with `sopforge rerun {record.id}` first")
    from sopforge.sandbox.boundary import ensure_available

    ensure_available()  # tool code runs only in the sandbox: say so now rather than at the first call
    return spec.environment(export_dir, options)


@handle_errors
def mcp(
    run: str = typer.Argument(..., help="Run id (or a unique prefix) whose export to serve."),
    transport: str = typer.Option("stdio", help="stdio, or http (streamable HTTP on 127.0.0.1)."),
    port: int = typer.Option(8765, help="Port for --transport http (0: any free port)."),
    sop: str = typer.Option("base", help="The SOP given as the server's instructions: base or an SOP variant."),
    registry: str = typer.Option("with_distractors", help="Tool registry: with_distractors or minimal."),
    control: bool = typer.Option(False, "--control", help="Also list the harness tools sopforge_reset and "
                                 "sopforge_database_state (hidden from agents by default)."),
    family: str = typer.Option("sop_tools", help="The family whose environment to serve."),
    home: Optional[Path] = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts)."),
) -> None:
    """Serve a generated domain over MCP: its tools (run in the sandbox), the SOP as instructions, the tasks
    as resources, a database_state view per session (resource sopforge://session/state)."""
    if transport not in ("stdio", "http"):
        raise UserError(f"unknown transport {transport!r}: choose stdio or http")
    environment = environment_for(run, home, family, {"sop": sop, "registry": registry})
    from sopforge.evaluation.mcp_server import build_server

    server = build_server(environment, control=control)
    if transport == "stdio":
        import anyio
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(serve)
        return
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as error:
        raise UserError(f"cannot listen on {HOST}:{port} ({error.strerror}): choose another --port") from None
    # Listening before the address is printed: a client that connects at once waits in the backlog until uvicorn
    # accepts, instead of being refused (a bound socket that is not listening refuses; CI saw it).
    sock.listen(128)
    url = f"http://{HOST}:{sock.getsockname()[1]}/mcp"
    err.print(f"serving {environment.name} ({len(environment.tools())} tools, {len(environment.tasks())} tasks) "
              f"over MCP at {url}  (Ctrl-C stops)", markup=False, highlight=False)
    sys.stderr.flush()
    config = uvicorn.Config(server.streamable_http_app(host=HOST), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
