"""Checks an SOP must pass before the API graph and dataset stages run (DESIGN, chain row 'sop')."""

from __future__ import annotations

import re

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import BACKTICK_RE, SOP_SECTION_TITLES, WELL_FORMED_STEP, SOPDocument, normalize_title

__all__ = ["check_sop"]


def _step_numbering_problem(numbers: list[str]) -> str | None:
    bad = [n for n in numbers if not WELL_FORMED_STEP.match(n)]
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
    got = [(s.number, normalize_title(s.title)) for s in sop.sections]
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

    in_main = {m.strip() for m in BACKTICK_RE.findall(main_body)}
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
    in_input = {m.strip() for m in BACKTICK_RE.findall(inputs.body)} if inputs else set()
    unlisted = [f.name for f in schema.existing if f.name not in in_input]
    results.append(check(
        "sop.inputs_listed", not unlisted,
        f"existing fields not named in 4. Input: {', '.join(unlisted)}; list every input field in backticks"
        if unlisted else "every existing field is listed in 4. Input", severity="warning", fields=unlisted))
    return results
