"""Declaration of the shared stages: what runs once per theme and feeds every family."""

from __future__ import annotations

from typing import Any

from sopforge.context import stage as context_stage
from sopforge.context.checks import check_context
from sopforge.context.model import BusinessContext
from sopforge.families.protocol import EditSpec, StageSpec

__all__ = ["SHARED_STAGES", "context_markdown"]


def context_markdown(content: dict[str, Any]) -> str:
    parts = [f"# Business context: {content.get('theme', '')}\n"]
    for section in content.get("sections", []):
        parts.append(f"## {section['number']}. {section['title']}\n\n{section['body'].strip()}\n")
    task = content.get("task", {})
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(task.get("required_steps", []), 1))
    parts.append(f"## Chosen task\n\n**{task.get('sop_title', '')}** (sub-business: {task.get('sub_business', '')})\n\n"
                 f"{task.get('task_context', '')}\n\n{steps}\n")
    return "\n".join(parts)


SHARED_STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        name="context", parents=(), kind="business_context", model=BusinessContext,
        template_ids=(context_stage.TEMPLATE_ID,), run=context_stage.run,
        make_inputs=lambda spec, up, ctx: context_stage.ContextInputs(theme=spec.theme, theme_slug=spec.slug),
        render=context_markdown, edit=EditSpec(check=lambda artifact, parents, settings: check_context(artifact)),
    ),
)
