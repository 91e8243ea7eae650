"""Human-readable renderings of artifacts: markdown for the Prefect UI and the terminal.

Works on stored content dicts (what ``artifacts.content`` holds), so the CLI can render any
version without re-validating it.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from sopforge.markdown import FUNNEL_COLUMNS, funnel_markdown, markdown_table

__all__ = ["FUNNEL_COLUMNS", "artifact_markdown", "checks_markdown", "funnel_markdown", "markdown_table"]


def artifact_markdown(stage: str, content: dict[str, Any], family: str | None = None) -> str:
    """Markdown of a stored artifact, by the renderer its family declares (else its JSON)."""
    from sopforge.families import declared_stage

    spec = declared_stage(stage, family)
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
