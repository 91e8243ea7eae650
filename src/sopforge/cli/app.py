"""``sopforge`` command line: one module per command group, composed here."""

from __future__ import annotations

import typer

from sopforge.cli import audit, generate, inspect, rerun, review, serve, ui

app = typer.Typer(
    name="sopforge",
    help="Turn a business theme into a verified, executable SOP benchmark for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("generate")(generate.generate)
app.command("rerun")(rerun.rerun)
app.command("runs")(inspect.runs)
app.command("show")(inspect.show)
app.command("ui")(ui.ui)
app.command("audit")(audit.audit)
app.command("serve")(serve.serve)
app.add_typer(review.review_app, name="review")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
