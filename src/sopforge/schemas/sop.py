"""SOPDocument: the standard operating procedure an agent must follow (SOP-Bench C.1 + TELLER P3).

The SOP is grounded in the DataSchema: fields are written in backticks exactly as named,
every to-be-obtained field is derived in the Main Procedure, every decision outcome is
stated, and decisions rest on explicit numeric thresholds (format: ``docs/formats.md``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from sopforge.parsing import extract_tag
from sopforge.schemas.checks import CheckResult, check
from sopforge.schemas.data_schema import DataSchema

__all__ = [
    "SOP_SECTION_TITLES",
    "SOPSection",
    "SOPStep",
    "SOPThreshold",
    "SOPDocument",
    "check_sop",
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
_WELL_FORMED_STEP = re.compile(r"^5\.[1-9]\d*(?:\.[1-9]\d*)?$")
_BACKTICK_RE = re.compile(r"`([^`\n]+)`")
_COMPARATOR = (r"(?:>=|<=|=>|=<|≥|≤|>|<|\bat\s+least|\bat\s+most|\bmore\s+than|\bless\s+than|"
               r"\bgreater\s+than|\bfewer\s+than|\bexceed(?:s|ed|ing)?|\bbelow|\babove|\bwithin)")
_THRESHOLD_RE = re.compile(
    rf"{_COMPARATOR}(?:\s+or\s+equal\s+to)?\s*(?:the\s+)?[$€£]?\s*-?\d+(?:[.,]\d+)*\s*%?", re.IGNORECASE)


def _norm(title: str) -> str:
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


class SOPThreshold(BaseModel):
    """An explicit quantitative condition (comparator followed by a number)."""

    step: str = Field(description="Step number holding it, or the section number for text outside steps.")
    section: str = Field(description="Title of the section holding it, as written.")
    text: str = Field(description="The matched comparator and number, e.g. '<= 7'.")


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
            if _norm(section.title) == MAIN_PROCEDURE and not steps:
                intro, steps = _parse_steps(section.body)
                thresholds += find_thresholds(intro, step=str(section.number), section=section.title)
                for step in steps:
                    thresholds += find_thresholds(step.text, step=step.number, section=section.title)
            else:
                thresholds += find_thresholds(section.body, step=str(section.number), section=section.title)
        referenced = list(dict.fromkeys(m.strip() for m in _BACKTICK_RE.findall(text)))
        return cls(title=title, text=text, sections=sections, steps=steps,
                   referenced_fields=referenced, thresholds=thresholds)

    def section(self, title: str) -> SOPSection | None:
        """Return the first section whose title matches ``title`` (case-insensitive)."""
        return next((s for s in self.sections if _norm(s.title) == _norm(title)), None)

    def to_prompt_text(self) -> str:
        """The SOP text as later templates (API graph, tools) consume it."""
        return self.text

    def checks(self, schema: DataSchema) -> list[CheckResult]:
        """Run :func:`check_sop` against ``schema``."""
        return check_sop(self, schema)


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
        if _norm(title) in _KNOWN_TITLES or (number == expected_next and short):
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
    return [SOPThreshold(step=step, section=section, text=" ".join(m.group(0).split()))
            for m in _THRESHOLD_RE.finditer(text)]


def _step_numbering_problem(numbers: list[str]) -> str | None:
    bad = [n for n in numbers if not _WELL_FORMED_STEP.match(n)]
    if bad:
        return f"malformed step numbers {', '.join(bad)} (use 5.x or 5.x.y, counting from 1)"
    prev: tuple[int, ...] | None = None
    for n in numbers:
        cur = tuple(int(p) for p in n.split("."))
        if prev is None:
            allowed = {(5, 1)}
        elif len(prev) == 2:
            allowed = {(5, prev[1] + 1), (5, prev[1], 1)}
        else:
            allowed = {(5, prev[1], prev[2] + 1), (5, prev[1] + 1)}
        if cur not in allowed:
            expect = " or ".join(".".join(map(str, a)) for a in sorted(allowed))
            if prev is None:
                return f"the first step is {n}; expected {expect}"
            return f"{n} comes after {'.'.join(map(str, prev))}; expected {expect}"
        prev = cur
    return None


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


def check_sop(sop: SOPDocument, schema: DataSchema) -> list[CheckResult]:
    """Checks that must hold before the API-graph stage runs (DESIGN, chain row 'sop').

    Args:
        sop: A parsed SOP.
        schema: The data schema the SOP was written for.

    Returns:
        One CheckResult per check, passed or not.
    """
    results = []
    got = [(s.number, _norm(s.title)) for s in sop.sections]
    want = [(i, t.lower()) for i, t in enumerate(SOP_SECTION_TITLES, 1)]
    expected = ", ".join(f"{i}. {t}" for i, t in enumerate(SOP_SECTION_TITLES, 1))
    found = ", ".join(f"{s.number}. {s.title}" for s in sop.sections) or "none"
    results.append(check(
        "sop.sections_in_order", got == want,
        f"<SOP> sections must be exactly {expected}, in this order, each heading alone on its line; found: {found}"
        if got != want else "six sections in order", found=[f"{n}. {t}" for n, t in got]))

    main = sop.section("Main Procedure")
    main_body = main.body if main else ""
    results.append(check(
        "sop.steps_present", bool(sop.steps),
        "no numbered steps in 5. Main Procedure; start each step on its own line with 5.1, 5.1.1, 5.2, …"
        if not sop.steps else f"{len(sop.steps)} steps", count=len(sop.steps)))

    problem = _step_numbering_problem([s.number for s in sop.steps])
    results.append(check(
        "sop.step_numbering", problem is None,
        f"step numbers in 5. Main Procedure must run 5.1, 5.1.1, 5.1.2, 5.2, … without gaps or repeats: {problem}"
        if problem else "step numbers are well-formed and increasing", problem=problem))

    in_main = {m.strip() for m in _BACKTICK_RE.findall(main_body)}
    underived = [f.name for f in schema.to_be_obtained if f.name not in in_main]
    results.append(check(
        "sop.to_be_obtained_derived", not underived,
        f"to-be-obtained fields never derived in 5. Main Procedure: {', '.join(underived)}; "
        "mention each in backticks where it is computed" if underived else "every to-be-obtained field is derived",
        fields=underived))

    known = set(schema.names)
    unknown = [n for n in sop.referenced_fields if n not in known]
    results.append(check(
        "sop.fields_known", not unknown,
        f"backticked names that are not schema fields: {', '.join(unknown)}; backticks are only for field names "
        f"exactly as in the schema ({', '.join(schema.names)})" if unknown else "every backticked name is a schema field",
        unknown=unknown))

    missing = []
    for f in schema.decisions:
        absent = [label for label in f.labels() if not _mentions(sop.text, label)]
        if absent:
            missing.append(f"{f.name} = {' / '.join(absent)}")
    results.append(check(
        "sop.decision_outcomes_defined", not missing,
        f"decision outcomes never stated in the SOP: {'; '.join(missing)}; state when each value is assigned "
        "in 5. Main Procedure and list every allowed value in 6. Output (booleans: both true and false)"
        if missing else "every decision outcome is stated", missing=missing))

    main_thresholds = [t for t in sop.thresholds if main is not None and t.section == main.title]
    results.append(check(
        "sop.thresholds_present", bool(main_thresholds),
        "no quantitative threshold in 5. Main Procedure; state decision rules with a comparator and a number, "
        "e.g. '`days_supply_remaining` <= 7' or 'at least 2'" if not main_thresholds
        else f"{len(main_thresholds)} threshold(s) in the Main Procedure", count=len(main_thresholds)))

    inputs = sop.section("Input")
    in_input = {m.strip() for m in _BACKTICK_RE.findall(inputs.body)} if inputs else set()
    unlisted = [f.name for f in schema.existing if f.name not in in_input]
    results.append(check(
        "sop.inputs_listed", not unlisted,
        f"existing fields not named in 4. Input: {', '.join(unlisted)}; list every input field in backticks"
        if unlisted else "every existing field is listed in 4. Input", severity="warning", fields=unlisted))
    return results
