"""Dataset: the case rows an agent will process, existing fields only (SOP-Bench C.3 + TELLER P5).

The model answers with ``<data>[{"field": value, ...}, ...]</data>``, a Python literal read
with ``ast.literal_eval`` (format: ``docs/formats.md``). Rows carry the schema's existing
fields and nothing else: the to-be-obtained fields are computed later by executing the
reference procedure over the tools, never written by the dataset model (DESIGN, "The chain").

Structural problems (no list, a truncated list, a row that is not a dict, missing or extra
keys) are parse errors; problems with values are checks: the Great Expectations suite in
``sopforge.families.sop_tools.verify.gx_suite`` covers types, choices, ranges, formats and uniqueness, and
:func:`~sopforge.families.sop_tools.verify.dataset_checks.row_checks` covers what GX cannot see (Python's ``bool`` is an ``int``, list items).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, extract_literal, extract_tag, one_line, strip_code_fence
from sopforge.families.sop_tools.models.data_schema import DataSchema, FieldSpec
from sopforge.labels import NA_TOKENS

__all__ = [
    "MAX_QUOTED",
    "DatasetBatch",
    "BatchRecord",
    "Dataset",
    "find_id_field",
    "no_identifier_message",
    "row_key",
    "row_label",
    "quote_value",
    "choice_coverage",
]

# Offending values quoted per check: enough to show the pattern, short enough for a re-ask.
MAX_QUOTED = 5
LIST_ITEM_TYPES = {"list[string]": "string", "list[integer]": "integer", "list[float]": "float"}


class DatasetBatch(BaseModel):
    """The rows of one model answer, structurally valid (keys are exactly the existing fields)."""

    rows: list[dict[str, Any]] = Field(description="Rows in the order written; keys in schema order.")

    @classmethod
    def parse(cls, raw_text: str, schema: DataSchema) -> DatasetBatch:
        """Parse the ``<data>`` block of a model answer into rows of existing fields.

        Integers written in a ``float`` field are converted to floats (``5`` → ``5.0``), the one
        repair with a single reading; booleans are left alone so the checks can report them.

        Args:
            raw_text: The model's full answer.
            schema: The accepted data schema; its existing fields are the only allowed keys.

        Returns:
            The parsed batch; value checks are :func:`row_checks` and the GX suite.

        Raises:
            ParseError: ``<data>`` is missing or unclosed, the list is truncated or not a
                literal, it is empty, a row is not a dict, or a row misses or adds keys.
        """
        try:
            body = strip_code_fence(extract_tag(raw_text, "data"))
        except ParseError as exc:
            if "<data>" in raw_text and "</data>" not in raw_text:
                raise ParseError("unclosed <data> block: the answer stops before </data>, so the list is "
                                 "truncated; write fewer or shorter rows and close the list and the tag") from exc
            raise
        value = _literal(body)
        if isinstance(value, tuple):
            value = list(value)  # rows written without the enclosing brackets: one sensible reading
        if not isinstance(value, list):
            raise ParseError(f"<data> must hold a Python list of dicts [{{...}}, {{...}}], got a {type(value).__name__}")
        if not value:
            raise ParseError("<data> holds an empty list; write the requested rows")
        if any(v is Ellipsis for v in value):
            raise ParseError("<data> contains a '...' placeholder; write every row in full, with no ellipses")
        not_dicts = [f"row {i} is a {type(r).__name__}" for i, r in enumerate(value, 1) if not isinstance(r, dict)]
        if not_dicts:
            raise ParseError(f"every row must be a dict {{\"field\": value, ...}}: {', '.join(not_dicts[:MAX_QUOTED])}")
        names = [f.name for f in schema.existing]
        _check_keys(value, names, schema)
        floats = {f.name for f in schema.existing if f.type == "float"}
        rows = []
        for row in value:
            rows.append({n: float(row[n]) if n in floats and type(row[n]) is int else row[n] for n in names})
        return cls(rows=rows)


def _literal(body: str) -> Any:
    try:
        return extract_literal(body)
    except ParseError as exc:
        cause = exc.__cause__
        message = str(cause) if isinstance(cause, SyntaxError) else ""
        stripped = body.rstrip()
        closed = stripped.endswith(("]", ")", "}"))
        if stripped.startswith(("[", "(", "{")) and (not closed or "was never closed" in message):
            raise ParseError(f"the list in <data> is truncated or unclosed (it ends with {one_line(stripped[-60:])!r}); "
                             "finish every row and close every string, brace and bracket") from exc
        if "unterminated string" in message:
            line = getattr(cause, "lineno", None)
            raise ParseError(f"a string in <data> is not closed (line {line}): keep every string on one line "
                             "and close its quotes") from exc
        raise


def _check_keys(rows: list[dict[str, Any]], names: list[str], schema: DataSchema) -> None:
    allowed = set(names)
    obtained = {f.name for f in schema.to_be_obtained}
    problems = []
    for i, row in enumerate(rows, 1):
        bad_keys = [repr(k) for k in row if not isinstance(k, str)]
        missing = [n for n in names if n not in row]
        extra = [k for k in row if isinstance(k, str) and k not in allowed]
        parts = []
        if bad_keys:
            parts.append(f"non-string keys {', '.join(bad_keys)}")
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            later = [k for k in extra if k in obtained]
            other = [k for k in extra if k not in obtained]
            if later:
                parts.append(f"to-be-obtained {', '.join(later)} (computed later; leave out)")
            if other:
                parts.append(f"unknown {', '.join(other)}")
        if parts:
            problems.append(f"row {i}: {'; '.join(parts)}")
    if problems:
        shown = " | ".join(problems[:MAX_QUOTED]) + (f" | … {len(problems) - MAX_QUOTED} more rows" if len(problems) > MAX_QUOTED else "")
        raise ParseError(f"every row must have exactly the existing fields ({', '.join(names)}) as keys: {shown}")


class BatchRecord(BaseModel):
    """How one batch of rows was obtained; kept with the dataset as provenance."""

    batch: int = Field(description="Batch number, from 1; the call key is '<slug>/dataset/batch<N>/a<attempt>'.")
    rows_requested: int = Field(description="Rows the prompt asked for (n_samples of this batch).")
    attempts: int = Field(description="Attempts used; 1 when the first answer was accepted.")
    parse_errors: int = Field(0, description="Attempts whose answer could not be parsed.")
    gx_failures: list[int] = Field(default_factory=list,
                                   description="Failed GX checks of each attempt that parsed, in order.")
    rows_returned: int = Field(description="Rows in the accepted answer.")
    rows_kept: int = Field(description="Rows added to the dataset (new identifiers, new rows).")
    duplicate_ids: int = Field(0, description="Rows dropped because their identifier was already used.")
    duplicate_rows: int = Field(0, description="Rows dropped because an identical row was already kept.")


class Dataset(BaseModel):
    """The accepted case rows (existing fields only) with how they were generated."""

    fields: list[str] = Field(description="Column order: the schema's existing fields.")
    id_field: str | None = Field(description="Field that identifies a row (unique); None when the schema has none.")
    rows: list[dict[str, Any]] = Field(description="Rows in generation order; keys are exactly `fields`.")
    rows_requested: int = Field(description="Rows the stage was asked for (n_rows); len(rows) is at least this.")
    duplicates_dropped: int = Field(0, description="Rows dropped as duplicates across all batches.")
    batches: list[BatchRecord] = Field(default_factory=list, description="One record per batch, in order.")
    gx_suite: dict[str, Any] = Field(default_factory=dict,
                                     description="The Great Expectations suite (JSON) the rows were validated with.")

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def ids(self) -> list[Any]:
        """Identifier of every row, in order (empty when there is no id field)."""
        return [r.get(self.id_field) for r in self.rows] if self.id_field else []

    @property
    def counts(self) -> dict[str, int]:
        """Headline numbers for reports: rows kept and requested, duplicates, batches, attempts."""
        return {"rows": len(self.rows), "rows_requested": self.rows_requested,
                "duplicates_dropped": self.duplicates_dropped, "batches": len(self.batches),
                "attempts": sum(b.attempts for b in self.batches)}

    def keyed_by(self, schema: DataSchema) -> Dataset:
        """This dataset with its identifier field, found again in the schema when the stored one is None.

        A dataset stored by older code carries ``id_field: null`` although today's :func:`find_id_field`
        accepts the schema's identifier (the insurance trial's ``claim_number``); the field is taken
        only when every row holds a distinct value of it, since those rows were never de-duplicated by it.

        Returns:
            ``self`` when the stored field is set or no field qualifies; otherwise a copy naming it.
        """
        if self.id_field:
            return self
        found = find_id_field(schema)
        values = [r.get(found) for r in self.rows] if found else []
        if not values or any(v is None for v in values) or len({str(v) for v in values}) != len(values):
            return self
        return self.model_copy(update={"id_field": found})

    def to_prompt_text(self, max_rows: int | None = None) -> str:
        """Rows as the Python literal later templates read (``sample_data``), one row per line.

        Args:
            max_rows: Keep only the first rows; None keeps all.
        """
        rows = self.rows if max_rows is None else self.rows[:max_rows]
        return "[\n" + ",\n".join(repr(r) for r in rows) + "\n]"


# How real records name their key: refill_request_id, claim_number, case_no, file_ref, entry_code.
ID_SUFFIXES = ("_id", "_number", "_no", "_ref", "_reference", "_code")


def find_id_field(schema: DataSchema) -> str | None:
    """The existing field that identifies a row.

    A string or integer field named ``id`` or ``*_id``/``*_number``/``*_no``/``*_ref``/``*_code``, or
    described as an identifier; one described as unique first, then an ``*_id`` name, then schema order.
    (Only ``*_id`` names once counted: the insurance trial's ``claim_number``, "unique claim identifier",
    was no identifier and its tools stage stopped with no way back.)

    Args:
        schema: The data schema.

    Returns:
        The field name, or None when no existing string/integer field looks like an identifier.
    """
    ids = [f for f in schema.existing if f.type in ("string", "integer") and (
        f.name == "id" or f.name.endswith(ID_SUFFIXES) or "identifier" in f.description.lower())]

    def rank(f: FieldSpec) -> tuple[bool, bool]:
        return "unique" not in f.description.lower(), not (f.name == "id" or f.name.endswith("_id"))

    return min(ids, key=rank).name if ids else None


def no_identifier_message(stage: str, schema: DataSchema, why: str) -> str:
    """The one-line way out when a stage needs the rows' identifier and the dataset has none.

    Regenerating the schema helps only when the schema really has no identifier field; when it has
    one, the stored rows repeat or lack its values and the dataset is what to sample again.
    """
    found = find_id_field(schema)
    if found:
        return (f"{stage}: the dataset's rows do not hold a distinct {found} each, and {why}: "
                "sample the rows again (rerun --from dataset)")
    return (f"{stage}: the dataset has no identifier field (see schema.unique_id_present), and {why}: "
            "regenerate the schema with a unique identifier field (rerun --from schema)")


def row_key(row: dict[str, Any]) -> str:
    """Identity of a whole row, for de-duplication (key order and int/float spelling ignored)."""
    return json.dumps(row, sort_keys=True, default=repr, ensure_ascii=False)


def quote_value(value: Any) -> str:
    """A value as the model wrote it (Python literal, spaces kept), shortened for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def row_label(row: dict[str, Any] | None, index: int, id_field: str | None) -> str:
    """How a message names a row: by its identifier when it has one, else by its 1-based position."""
    if row is not None and id_field and isinstance(row.get(id_field), (str, int)) and not isinstance(row.get(id_field), bool):
        return f"{id_field}={row[id_field]!r}"
    return f"row {index + 1}"


def number_problem(value: Any) -> str | None:
    if isinstance(value, bool):
        return "a boolean, not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    return None


def item_problem(item: Any, kind: str) -> str | None:
    if kind == "string":
        if not isinstance(item, str):
            return f"a {type(item).__name__}, not a string"
        if item.strip().lower() in NA_TOKENS:
            return "blank or a missing-value token"
        return None
    if isinstance(item, bool) or not isinstance(item, (int, float)):
        return f"a {type(item).__name__}, not a number"
    if kind == "integer" and not isinstance(item, int):
        return "not an integer"
    return number_problem(item)


def offenders(rows: list[dict[str, Any]], fields: list[FieldSpec], id_field: str | None, problem) -> list[dict[str, Any]]:
    found = []
    for i, row in enumerate(rows):
        for f in fields:
            if f.name not in row:
                continue
            why = problem(f, row[f.name])
            if why:
                found.append({"row": row_label(row, i, id_field), "field": f.name,
                              "value": quote_value(row[f.name]), "problem": why})
    return found






def choice_coverage(rows: list[dict[str, Any]], schema: DataSchema) -> dict[str, dict[str, int]]:
    """How often each allowed value of each existing choice/boolean field occurs.

    Args:
        rows: Parsed rows.
        schema: The data schema.

    Returns:
        ``{field: {value: count}}`` with every allowed value listed, zero counts included
        (booleans as ``"True"``/``"False"``).
    """
    coverage: dict[str, dict[str, int]] = {}
    for f in schema.existing:
        if f.type == "boolean":
            counts = {"True": 0, "False": 0}
            for r in rows:
                if isinstance(r.get(f.name), bool):
                    counts[str(r[f.name])] += 1
        elif f.choices:
            counts = dict.fromkeys(f.choices, 0)
            for r in rows:
                if r.get(f.name) in counts:
                    counts[r[f.name]] += 1
        else:
            continue
        coverage[f.name] = counts
    return coverage
