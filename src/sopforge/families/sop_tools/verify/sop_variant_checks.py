"""Structural checks of an SOP variant: cheap, exact evidence that it did what its type claims.

They run before the LLM judge (``prompts/sop_bench/variant_judge.j2``) so a variant that is
plainly wrong never costs a judge call. Two families:

- **keeps the ground truth** (every type): the text changed; the six sections survive; every
  decision label and every to-be-obtained field is still named verbatim; every threshold number
  of the base SOP is still determinable, i.e. written in the variant or stated in the business
  context (TELLER S10: "the agent must find the threshold in the context"). 0.80 and 80% count
  as the same number.
- **does what its type says**:
  implicit_decision_points: fewer explicit thresholds than the base, and at least one threshold
  statement (field, comparator, number) gone from the SOP whose number the business context states
  (TELLER A.2 item 1); the number itself may still appear elsewhere with another meaning;
  ambiguity: fewer explicit thresholds (a comparator-with-number rewritten as prose, SOP-Bench
  L299 "threshold values ... require careful interpretation of SOP text");
  ambiguous_expressions: no tool name, and fewer backticked mentions than the base (concrete
  mechanics replaced by goal language, TELLER A.2 item 2);
  redundant_detail, tangential: longer than the base;
  exception_paths: longer, and no more if/when/unless clauses than the base (exceptions added
  "without explicit branching instructions", TELLER A.2 item 3);
  branching: more if/when/unless clauses than the base.

Each message is one actionable line, because it is quoted back to the model in the next cycle.
"""

from __future__ import annotations

import re

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.sop import SOPDocument, SOPThreshold

__all__ = ["check_variant", "parse_variant", "numbers_in", "threshold_stated_in", "conditional_count",
           "backtick_count"]

_NUMBER_RE = re.compile(r"(?<![\w.])(\d+(?:,\d{3})*(?:\.\d+)?)(\s*%)?")
_CONDITIONAL_RE = re.compile(r"\b(?:if|when|unless)\b", re.IGNORECASE)
BACKTICK_RE = re.compile(r"`[^`\n]+`")
LONGER_TYPES = ("redundant_detail", "tangential", "exception_paths")
FEWER_THRESHOLD_TYPES = ("implicit_decision_points", "ambiguity")


def parse_variant(text: str, base: SOPDocument) -> SOPDocument:
    """Parse a variant text with the base SOP's parser (sections, steps, thresholds)."""
    return SOPDocument.parse(f"<SOP>\n{text}\n</SOP>", title=base.title)


def numbers_in(text: str) -> set[float]:
    """Every number written in ``text``, rounded; ``80%`` contributes both 80 and 0.8."""
    values: set[float] = set()
    for m in _NUMBER_RE.finditer(text):
        value = float(m.group(1).replace(",", ""))
        values.add(round(value, 6))
        if m.group(2):
            values.add(round(value / 100, 6))
    return values


def _threshold_values(threshold: SOPThreshold) -> set[float]:
    return numbers_in(threshold.text)


def threshold_stated_in(threshold: SOPThreshold, numbers: set[float]) -> bool:
    """Whether the threshold's number is among ``numbers`` (see :func:`numbers_in`)."""
    values = _threshold_values(threshold)
    return bool(values) and bool(values & numbers)


def conditional_count(text: str) -> int:
    """Count of if / when / unless words: a proxy for the number of conditional clauses."""
    return len(_CONDITIONAL_RE.findall(text))


def backtick_count(text: str) -> int:
    """Count of backticked mentions (fields, and tool names if the SOP backticks them)."""
    return len(BACKTICK_RE.findall(text))


def _mentions(text: str, value: str) -> bool:
    # Same matching as the SOP gate's decision-outcome check (schemas/sop.py), so a label the
    # base SOP passed with is judged the same way in the variant.
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


def _keeps_ground_truth_checks(base: SOPDocument, variant: SOPDocument, schema: DataSchema,
                               output_fields: list[str], context_text: str) -> list[CheckResult]:
    results = [check("variant.changed", variant.text.strip() != base.text.strip(),
                     "the edits leave the SOP unchanged; make the change the variant type asks for",
                     ok="the variant differs from the base SOP")]

    titles = [s.title for s in base.sections]
    got = [s.title for s in variant.sections]
    results.append(check("variant.sections", got == titles,
                         f"the variant must keep the section headings {', '.join(titles)} in order; found "
                         f"{', '.join(got) or 'none'}; do not edit or remove heading lines",
                         ok="the section headings are kept in order", found=got))

    missing = [f"{f.name} = {label}" for f in schema.decisions for label in f.labels()
               if not _mentions(variant.text, label)]
    results.append(check("variant.decision_labels", not missing,
                         f"decision outcomes no longer named: {'; '.join(missing)}; keep every outcome value "
                         "verbatim where it is assigned", ok="every decision outcome is still named", missing=missing))

    unnamed = [name for name in output_fields if f"`{name}`" not in variant.text]
    results.append(check("variant.output_fields", not unnamed,
                         f"fields no longer named in backticks: {', '.join(unnamed)}; keep each where it is "
                         "derived and in 6. Output", ok="every output field is still named", missing=unnamed))

    available = numbers_in(variant.text) | numbers_in(context_text)
    lost = [t for t in base.thresholds if not threshold_stated_in(t, available)]
    results.append(check("variant.thresholds_determinable", not lost,
                         "thresholds neither in the variant nor stated in the business context: "
                         + "; ".join(f"'{t.text}' (step {t.step})" for t in lost)
                         + "; keep these numbers in the SOP",
                         ok="every threshold is stated in the variant or the business context", lost=[t.text for t in lost]))
    return results


def _type_checks(variant_type: str, base: SOPDocument, variant: SOPDocument, tool_names: list[str],
                 context_text: str) -> list[CheckResult]:
    results: list[CheckResult] = []
    n_base, n_var = len(base.thresholds), len(variant.thresholds)
    if variant_type in FEWER_THRESHOLD_TYPES:
        results.append(check("variant.fewer_thresholds", n_var < n_base,
                             f"{variant_type} must replace at least one explicit threshold (comparator and number) "
                             f"with prose; the variant has {n_var} thresholds, the base {n_base}",
                             ok=f"explicit thresholds went from {n_base} to {n_var}", base=n_base, variant=n_var))
    if variant_type == "implicit_decision_points":
        # The statement (field, comparator, number) must be gone, not every occurrence of the number:
        # "30" may stay as a days supply while "at least 30 days" as a threshold is removed.
        stated = {t.statement() for t in variant.thresholds}
        in_context = numbers_in(context_text)
        moved = [t.text + (f" on `{t.field}`" if t.field else "") for t in base.thresholds
                 if t.statement() is not None and t.statement() not in stated and threshold_stated_in(t, in_context)]
        results.append(check("variant.threshold_left_to_context", bool(moved),
                             "implicit_decision_points must remove from the SOP at least one threshold statement "
                             "(its field, comparator and number) whose number the business context states, so the "
                             "agent has to look it up there; none was removed",
                             ok=f"left to the business context: {', '.join(moved)}", moved=moved))
    if variant_type == "ambiguous_expressions":
        named = [t for t in tool_names if re.search(rf"(?<![\w]){re.escape(t)}(?![\w])", variant.text)]
        results.append(check("variant.no_tool_names", not named,
                             f"tool names still in the variant: {', '.join(named)}; describe the goal of the step "
                             "instead of the tool", ok="no tool is named", named=named))
        b_base, b_var = backtick_count(base.text), backtick_count(variant.text)
        results.append(check("variant.fewer_mechanics", b_var < b_base,
                             "ambiguous_expressions must replace concrete mechanics (fields read, formulas, tool "
                             f"calls) with goal language; backticked mentions went from {b_base} to {b_var}, expected fewer",
                             ok=f"backticked mentions went from {b_base} to {b_var}", base=b_base, variant=b_var))
    if variant_type in LONGER_TYPES:
        results.append(check("variant.longer", len(variant.text) > len(base.text),
                             f"{variant_type} adds text; the variant has {len(variant.text)} characters, the base "
                             f"{len(base.text)}", ok=f"{len(variant.text)} characters, the base {len(base.text)}",
                             base=len(base.text), variant=len(variant.text)))
    c_base, c_var = conditional_count(base.text), conditional_count(variant.text)
    if variant_type == "branching":
        results.append(check("variant.more_conditions", c_var > c_base,
                             f"branching must add conditional clauses; if/when/unless count went from {c_base} to "
                             f"{c_var}, expected more", ok=f"if/when/unless count went from {c_base} to {c_var}",
                             base=c_base, variant=c_var))
    if variant_type == "exception_paths":
        results.append(check("variant.no_branching_instructions", c_var <= c_base,
                             f"exception_paths adds exceptions without branching instructions; if/when/unless count "
                             f"went from {c_base} to {c_var}; describe each situation without 'if', 'when' or "
                             "'unless'", ok=f"if/when/unless count went from {c_base} to {c_var}", base=c_base, variant=c_var))
    return results


def check_variant(variant_type: str, base: SOPDocument, variant_text: str, *, schema: DataSchema,
                  output_fields: list[str], tool_names: list[str], context_text: str) -> list[CheckResult]:
    """All structural checks of one variant.

    Args:
        variant_type: One of ``options.VARIANT_TYPES``.
        base: The base SOP (ground truth comes from it).
        variant_text: The variant SOP text.
        schema: The data schema (decision fields and their labels).
        output_fields: Fields the variant must still name in backticks (the reference
            procedure's decision and intermediate columns).
        tool_names: Names of the real tools (must not appear in ambiguous_expressions).
        context_text: The rendered business context (where thresholds may live instead).

    Returns:
        One CheckResult per check, passed or not; all are errors.
    """
    variant = parse_variant(variant_text, base)
    return (_keeps_ground_truth_checks(base, variant, schema, output_fields, context_text)
            + _type_checks(variant_type, base, variant, tool_names, context_text))
