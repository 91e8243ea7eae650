"""Extraction of answer blocks from raw model text.

The output formats are fixed in ``docs/formats.md``: every stage asks for its answer inside
named tags, and the parsers here pull out exactly those blocks. Every failure is a
``ParseError`` whose message is one line, because it is quoted back to the model on re-ask
and shown to reviewers.

Repair is deliberately narrow: only mistakes that have exactly one sensible reading
(Markdown code fences around a block, an unquoted colon inside a YAML scalar) are fixed;
anything else is an error the model is asked to correct.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from pydantic import ValidationError

from sopforge.pyast import literal_python

__all__ = [
    "ParseError",
    "extract_tag",
    "extract_all_tags",
    "extract_yaml",
    "extract_json",
    "extract_literal",
    "strip_code_fence",
    "one_line",
    "describe_validation_error",
]

# Longest excerpt of offending text quoted in an error message: long enough to recognise
# the line, short enough that the re-ask message stays readable.
_QUOTE_LIMIT = 160


class ParseError(ValueError):
    """A model answer does not follow its output format; ``str(err)`` is one line."""


def one_line(text: str, limit: int = _QUOTE_LIMIT) -> str:
    """Collapse whitespace to single spaces and truncate, for quoting text in messages.

    Args:
        text: Any text, possibly multi-line.
        limit: Maximum length of the result (an ellipsis marks truncation).

    Returns:
        The text on one line, at most ``limit`` characters long.
    """
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def extract_all_tags(text: str, tag: str) -> list[str]:
    """Return the contents of every complete ``<tag>…</tag>`` pair, in order.

    Args:
        text: Raw model answer.
        tag: Tag name without angle brackets, matched case-sensitively.

    Returns:
        The inner texts (not stripped); empty when there is no complete pair.
    """
    pattern = re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL)
    return [m.group(1) for m in pattern.finditer(text)]


def extract_tag(text: str, tag: str) -> str:
    """Return the inner text of the last complete ``<tag>…</tag>`` block, stripped.

    The last block wins because models sometimes quote the tag while planning (inside an
    analysis block) before writing the real answer.

    Args:
        text: Raw model answer.
        tag: Tag name without angle brackets, matched case-sensitively (the formats name
            tags exactly, e.g. ``SOP`` and ``Existing_fields``).

    Returns:
        The block's content with surrounding whitespace removed.

    Raises:
        ParseError: The tag is missing, or opened but never closed.
    """
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    end = text.rfind(close_tag)
    if end == -1:
        if open_tag in text:
            raise ParseError(f"unclosed <{tag}> block: no {close_tag} after it")
        raise ParseError(f"missing <{tag}>…</{tag}> block")
    start = text.rfind(open_tag, 0, end)
    if start == -1:
        raise ParseError(f"{close_tag} without a matching <{tag}>")
    return text[start + len(open_tag): end].strip()


_FENCE_RE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def strip_code_fence(text: str) -> str:
    """Remove one Markdown code fence wrapping the whole text, if present.

    Args:
        text: Block content, e.g. from :func:`extract_tag`.

    Returns:
        The fenced content, or the text unchanged (stripped) when it is not fenced.
    """
    m = _FENCE_RE.match(text)
    return (m.group(1) if m else text).strip()


# A ``key: value`` or ``- value`` line whose value holds ": " is a YAML error ("mapping values
# are not allowed here"); quoting the value is the only reading a human would give it.
_YAML_SCALAR_LINE = re.compile(r"^(?P<lead>\s*(?:-\s+)?(?:[A-Za-z_][\w ]*:\s+)?)(?P<value>.*\S)\s*$")


def _quote_colon_values(text: str) -> str:
    out = []
    for line in text.splitlines():
        m = _YAML_SCALAR_LINE.match(line)
        value = m.group("value") if m else ""
        if m and ": " in value and value[0] not in "\"'{[|>&*!%@`":
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            line = f'{m.group("lead")}"{escaped}"'
        out.append(line)
    return "\n".join(out)


def yaml_error_where(exc: yaml.YAMLError) -> str:
    """`` at line N`` when PyYAML knows where the error is, else ''."""
    mark = getattr(exc, "problem_mark", None)
    return f" at line {mark.line + 1}" if mark is not None else ""


def _yaml_error_line(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc)
    return one_line(f"{problem}{yaml_error_where(exc)}")


def extract_yaml(text: str, *, require_mapping: bool = False) -> Any:
    """Load YAML (``safe_load``) from a block, tolerating a code fence and unquoted colons.

    Args:
        text: YAML text, typically the content of a tag block.
        require_mapping: When True, the document must be a mapping (dict).

    Returns:
        The loaded value.

    Raises:
        ParseError: The text is not valid YAML, or not a mapping when one is required.
    """
    body = strip_code_fence(text)
    try:
        value = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        try:
            value = yaml.safe_load(_quote_colon_values(body))
        except yaml.YAMLError:
            raise ParseError(f"invalid YAML: {_yaml_error_line(exc)}") from exc
    if require_mapping and not isinstance(value, dict):
        kind = "nothing" if value is None else type(value).__name__
        raise ParseError(f"expected a YAML mapping of key: value lines, got {kind}")
    return value


def extract_json(text: str) -> Any:
    """Load JSON from a block, tolerating a surrounding code fence.

    Args:
        text: JSON text, typically the content of a tag block.

    Returns:
        The decoded value.

    Raises:
        ParseError: The text is not valid JSON.
    """
    try:
        return json.loads(strip_code_fence(text))
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def extract_literal(text: str) -> Any:
    """Evaluate a Python literal (``ast.literal_eval``), e.g. TELLER's ``['field:value', …]`` rows.

    Args:
        text: A Python literal expression.

    Returns:
        The evaluated value.

    Raises:
        ParseError: The text is not a Python literal.
    """
    try:
        return literal_python(strip_code_fence(text))
    except (ValueError, SyntaxError) as exc:
        raise ParseError(f"not a Python literal: {one_line(str(exc))}: {one_line(text, 80)!r}") from exc


def describe_validation_error(exc: ValidationError, where: str) -> str:
    """Summarise a pydantic ValidationError as one line naming each bad location.

    Args:
        exc: The error raised by ``model_validate``.
        where: What was being validated, e.g. ``"<task>"``.

    Returns:
        A line such as ``"<task>: sop_title: Field required; extra_key: Extra inputs are not permitted"``.
    """
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "value"
        parts.append(f"{loc}: {err['msg']}")
    return one_line(f"{where}: " + "; ".join(parts), 400)
