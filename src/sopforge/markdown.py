"""Markdown building blocks every renderer uses: tables and the verification funnel.

Imports nothing of sopforge, so a family's renderer can use it without importing the registry
that loads the family (``sopforge.render`` renders any stage through the registry).
"""

from __future__ import annotations

from typing import Any

__all__ = ["FUNNEL_COLUMNS", "funnel_markdown", "markdown_table"]


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    return head + "".join("| " + " | ".join(_cell(r.get(c)) for c in columns) + " |\n" for r in rows)


FUNNEL_COLUMNS = ["component", "item_type", "generated", "verified", "retried", "dropped", "kept"]


def funnel_markdown(content: dict[str, Any]) -> str:
    """The funnel table and every drop with its reason (distractors and manipulations)."""
    drops = content.get("drops", [])
    dropped = (f"\n### Dropped ({len(drops)})\n\n" + markdown_table(drops, ["component", "item_type", "item", "reason"])
               if drops else "\nNothing dropped.\n")
    return "## Funnel\n\n" + markdown_table(content.get("funnel", []), FUNNEL_COLUMNS) + dropped
