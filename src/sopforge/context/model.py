"""BusinessContext: the first artifact of the chain (TELLER P1 + SOP-Bench business task).

The model answers with a ``<business_context>`` block of eight ``## N. Title`` sections and
a ``<task>`` YAML block naming the SOP to write (format: ``docs/formats.md``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sopforge.parsing import ParseError, describe_validation_error, extract_tag, extract_yaml, one_line

__all__ = [
    "SECTION_TITLES",
    "ContextSection",
    "SubBusiness",
    "BusinessTask",
    "BusinessContext",
]

SECTION_TITLES: tuple[str, ...] = (
    "Business Overview",
    "Business Types",
    "Process Description",
    "Key Roles",
    "System & Tool Support",
    "Risks & Controls",
    "Metrics",
    "Best Practices",
)

# Headings may carry extra Markdown emphasis or a trailing colon; the number and title are
# what matter. One to three '#' because models vary the heading level.
_HEADING_RE = re.compile(r"^#{1,3}\s*\**\s*(\d+)\s*[.)]\s*(.+?)\s*\**\s*:?\s*$", re.MULTILINE)
_SUB_BUSINESS_RE = re.compile(r"^\s*[-*•]\s*\**Sub-business\s+([A-Za-z0-9]+)\**\s*:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)
# Separators allowed between a sub-business name and its description, first match wins.
_NAME_SEPARATOR_RE = re.compile(r"\s*(?:—|–|\s-\s|:)\s*")


def normalize_title(title: str) -> str:
    """Lower-case a heading title with ``&``/``and`` unified, for order-insensitive wording checks."""
    text = title.lower().replace("&", " and ")
    text = re.sub(r"[*_`#:]", " ", text)
    return " ".join(text.split())


def _normalize_name(name: str) -> str:
    return " ".join(name.lower().split())


class ContextSection(BaseModel):
    """One ``## N. Title`` section of the business context."""

    number: int = Field(description="Section number as written in the heading (1-8 expected).")
    title: str = Field(description="Heading title as written, e.g. 'Business Overview'.")
    body: str = Field(description="Section text up to the next heading, stripped.")


class SubBusiness(BaseModel):
    """A sub-business listed in section 2 ('Business Types')."""

    label: str = Field(description="Letter or number after 'Sub-business', e.g. 'A'.")
    name: str = Field(description="Short name of the sub-business.")
    description: str = Field(description="One-line description of what the sub-business does.")


class BusinessTask(BaseModel):
    """The procedure the SOP will describe (SOP-Bench 'business task' + 'task context')."""

    model_config = ConfigDict(extra="forbid")

    sub_business: str = Field(description="Exact name of the sub-business the SOP belongs to.")
    sop_title: str = Field(description="One sentence naming the procedure; becomes the SOP title.")
    task_context: str = Field(description="One paragraph on what the SOP must include.")
    required_steps: list[str] = Field(description="Workflow steps the SOP must contain, in order.")


class BusinessContext(BaseModel):
    """Business context for one theme plus the chosen task."""

    theme: str = Field(description="Business theme the context was generated from.")
    sections: list[ContextSection] = Field(description="Sections in the order they appear (8 expected).")
    sub_businesses: list[SubBusiness] = Field(description="Sub-businesses listed in section 2.")
    task: BusinessTask = Field(description="The procedure to write an SOP for.")

    @classmethod
    def parse(cls, raw_text: str, *, theme: str = "") -> BusinessContext:
        """Parse a model answer holding ``<business_context>`` and ``<task>`` blocks.

        Args:
            raw_text: The model's full answer.
            theme: The business theme the answer was generated for (stored on the artifact;
                the context stage always passes it).

        Returns:
            The parsed context; run :func:`check_context` for the semantic checks.

        Raises:
            ParseError: A block is missing, the task is not the expected YAML mapping, or a
                sub-business line lacks a name.
        """
        body = extract_tag(raw_text, "business_context")
        task_text = extract_tag(raw_text, "task")
        return cls(
            theme=theme,
            sections=_parse_sections(body),
            sub_businesses=_parse_sub_businesses(body),
            task=_parse_task(task_text),
        )

    def chosen_sub_business(self) -> SubBusiness | None:
        """Return the sub-business ``task.sub_business`` names (case-insensitive), if any."""
        wanted = _normalize_name(self.task.sub_business)
        return next((sb for sb in self.sub_businesses if _normalize_name(sb.name) == wanted), None)

    def additional_context(self) -> str:
        """Task context plus the numbered required steps, as the schema and SOP templates expect."""
        steps = "\n".join(f"{i}. {step}" for i, step in enumerate(self.task.required_steps, 1))
        return f"{self.task.task_context.strip()}\n\nRequired steps:\n{steps}"

    def to_prompt_text(self) -> str:
        """Render the eight sections as Markdown, the ``business_context`` of later templates."""
        return "\n\n".join(f"## {s.number}. {s.title}\n{s.body}".rstrip() for s in self.sections)


def _parse_sections(body: str) -> list[ContextSection]:
    matches = list(_HEADING_RE.finditer(body))
    sections = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        sections.append(ContextSection(number=int(m.group(1)), title=m.group(2).strip(),
                                       body=body[m.end():end].strip()))
    return sections


def _parse_sub_businesses(body: str) -> list[SubBusiness]:
    found = []
    for m in _SUB_BUSINESS_RE.finditer(body):
        parts = _NAME_SEPARATOR_RE.split(m.group(2).strip("* "), maxsplit=1)
        if len(parts) != 2 or not parts[0].strip("* ") or not parts[1].strip():
            raise ParseError(
                f"sub-business line needs '<name> — <description>': {one_line(m.group(0))!r}")
        found.append(SubBusiness(label=m.group(1).upper(), name=parts[0].strip("* "),
                                 description=parts[1].strip()))
    return found


def _as_step(item: Any) -> str:
    # "- Verify identity: check the ID" is a one-key mapping in YAML; the author meant text.
    if isinstance(item, dict) and len(item) == 1:
        key, value = next(iter(item.items()))
        return f"{key}: {value}" if value is not None else str(key)
    if isinstance(item, (str, int, float)):
        return str(item).strip()
    raise ParseError(f"<task>: each required_steps item must be one line of text, got {one_line(repr(item), 80)}")


def _parse_task(text: str) -> BusinessTask:
    data = extract_yaml(text, require_mapping=True)
    steps = data.get("required_steps")
    if isinstance(steps, list):
        data["required_steps"] = [_as_step(s) for s in steps]
    elif isinstance(steps, str):
        raise ParseError("<task>: required_steps must be a YAML list ('  - step' lines), not one string")
    for key in ("sub_business", "sop_title", "task_context"):
        if isinstance(data.get(key), (int, float)):
            data[key] = str(data[key])
    try:
        return BusinessTask.model_validate(data)
    except ValidationError as exc:
        raise ParseError(describe_validation_error(exc, "<task>")) from exc


