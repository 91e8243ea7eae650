"""``sopforge`` command line: one module per command group, composed here."""

from __future__ import annotations

from sopforge.cli import ending  # first: its exit hook must run after every other one (see the module)

import typer  # noqa: E402

from sopforge.cli import audit, evaluate, generate, inspect, mcp, rerun, review, runs, serve, ui

app = typer.Typer(
    name="sopforge",
    help="Turn a business theme into a verified, executable SOP benchmark for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version  # 0.07 s: only --version reads it

        try:
            typer.echo(f"sopforge {version('sopforge')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("sopforge (version unknown: not installed)")
        raise typer.Exit()


@app.callback()
def options(
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print the sopforge version and exit."),
) -> None:
    pass  # the app's help (above) describes sopforge; this callback only adds --version


app.command("generate")(generate.generate)
app.command("rerun")(rerun.rerun)
app.command("show")(inspect.show)
app.command("ui")(ui.ui)
app.command("audit")(audit.audit)
app.command("serve")(serve.serve)
app.command("eval")(evaluate.evaluate)
app.command("mcp")(mcp.mcp)
app.add_typer(runs.runs_app, name="runs")
app.add_typer(review.review_app, name="review")


def main() -> None:
    """The ``sopforge`` command (the console script and ``python -m sopforge.cli.app``)."""
    from sopforge.gc_thresholds import collect_less_often
    from sopforge.store import linger_reads

    collect_less_often()  # before the command imports Prefect & co.; see the module for the measurement

    # A command's reads come in bursts (a reused stage or `show` makes dozens): one DuckDB connection
    # per burst, not per read. Only here, for the command's own process: library users and tests
    # that call the app in-process keep a connection per operation.
    linger_reads()
    try:
        app()
    except SystemExit as exit_:  # click ends every command this way; a traceback ends as usual
        ending.ending_with(exit_.code)
        raise


if __name__ == "__main__":
    main()
