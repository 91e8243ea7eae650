"""SOPDocument: the standard operating procedure an agent must follow (SOP-Bench C.1 + TELLER P3).

The SOP is grounded in the DataSchema: fields are written in backticks exactly as named,
every to-be-obtained field is derived in the Main Procedure, every decision outcome is
stated, and decisions rest on explicit numeric thresholds (format: ``docs/formats.md``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from sopforge.parsing import extract_tag

__all__ = [
    "SOP_SECTION_TITLES",
    "SOPSection",
    "SOPStep",
    "SOPThreshold",
    "SOPDocument",
    "THRESHOLD_RE",
    "find_thresholds",
]

SOP_SECTION_TITLES: tuple[str, ...] = ("Purpose", "Scope", "Definitions", "Input", "Main Procedure", "Output")
_KNOWN_TITLES = {t.lower() for t in SOP_SECTION_TITLES}
MAIN_PROCEDURE = "main procedure"

_HEADING_RE = re.compile(r"^[ \t]*(?:#{1,4}[ \t]*)?\**[ \t]*([1-9])\.[ \t]+(.+?)[ \t]*\**[ \t]*:?[ \t]*$")
# Any dotted number at the start of a line inside the Main Procedure is taken as a step number,
# so a mis-numbered step (4.2, 5.1.1.1) is reported by the numbering check instead of vanishing
# into the previous step's text.
_STEP_RE = re.compile(r"^[ \t]*(?:[-*][ \t]*)?\**[ \t]*(\d+(?:\.\d+)+)\.?\**[ \t]+(.*)$")
WELL_FORMED_STEP = re.compile(r"^5\.[1-9]\d*(?:\.[1-9]\d*)?$")
BACKTICK_RE = re.compile(r"`([^`\n]+)`")
_COMPARATOR = (r"(?:>=|<=|=>|=<|≥|≤|>|<|\bat\s+least|\bat\s+most|\bmore\s+than|\bless\s+than|"
               r"\bgreater\s+than|\bfewer\s+than|\bexceed(?:s|ed|ing)?|\bbelow|\babove|\bwithin)")
THRESHOLD_RE = re.compile(
    rf"{_COMPARATOR}(?:\s+or\s+equal\s+to)?\s*(?:the\s+)?[$€£]?\s*-?\d+(?:[.,]\d+)*\s*%?", re.IGNORECASE)


def normalize_title(title: str) -> str:
    return " ".join(re.sub(r"[*_`#:]", " ", title).lower().split())


class SOPSection(BaseModel):
    """One numbered top-level section of the SOP."""

    number: int = Field(description="Section number as written (1-6 expected).")
    title: str = Field(description="Heading title as written, e.g. 'Main Procedure'.")
    body: str = Field(description="Section text up to the next heading, stripped.")


class SOPStep(BaseModel):
    """One numbered step of the Main Procedure."""

    number: str = Field(description="Step number as written, without a trailing dot, e.g. '5.1.2'.")
    text: str = Field(description="Step text up to the next numbered line, stripped.")


_CANONICAL = ((re.compile(r"^(?:>=|=>|≥|at\s+least)"), ">="), (re.compile(r"^(?:<=|=<|≤|at\s+most|within)"), "<="),
              (re.compile(r"^(?:>|more\s+than|greater\s+than|exceed\w*|above)"), ">"),
              (re.compile(r"^(?:<|less\s+than|fewer\s+than|below)"), "<"))
_NUMBER_IN = re.compile(r"-?\d+(?:[.,]\d+)*")
# The text a field name governs ends at the previous sentence or clause ("0.80" is no boundary).
_CLAUSE_END = re.compile(r"[.;:](?=\s)|\n")


class SOPThreshold(BaseModel):
    """An explicit quantitative condition (comparator followed by a number), with the field it tests."""

    step: str = Field(description="Step number holding it, or the section number for text outside steps.")
    section: str = Field(description="Title of the section holding it, as written.")
    text: str = Field(description="The matched comparator and number, e.g. '<= 7'.")
    field: str | None = Field(None, description="The backticked field last named before it in the same clause.")

    def statement(self) -> tuple[str, str, float] | None:
        """(field, canonical comparator, number): the threshold as a statement, not a bare number.

        ``at least 0.80`` and ``>= 0.80`` are the same statement; ``at least 0.80`` on another
        field, or ``0.80`` written with another meaning, are not.
        """
        text = self.text.lower()
        comparator = next((c for rx, c in _CANONICAL if rx.match(text)), None)
        number = _NUMBER_IN.search(text)
        if comparator is None or number is None:
            return None
        if "or equal to" in text and comparator in (">", "<"):
            comparator += "="
        value = float(number.group(0).replace(",", ""))
        if text.rstrip().endswith("%"):
            value /= 100
        return (self.field or "", comparator, round(value, 6))


class SOPDocument(BaseModel):
    """A parsed SOP: the verbatim text for ``sop.txt`` plus its structure."""

    title: str = Field(description="SOP title (the task's sop_title).")
    text: str = Field(description="Full SOP text as written inside <SOP>; exported verbatim as sop.txt.")
    sections: list[SOPSection] = Field(description="Top-level sections in order of appearance (6 expected).")
    steps: list[SOPStep] = Field(description="Numbered steps of the Main Procedure, in order of appearance.")
    referenced_fields: list[str] = Field(description="Backticked identifiers in order of first use.")
    thresholds: list[SOPThreshold] = Field(description="Quantitative conditions found in the text.")

    @classmethod
    def parse(cls, raw_text: str, *, title: str = "") -> SOPDocument:
        """Parse the ``<SOP>`` block of a model answer (``<sop_analysis>`` is ignored).

        Args:
            raw_text: The model's full answer.
            title: The SOP title (the sop stage passes the task's ``sop_title``).

        Returns:
            The parsed SOP; run :func:`check_sop` for the schema-grounded checks.

        Raises:
            ParseError: The ``<SOP>`` block is missing or unclosed.
        """
        text = extract_tag(raw_text, "SOP")
        sections = _parse_sections(text)
        steps: list[SOPStep] = []
        thresholds: list[SOPThreshold] = []
        for section in sections:
            if normalize_title(section.title) == MAIN_PROCEDURE and not steps:
                intro, steps = _parse_steps(section.body)
                thresholds += find_thresholds(intro, step=str(section.number), section=section.title)
                for step in steps:
                    thresholds += find_thresholds(step.text, step=step.number, section=section.title)
            else:
                thresholds += find_thresholds(section.body, step=str(section.number), section=section.title)
        referenced = list(dict.fromkeys(m.strip() for m in BACKTICK_RE.findall(text)))
        return cls(title=title, text=text, sections=sections, steps=steps,
                   referenced_fields=referenced, thresholds=thresholds)

    def section(self, title: str) -> SOPSection | None:
        """Return the first section whose title matches ``title`` (case-insensitive)."""
        return next((s for s in self.sections if normalize_title(s.title) == normalize_title(title)), None)

    def to_prompt_text(self) -> str:
        """The SOP text as later templates (API graph, tools) consume it."""
        return self.text


def _parse_sections(text: str) -> list[SOPSection]:
    heads: list[tuple[int, int, int, str]] = []  # (line index, end offset, number, title)
    lines = text.splitlines(keepends=True)
    offset = 0
    for i, line in enumerate(lines):
        offset += len(line)
        m = _HEADING_RE.match(line.rstrip("\n"))
        if not m:
            continue
        number, title = int(m.group(1)), m.group(2).strip()
        expected_next = heads[-1][2] + 1 if heads else 1
        # A numbered list inside a section ("1. Pharmacist: ...") must not open a section:
        # accept known titles anywhere, and unknown short titles only at the next number, so
        # a wrongly titled section is still reported by the order check.
        short = len(title.split()) <= 4 and not title.endswith((".", ",", ";"))
        if normalize_title(title) in _KNOWN_TITLES or (number == expected_next and short):
            heads.append((i, offset, number, title))
    sections = []
    for k, (i, end, number, title) in enumerate(heads):
        stop = len(text) if k + 1 == len(heads) else sum(len(x) for x in lines[: heads[k + 1][0]])
        sections.append(SOPSection(number=number, title=title, body=text[end:stop].strip()))
    return sections


def _parse_steps(body: str) -> tuple[str, list[SOPStep]]:
    intro: list[str] = []
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        m = _STEP_RE.match(line)
        if m:
            steps.append((m.group(1), [m.group(2)]))
        elif steps:
            steps[-1][1].append(line)
        else:
            intro.append(line)
    return "\n".join(intro), [SOPStep(number=n, text="\n".join(t).strip()) for n, t in steps]


def find_thresholds(text: str, *, step: str, section: str) -> list[SOPThreshold]:
    """Find comparator-then-number conditions (``>= 7``, ``at least 2``, ``within 30``).

    Args:
        text: Text to scan.
        step: Step (or section) number to record on each match.
        section: Section title to record on each match.

    Returns:
        One SOPThreshold per match, in order.
    """
    found = []
    for m in THRESHOLD_RE.finditer(text):
        before = text[: m.start()]
        clause = before[max((b.end() for b in _CLAUSE_END.finditer(before)), default=0):]
        named = BACKTICK_RE.findall(clause)
        found.append(SOPThreshold(step=step, section=section, text=" ".join(m.group(0).split()),
                                  field=named[-1].strip() if named else None))
    return found






