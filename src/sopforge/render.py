"""Human-readable renderings of artifacts: markdown for the Prefect UI and the terminal.

Works on stored content dicts (what ``artifacts.content`` holds), so the CLI can render any
version without re-validating it.
"""

from __future__ import annotations

import json
from typing import Any, Iterable


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








def artifact_markdown(stage: str, content: dict[str, Any]) -> str:
    """Markdown of a stored artifact, by the renderer its family declares (else its JSON)."""
    from sopforge.families import all_stages

    spec = all_stages().get(stage)
    if spec is None or spec.render is None:
        return f"```json\n{json.dumps(content, indent=2, ensure_ascii=False)}\n```"
    return spec.render(content)


def checks_markdown(checks: Iterable[Any]) -> str:
    """Check results with failures first, so a reviewer sees what matters at the top."""
    rows = sorted(({"check": c.check_name if hasattr(c, "check_name") else c.name, "passed": c.passed,
                    "severity": c.severity, "message": c.message} for c in checks),
                  key=lambda r: (r["passed"], r["severity"] != "error", r["check"]))
    rows = [{**r, "passed": "yes" if r["passed"] else "**NO**"} for r in rows]
    return "## Checks\n\n" + markdown_table(rows, ["passed", "severity", "check", "message"])
