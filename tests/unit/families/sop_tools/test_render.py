"""What a reviewer reads: the SOP as ``sopforge show --stage sop`` renders it in a terminal."""

from __future__ import annotations

import re

from rich.console import Console
from rich.markdown import Markdown

from sopforge.families.sop_tools.render import sop_markdown


def _terminal_text(markdown: str) -> list[str]:
    console = Console(width=200, record=True, color_system=None)
    console.print(Markdown(markdown))
    return [line.strip() for line in console.export_text().splitlines()]


def test_the_main_procedure_keeps_one_step_per_line(good_sop):
    content = good_sop.model_dump(mode="json")
    body = next(s["body"] for s in content["sections"] if s["title"] == "Main Procedure")
    steps = [line.split()[0] for line in body.splitlines() if re.match(r"\d+(\.\d+)+\s", line)]
    assert len(steps) >= 5

    shown = _terminal_text(sop_markdown(content))
    starts = [line.split()[0] for line in shown if line and re.match(r"\d+(\.\d+)+\s", line)]
    assert starts == steps  # every step begins its own line, in order, none merged into another
