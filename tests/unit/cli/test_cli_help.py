"""The help a new user reads first: complete and without rich markup eating text."""

from __future__ import annotations

import re
from importlib.metadata import version

from typer.testing import CliRunner

from sopforge.cli.app import app
from sopforge.families import plan

RUNNER = CliRunner()


def _help(*args: str) -> str:
    result = RUNNER.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return re.sub(r"\s+", " ", result.output)


def test_generate_help_names_every_stage_of_the_chain():
    text = _help("generate")
    words = {"api_graph": "API graph", "sop": "SOP"}
    for stage in plan(("sop_tools",)).names:
        assert words.get(stage, stage) in text, stage
    assert "package" in text.split("sop_tools:", 1)[1]


def test_bracketed_text_in_option_help_is_not_taken_for_markup():
    text = _help("generate")
    assert "Short  name" not in text and "Short name of the domain, letters a-z, digits and _" in text


def test_version_and_the_runs_subcommands():
    result = RUNNER.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"sopforge {version('sopforge')}"
    assert {"delete", "prune"} <= set(re.findall(r"│ (\w+)\s", RUNNER.invoke(app, ["runs", "--help"]).output))
