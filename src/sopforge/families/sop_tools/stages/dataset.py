"""Stage 'dataset': context + schema + SOP → Dataset rows of existing fields (SOP-Bench C.3 + TELLER P5).

Rows are asked for in batches. Each batch is one ``ask_until_valid`` conversation whose answer
must parse (:meth:`DatasetBatch.parse`) and pass the schema's GX suite, the row checks
(conditional fields included) and the realism checks (identifiers no counter made, numbers with a
spread, declared correlations); a failure goes back to the model with the offending values quoted. Duplicates (an identifier
already used, or a row identical to one already kept) are dropped and counted, not re-asked.
Batches continue until ``n_rows`` unique rows exist or the batch budget is spent.

Pure: no Prefect, no store. The flow wraps :func:`run` in a task and persists the result.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from sopforge.errors import ValidationFailed
from sopforge.llm.types import LLMClient
from sopforge.parsing import ParseError
from sopforge.prompts import PromptRegistry, RenderedPrompt, default_registry
from sopforge.checks import CheckResult, apply_waivers, as_report, blocking_failures, check
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import (
    BatchRecord, Dataset, DatasetBatch, choice_coverage, find_id_field, row_key,
)
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.settings import Settings
from sopforge.ask import StageResult, ask_until_valid
from sopforge.families.sop_tools.verify import gx_suite
from sopforge.families.sop_tools.verify.dataset_checks import row_checks
from sopforge.families.sop_tools.verify.dataset_realism import realism_checks

__all__ = ["STAGE", "TEMPLATE_ID", "BATCH_BUDGET_FACTOR", "DatasetInputs", "existing_rows_hint", "run"]

STAGE = "dataset"
TEMPLATE_ID = "sop_bench/dataset"
# Batches allowed per batch needed: room for answers that are short or mostly duplicates.
BATCH_BUDGET_FACTOR = 3
FIRST_BATCH_HINT = "None yet: this is the first batch."


class DatasetInputs(BaseModel):
    """What the dataset stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (title, figures).")
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema; rows hold its existing fields.")
    sop: SOPDocument = Field(description="Accepted SOP whose decision points the rows must cover.")
    n_rows: int = Field(50, ge=1, description="Unique rows required (SOP-Bench's n_samples).")
    batch_size: int = Field(25, ge=1, description="Rows asked for per call.")
    max_batches: int | None = Field(None, ge=1, description=(
        "Batch budget; default ceil(n_rows / batch_size) * BATCH_BUDGET_FACTOR."))
    guidelines: str = Field("", description="Extra data requirements (sop_data_generation_guidelines); may be empty.")

    @property
    def batch_budget(self) -> int:
        return self.max_batches or math.ceil(self.n_rows / self.batch_size) * BATCH_BUDGET_FACTOR


def existing_rows_hint(rows: list[dict[str, Any]], schema: DataSchema, id_field: str | None) -> str:
    """Tell a later batch what exists: row count, identifiers used, value counts per choice field.

    Args:
        rows: Rows kept so far.
        schema: The data schema.
        id_field: The identifier field, or None.

    Returns:
        Plain text for the template's ``existing_rows_hint``.
    """
    if not rows:
        return FIRST_BATCH_HINT
    lines = [f"{len(rows)} rows exist already."]
    if id_field:
        lines.append(f"Identifiers already used (never reuse one): {', '.join(str(r[id_field]) for r in rows)}")
    coverage = choice_coverage(rows, schema)
    if coverage:
        lines.append("How often each value occurs so far (favour the rare ones the SOP's rules name, especially zeros):")
        lines += [f"- {name}: " + ", ".join(f"{value} {count}" for value, count in counts.items())
                  for name, counts in coverage.items()]
    return "\n".join(lines)


class _Outcome(BaseModel):
    """One accepted batch after de-duplication against the rows kept so far."""

    batch: DatasetBatch
    new_rows: list[dict[str, Any]]
    duplicate_ids: int
    duplicate_rows: int


def _dedupe(rows: list[dict[str, Any]], seen_ids: set[Any], seen_rows: set[str],
            id_field: str | None) -> tuple[list[dict[str, Any]], int, int]:
    new, dup_ids, dup_rows = [], 0, 0
    ids, keys = set(seen_ids), set(seen_rows)
    for row in rows:
        key = row_key(row)
        ident = row.get(id_field) if id_field else None
        hashable_id = isinstance(ident, (str, int)) and not isinstance(ident, bool)
        if key in keys:
            dup_rows += 1
        elif hashable_id and ident in ids:
            dup_ids += 1
        else:
            new.append(row)
            keys.add(key)
            if hashable_id:
                ids.add(ident)
    return new, dup_ids, dup_rows


def _fail(message: str, report: list[dict[str, Any]], raw_texts: list[str]) -> ValidationFailed:
    err = ValidationFailed(message, report=report)
    err.raw_texts = list(raw_texts)  # type: ignore[attr-defined]  # same convention as stages.base
    return err


def run(inputs: DatasetInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[Dataset]:
    """Generate at least ``n_rows`` unique, validated rows of the schema's existing fields.

    Args:
        inputs: Theme slug, accepted context, schema and SOP, row count and batch size.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget per batch, completion budget, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        feedback: Reviewer feedback on a rejected previous version; appended to every batch prompt.
        registry: Prompt registry; defaults to the project's ``prompts/``.

    Returns:
        The accepted Dataset. ``checks`` are the final checks over all rows; ``attempts`` and
        ``raw_texts`` cover every batch; ``prompt_hash`` is the first batch's prompt (the only
        one that depends on the inputs alone).

    Raises:
        ValidationFailed: A batch failed every attempt, the batch budget ran out before
            ``n_rows`` unique rows existed, or the final checks failed. ``raw_texts`` holds
            every answer so far.
    """
    registry = registry or default_registry(settings)
    ctx, schema, sop = inputs.context, inputs.data_schema, inputs.sop
    id_field = find_id_field(schema)
    static = {"sop_title": ctx.task.sop_title, "business_context": ctx.to_prompt_text(),
              "sample_schema": schema.to_prompt_text(), "sop_file_contents": sop.to_prompt_text(),
              "sop_data_generation_guidelines": inputs.guidelines}
    kept: list[dict[str, Any]] = []
    seen_ids: set[Any] = set()
    seen_rows: set[str] = set()
    records: list[BatchRecord] = []
    raw_texts: list[str] = []
    gx_seconds: list[float] = []
    first: RenderedPrompt | None = None
    budget = inputs.batch_budget

    while len(kept) < inputs.n_rows:
        number = len(records) + 1
        if number > budget:
            dropped = sum(r.duplicate_ids + r.duplicate_rows for r in records)
            message = (f"dataset: only {len(kept)} unique rows of the {inputs.n_rows} requested after {budget} batches "
                       f"(the budget); {dropped} duplicate rows were dropped. Raise max_batches, lower n_rows, or "
                       "give guidelines that widen the cases")
            raise _fail(message, [{"name": "dataset.row_count", "message": message, "severity": "error",
                                   "details": {"rows_kept": len(kept), "rows_requested": inputs.n_rows,
                                               "batches": budget, "duplicates_dropped": dropped}}], raw_texts)
        wanted = min(inputs.batch_size, inputs.n_rows - len(kept))
        rendered = registry.render(TEMPLATE_ID, **static, n_samples=wanted,
                                   existing_rows_hint=existing_rows_hint(kept, schema, id_field))
        first = first or rendered
        log: dict[str, Any] = {"parse_errors": 0, "gx_failures": [], "seconds": []}

        def parse_and_check(raw: str) -> tuple[_Outcome, list[CheckResult]]:
            try:
                batch = DatasetBatch.parse(raw, schema)
            except ParseError:
                log["parse_errors"] += 1
                raise
            new, dup_ids, dup_rows = _dedupe(batch.rows, seen_ids, seen_rows, id_field)
            report = gx_suite.validate_rows(new, schema)
            log["gx_failures"].append(len(report.failures))
            log["seconds"].append(report.seconds)
            # Realism is judged over every row kept so far, not this batch alone: a problem that only shows
            # once batches are merged is then re-asked here, at the batch that causes it (issue 19).
            checks = report.checks + row_checks(new, schema, id_field) + realism_checks(kept + new, schema, id_field, sop)
            return _Outcome(batch=batch, new_rows=new, duplicate_ids=dup_ids, duplicate_rows=dup_rows), checks

        try:
            result = ask_until_valid(llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                                     call_key_prefix=f"{inputs.theme_slug}/{STAGE}/batch{number}", settings=settings,
                                     model=model, temperature=temperature, feedback=feedback)
        except ValidationFailed as exc:
            raw_texts += getattr(exc, "raw_texts", [])
            raise _fail(f"dataset: batch {number}: {str(exc).removeprefix(STAGE + ': ')}", exc.report, raw_texts) from exc
        raw_texts += result.raw_texts
        gx_seconds += log["seconds"]
        outcome = result.artifact
        kept += outcome.new_rows
        seen_rows.update(row_key(r) for r in outcome.new_rows)
        if id_field:
            seen_ids.update(r[id_field] for r in outcome.new_rows)
        records.append(BatchRecord(
            batch=number, rows_requested=wanted, attempts=result.attempts, parse_errors=log["parse_errors"],
            gx_failures=log["gx_failures"], rows_returned=len(outcome.batch.rows), rows_kept=len(outcome.new_rows),
            duplicate_ids=outcome.duplicate_ids, duplicate_rows=outcome.duplicate_rows))

    dataset = Dataset(fields=[f.name for f in schema.existing], id_field=id_field, rows=kept,
                      rows_requested=inputs.n_rows,
                      duplicates_dropped=sum(r.duplicate_ids + r.duplicate_rows for r in records),
                      batches=records, gx_suite=gx_suite.suite_json(schema))
    checks = apply_waivers(final_checks(dataset, schema, sop, gx_seconds=gx_seconds), settings.waivers)
    failed = blocking_failures(checks)
    if failed:
        # Every final check also runs inside the batch asks (row checks per batch, realism over all rows so
        # far), so this is a safety net: a failure here means a check the batches cannot see was added.
        names = ", ".join(c.name for c in failed)
        raise _fail(f"dataset: final checks {names} failed: " + "; ".join(c.message for c in failed),
                    as_report(failed), raw_texts)
    assert first is not None  # n_rows >= 1, so at least one batch ran
    return StageResult[Dataset](
        artifact=dataset, checks=checks, template_id=first.template_id, template_hash=first.template_hash,
        prompt_hash=first.prompt_hash, model=model, attempts=sum(r.attempts for r in records), raw_texts=raw_texts)


def final_checks(dataset: Dataset, schema: DataSchema, sop: SOPDocument | None = None, *,
                 gx_seconds: list[float] | None = None) -> list[CheckResult]:
    """Checks over the whole dataset before the tools stage runs (DESIGN, chain row 'dataset').

    Args:
        dataset: All kept rows with their batch records.
        schema: The data schema.
        sop: The SOP (its numeric thresholds decide whether a flat field is an error).
        gx_seconds: Wall time of each batch-level GX validation, reported in the details.

    Returns:
        The GX suite over all rows, the row checks, ``dataset.row_count``,
        ``dataset.no_duplicates`` and the ``dataset.choice_coverage`` warning.
    """
    start = time.perf_counter()
    report = gx_suite.validate_rows(dataset.rows, schema)
    checks = (report.checks + row_checks(dataset.rows, schema, dataset.id_field)
              + realism_checks(dataset.rows, schema, dataset.id_field, sop))
    counts = dataset.counts
    enough = dataset.row_count >= dataset.rows_requested
    checks.append(check(
        "dataset.row_count", enough,
        f"{dataset.row_count} unique rows kept of {dataset.rows_requested} requested "
        f"({dataset.duplicates_dropped} duplicates dropped over {len(dataset.batches)} batches)",
        **counts, batches_detail=[b.model_dump() for b in dataset.batches],
        gx_failures_per_batch=[b.gx_failures for b in dataset.batches],
        gx_seconds_per_batch=gx_seconds or [], gx_seconds_final=round(time.perf_counter() - start, 4)))
    ids = dataset.ids
    repeated_ids = sorted({str(i) for i in ids if ids.count(i) > 1})
    keys = [row_key(r) for r in dataset.rows]
    repeated_rows = len(keys) - len(set(keys))
    checks.append(check(
        "dataset.no_duplicates", not repeated_ids and not repeated_rows,
        f"duplicates left in the dataset: ids {', '.join(repeated_ids) or 'none'}; {repeated_rows} identical rows"
        if repeated_ids or repeated_rows else "no repeated identifiers or rows",
        repeated_ids=repeated_ids, repeated_rows=repeated_rows))
    missing = [f"{name}={value}" for name, counts_ in choice_coverage(dataset.rows, schema).items()
               for value, n in counts_.items() if n == 0]
    checks.append(check(
        "dataset.choice_coverage", not missing,
        f"values of existing choice/boolean fields no row uses: {', '.join(missing)}"
        if missing else "every choice and boolean value occurs in some row", severity="warning", missing=missing))
    return checks
