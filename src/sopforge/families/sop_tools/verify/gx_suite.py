"""Great Expectations suites generated from a DataSchema, and the runner for dataset rows.

The suite is derived from the schema's existing fields only (the dataset holds nothing else):
per field, the column exists, is never null and holds values of its declared type; choices,
ranges, date formats, non-blank text and identifier shape are checked on the values; the row
identifier is unique. See ``validation/README.md`` for the full table.

Why two passes: GX's value expectations raise on a column of mixed types (``between`` on
``'7'``, ``strftime`` on ``5``) instead of reporting the value. So the structural expectations
(``phase: raw``) run on the rows as written, and the value expectations (``phase: typed``) on a
copy in which every value of the wrong type is blanked; the type check has already named it.

``great_expectations`` takes seconds to import (a third less the way ``gx_import.import_gx`` imports
it), so it is imported on first use, and its ephemeral context is created once per process and reused
(creating one is slow too).
Analytics are off unless the user switched them on explicitly: sopforge makes no network calls.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sopforge.parsing import one_line
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema, FieldSpec
from sopforge.labels import NA_TOKENS
from sopforge.families.sop_tools.models.dataset import MAX_QUOTED, find_id_field, quote_value, row_label
from sopforge.families.sop_tools.verify.gx_import import import_gx

if TYPE_CHECKING:
    import great_expectations as gx
    import pandas as pd

__all__ = ["CHECK_PREFIX", "SUITE_NAME", "GXReport", "build_suite", "suite_json", "validate_rows", "gx_context"]

CHECK_PREFIX = "dataset.gx"
SUITE_NAME = "sopforge_dataset"
RAW, TYPED = "raw", "typed"

# Python types GX's in_type_list test accepts per schema type (isinstance; see row_checks for bool).
TYPE_LISTS: dict[str, list[str]] = {
    "integer": ["int"], "float": ["float", "int"], "boolean": ["bool"],
    "string": ["str"], "enum": ["str"], "date": ["str"], "datetime": ["str"],
    "list[string]": ["list"], "list[integer]": ["list"], "list[float]": ["list"],
}
_TYPE_WORDS = {
    "integer": "a whole number such as 4", "float": "a number such as 0.85", "boolean": "True or False",
    "string": "text in quotes", "enum": "one of its choices, in quotes", "date": 'a date string "YYYY-MM-DD"',
    "datetime": 'a datetime string "YYYY-MM-DDTHH:MM:SS"', "list[string]": 'a list such as ["a", "b"]',
    "list[integer]": "a list of whole numbers such as [1, 2]", "list[float]": "a list of numbers such as [0.5, 1.0]",
}
DATE_FORMAT = "%Y-%m-%d"
DATE_REGEX = r"^\d{4}-\d{2}-\d{2}$"
DATETIME_REGEX = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?$"
# pandas' NA tokens (and 'unknown') or blank, whole value, any case: such a cell reads back as missing.
NA_REGEX = r"(?i)^\s*(?:" + "|".join(re.escape(t) for t in sorted(NA_TOKENS, key=len, reverse=True) if t) + r")?\s*$"
# What pandas would read as a number ('007' -> 7, '1e3' -> 1000.0): an identifier must not look like this.
NOT_NUMERIC_REGEX = r"^(?!\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$)"


def _is_id_name(name: str) -> bool:
    return name == "id" or name.endswith("_id")


def _typed_ok(f: FieldSpec, value: Any) -> bool:
    """Whether a value has the field's declared type, strictly (a bool is not a number)."""
    t = f.type
    if t == "integer":
        return type(value) is int
    if t == "float":
        return type(value) in (int, float) and math.isfinite(value)
    if t == "boolean":
        return type(value) is bool
    if t.startswith("list["):
        return type(value) is list
    return type(value) is str


def _plan(schema: DataSchema) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    """(phase, class name, column, rule, kwargs) for every expectation, in a stable order."""
    id_field = find_id_field(schema)
    names = [f.name for f in schema.existing]
    plan: list[tuple[str, str, str, str, dict[str, Any]]] = [
        (RAW, "ExpectTableColumnsToMatchSet", "table", "rows must have exactly the existing fields as keys",
         {"column_set": names, "exact_match": True}),
    ]
    for f in schema.existing:
        c = f.name
        plan.append((RAW, "ExpectColumnToExist", c, f"{c} must be present", {"column": c}))
        if f.present_if is None:
            # A conditional field is None where its condition fails; row_checks judge it row by row.
            plan.append((RAW, "ExpectColumnValuesToNotBeNull", c, f"{c} must have a value in every row (no None)",
                         {"column": c}))
        plan.append((RAW, "ExpectColumnValuesToBeInTypeList", c, f"{c} must be {_TYPE_WORDS.get(f.type, f.type)}",
                     {"column": c, "type_list": TYPE_LISTS.get(f.type, ["str"])}))
        if f.type == "string":
            plan.append((TYPED, "ExpectColumnValuesToNotMatchRegex", c,
                         f"{c} must be real text, not blank and not a missing-value token (N/A, None, null, unknown, …)",
                         {"column": c, "regex": NA_REGEX}))
        if f.choices and f.type in ("enum", "string"):
            plan.append((TYPED, "ExpectColumnValuesToBeInSet", c, f"{c} must be one of: {' | '.join(f.choices)}",
                         {"column": c, "value_set": list(f.choices)}))
        if f.type in ("integer", "float") and f.minimum is not None and f.maximum is not None:
            plan.append((TYPED, "ExpectColumnValuesToBeBetween", c, f"{c} must be between {f.minimum} and {f.maximum} inclusive",
                         {"column": c, "min_value": f.minimum, "max_value": f.maximum}))
        if f.type == "date":
            # strptime alone accepts "2025-4-18"; the regex pins the shape, strptime the calendar.
            plan += [
                (TYPED, "ExpectColumnValuesToMatchRegex", c, f'{c} must be a date written "YYYY-MM-DD"',
                 {"column": c, "regex": DATE_REGEX}),
                (TYPED, "ExpectColumnValuesToMatchStrftimeFormat", c, f"{c} must be a real calendar date",
                 {"column": c, "strftime_format": DATE_FORMAT}),
            ]
        if f.type == "datetime":
            plan += [
                (TYPED, "ExpectColumnValuesToMatchRegex", c,
                 f'{c} must be an ISO 8601 datetime written "YYYY-MM-DDTHH:MM:SS" (optionally ending in Z or +HH:MM)',
                 {"column": c, "regex": DATETIME_REGEX}),
                (TYPED, "ExpectColumnValuesToBeDateutilParseable", c, f"{c} must be a real date and time", {"column": c}),
            ]
        if f.type == "string" and _is_id_name(c):
            plan.append((TYPED, "ExpectColumnValuesToMatchRegex", c,
                         f"identifier {c} must contain a non-digit character (e.g. a prefix such as 'A-'), "
                         "so it is never read back as a number", {"column": c, "regex": NOT_NUMERIC_REGEX}))
        if c == id_field:
            plan.append((TYPED, "ExpectColumnValuesToBeUnique", c, f"{c} must be unique: it identifies one row",
                         {"column": c}))
    return plan


def _snake(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


def build_suite(schema: DataSchema, *, phase: str | None = None,
                checks: frozenset[str] | None = None) -> gx.ExpectationSuite:
    """Build the expectation suite for a dataset of the schema's existing fields.

    Args:
        schema: The accepted data schema.
        phase: ``"raw"`` or ``"typed"`` to keep only that pass's expectations; None keeps all.
        checks: Keep only the expectations with these check names; None keeps all.

    Returns:
        An unsaved ``ExpectationSuite``; each expectation carries ``meta.phase``, ``meta.check``
        (the CheckResult name) and a ``description`` saying the rule in words.
    """
    gx = import_gx()
    digest = hashlib.sha256(schema.model_dump_json().encode("utf-8")).hexdigest()
    with _RUNNER.lock:  # GX is used by one thread at a time (see _configurations_built_once)
        expectations = []
        for ph, cls_name, column, rule, kwargs in _plan(schema):
            if phase is not None and ph != phase:
                continue
            cls = getattr(gx.expectations, cls_name)
            name = f"{CHECK_PREFIX}.{_snake(cls_name)}.{column}"
            if checks is not None and name not in checks:
                continue
            expectations.append(cls(**kwargs, description=rule, meta={"phase": ph, "check": name}))
        return gx.ExpectationSuite(name=SUITE_NAME, expectations=expectations,
                                   meta={"sopforge": {"generated_from": "DataSchema existing fields",
                                                      "schema_sha256": digest}})


def suite_json(schema: DataSchema) -> dict[str, Any]:
    """The suite as GX's JSON dict (``ExpectationSuite(**suite_json(s))`` rebuilds it), for storage and export."""
    with _RUNNER.lock:
        return build_suite(schema).to_json_dict()


class _Runner:
    """The process-wide ephemeral context and its one pandas batch definition."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # held around every use of GX; suite_json builds a suite inside it
        self._context: Any = None
        self._batch_definition: Any = None

    def context(self) -> Any:
        if self._context is None:
            gx = import_gx()
            from great_expectations.data_context.types.base import ProgressBarsConfig

            context = gx.get_context(mode="ephemeral")
            context.variables.progress_bars = ProgressBarsConfig(globally=False)
            asset = context.data_sources.add_pandas("sopforge").add_dataframe_asset("dataset_rows")
            self._batch_definition = asset.add_batch_definition_whole_dataframe("whole")
            self._context = context
        return self._context

    def validate(self, frame: pd.DataFrame, suite: Any, *, detailed: bool) -> Any:
        """GX's validation of ``frame``: with the offending values (``detailed``) or pass/fail only."""
        result_format = ({"result_format": "SUMMARY", "partial_unexpected_count": MAX_QUOTED} if detailed
                         else {"result_format": "BOOLEAN_ONLY"})
        with self.lock:
            self.context()  # first: it imports GX the way import_gx() does
            batch = self._batch_definition.get_batch(batch_parameters={"dataframe": frame})
            with _configurations_built_once():
                return batch.validate(suite, result_format=result_format)


_RUNNER = _Runner()


@contextmanager
def _configurations_built_once() -> Iterator[None]:
    """Within one validation, build each expectation's configuration once instead of at every read.

    GX's ``Expectation.configuration`` is a property that rebuilds the configuration from the model (a
    pydantic ``dict()`` with deep copies) each time, and a validation reads it about 110 times per
    expectation: a third of the validation's CPU (0.47 -> 0.30 CPU-s for the example's 94 expectations,
    with the same results). Nothing changes an expectation while it is validated. The property is swapped
    on the class for the validation only, under the runner's lock, which every use of GX here holds: no
    other thread reads a configuration meanwhile.
    """
    from great_expectations.expectations.expectation import Expectation

    original = Expectation.__dict__["configuration"]
    built: dict[int, tuple[Any, Any]] = {}  # id -> (the expectation, kept alive so its id is not reused; its configuration)

    def configuration(expectation: Any) -> Any:
        kept = built.get(id(expectation))
        if kept is None or kept[0] is not expectation:
            kept = built[id(expectation)] = (expectation, original.fget(expectation))
        return kept[1]

    Expectation.configuration = property(configuration)
    try:
        yield
    finally:
        Expectation.configuration = original


def gx_context() -> Any:
    """The shared ephemeral GX context (created on first call)."""
    with _RUNNER.lock:
        return _RUNNER.context()


class GXReport(BaseModel):
    """Per-expectation results of validating rows with the schema's suite."""

    row_count: int = Field(description="Rows validated.")
    checks: list[CheckResult] = Field(description="One CheckResult per expectation, in suite order.")
    seconds: float = Field(description="Wall time of the validation (both passes).")

    @property
    def success(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]

    def feedback_text(self) -> str:
        """The failures as lines for the model: what the rule is and which values break it."""
        if self.success:
            return f"All {len(self.checks)} data checks passed on {self.row_count} rows."
        lines = [f"{len(self.failures)} data check(s) failed on {self.row_count} rows; fix these values "
                 "and keep every other rule:"]
        lines += [f"- {c.name}: {c.message}" for c in self.failures]
        return "\n".join(lines)


def _frames(rows: list[dict[str, Any]], schema: DataSchema) -> tuple[pd.DataFrame, pd.DataFrame]:
    import pandas as pd

    names = [f.name for f in schema.existing]
    if rows:
        raw = pd.DataFrame([dict(r) for r in rows], dtype=object)
    else:
        raw = pd.DataFrame({n: pd.Series([], dtype=object) for n in names})
    typed = raw.copy()
    for f in schema.existing:
        if f.name in typed.columns:
            typed[f.name] = pd.Series([v if _typed_ok(f, v) else None for v in raw[f.name]], dtype=object,
                                      index=raw.index)
    return raw, typed


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _exception_message(info: Any) -> str | None:
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message") or "unknown error")
    for value in info.values():
        found = _exception_message(value)
        if found:
            return found
    return None


def _to_check(name: str, rule: str, kwargs: dict[str, Any], result: Any, raw: pd.DataFrame,
              id_field: str | None) -> CheckResult:
    column = kwargs.get("column")
    details: dict[str, Any] = {"expectation": name.split(".")[2], "column": column or None,
                               "kwargs": {k: _json_safe(v) for k, v in kwargs.items()}}
    error = _exception_message(result.exception_info)
    if error:
        return check(name, False, f"{rule}: could not be checked: {one_line(error, 200)}", error=error, **details)
    res = result.result or {}
    if result.success:  # the rule alone would read like an instruction; say that it holds
        return check(name, True, f"{rule}: holds for all {len(raw)} rows", **details)
    if name.split(".")[2] == "expect_table_columns_to_match_set":
        mismatch = (res.get("details") or {}).get("mismatched") or {}
        details["mismatched"] = _json_safe(mismatch)
        missing, extra = mismatch.get("missing") or [], mismatch.get("unexpected") or []
        parts = ([f"missing {', '.join(map(str, missing))}"] if missing else []) + \
                ([f"unexpected {', '.join(map(str, extra))}"] if extra else [])
        return check(name, False, f"{rule}: {'; '.join(parts) or 'columns differ'}", **details)
    if name.split(".")[2] == "expect_column_to_exist":
        return check(name, False, f"{rule}: the column is missing from the rows", **details)
    values = res.get("partial_unexpected_list") or []
    indexes = res.get("partial_unexpected_index_list") or []
    offending = []
    for k, value in enumerate(values[:MAX_QUOTED]):
        index = indexes[k] if k < len(indexes) else None
        row = raw.loc[index].to_dict() if index is not None and index in raw.index else None
        shown = raw.at[index, column] if row is not None and column in raw.columns else value
        label = row_label(row, int(index), id_field) if index is not None else "row ?"
        offending.append({"row": label, "value": quote_value(None if _missing(shown) else shown)})
    count = res.get("unexpected_count", len(values))
    total = res.get("element_count", len(raw))
    quoted = "; ".join(f"{o['value']} ({o['row']})" for o in offending)
    more = f"; … {count - len(offending)} more" if count > len(offending) else ""
    message = f"{rule}; broken by {count} of {total} values: {quoted}{more}"
    return check(name, False, message, unexpected_count=count, element_count=total, offending=offending, **details)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def validate_rows(rows: list[dict[str, Any]], schema: DataSchema, *, pass_fail_first: bool = True) -> GXReport:
    """Validate rows with the schema's suite on a pandas DataFrame.

    Args:
        rows: Dataset rows (dicts keyed by existing field names).
        schema: The data schema the suite is built from.
        pass_fail_first: Ask GX for pass/fail first and for the offending values of the failed
            expectations only. False asks for every expectation's values in one pass: the same report
            at about twice the CPU when most pass (``benchmarks/gx_validation.py`` compares the two).

    Returns:
        A report with one CheckResult per expectation (``dataset.gx.<expectation>.<column>``,
        ``.table`` for the column-set check); failures quote up to five offending values with
        the row they come from.
    """
    start = time.perf_counter()
    id_field = find_id_field(schema)
    raw, typed = _frames(rows, schema)
    plan = {f"{CHECK_PREFIX}.{_snake(cls)}.{col}": (rule, kwargs) for _ph, cls, col, rule, kwargs in _plan(schema)}
    by_name: dict[str, CheckResult] = {}
    for phase, frame in ((RAW, raw), (TYPED, typed)):
        suite = build_suite(schema, phase=phase)
        if not suite.expectations:
            continue
        # Pass/fail costs GX half the CPU of a result that lists offending values (0.36-0.48 against
        # 0.90-0.96 CPU-s for the example's 50 rows), and most validations pass: the values are asked for
        # only for the expectations that failed.
        outcome = _RUNNER.validate(frame, suite, detailed=not pass_fail_first)
        results = {r.expectation_config.meta["check"]: r for r in outcome.results}
        failed = frozenset(name for name, r in results.items() if not r.success)
        if failed and pass_fail_first:
            detail = _RUNNER.validate(frame, build_suite(schema, phase=phase, checks=failed), detailed=True)
            results.update((r.expectation_config.meta["check"], r) for r in detail.results)
        for name, result in results.items():
            rule, kwargs = plan[name]
            by_name[name] = _to_check(name, rule, kwargs, result, raw, id_field)
    checks = [by_name[n] for n in plan if n in by_name]
    return GXReport(row_count=len(rows), checks=checks, seconds=round(time.perf_counter() - start, 4))
