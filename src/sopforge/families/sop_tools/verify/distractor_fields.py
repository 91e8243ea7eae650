"""Verify distractor data fields by perturbation (issue 5; SOP-Bench §3.3.2 data-level distractors).

A distractor field looks relevant but drives no decision. SOP-Bench adds such columns by hand and
never checks them; here a candidate is **verified**: its values are moved between rows (a seeded
rotation, so every row receives another row's value) and the reference procedure is executed
again in the sandbox. The field is a distractor only if every task keeps its expected outputs,
its expected tool sequence and its expected final state, and no row becomes unusable. A field whose values are all equal
cannot be tested this way and is reported as unverified rather than passed.

:func:`verify_field_candidates` runs the distractors stage's proposals through the same test:
new columns (values drawn from the model's pool, :func:`sopforge.families.sop_tools.models.distractors.assign_values`)
are added to the rows and to an extended schema first, so a new column is perturbed exactly like
an existing one.
"""

from __future__ import annotations

import datetime
import random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sopforge.families.sop_tools.export.cells import table_problems
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema, FieldSpec
from sopforge.families.sop_tools.models.distractors import DistractorField, assign_values
from sopforge.families.sop_tools.models.ground_truth import GroundTruth
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import (
    CSV_FILE, PROCEDURE_FILE, TOOLS_FILE, TOOLSPECS_FILE, input_columns, write_rows_csv,
)
from sopforge.sandbox import SandboxLimits
from sopforge.sandbox.staging import read_regular_file

__all__ = ["FIELD_TYPES", "FieldVerdict", "extended_schema", "verify_distractor_fields", "verify_field_candidates"]

# Types a new distractor column may have, with the Python values its pool must hold.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "enum": (str,), "date": (str,), "datetime": (str,), "integer": (int,),
    "float": (int, float), "boolean": (bool,),
}
_SNAKE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


@dataclass
class FieldVerdict:
    """What perturbing one candidate field did to the ground truth."""

    field: str
    verified: bool
    reason: str
    changed_tasks: list[str] = field(default_factory=list)
    newly_excluded: list[str] = field(default_factory=list)


def _rotated(rows: list[dict[str, Any]], name: str, seed: int) -> list[dict[str, Any]]:
    """Rows where ``name`` holds the value of the row ``k`` places further on (1 <= k < n)."""
    k = random.Random(f"{seed}:{name}").randrange(1, len(rows))
    values = [row.get(name) for row in rows]
    return [{**row, name: values[(i + k) % len(rows)]} for i, row in enumerate(rows)]


def _signature(gt: GroundTruth) -> dict[str, tuple]:
    return {t.task_id: (t.expected_outputs, [c.tool for c in t.expected_calls], t.expected_state) for t in gt.tasks}


def _candidate_problem(name: str, schema: DataSchema, inputs: list[str]) -> str | None:
    spec = next((f for f in schema.fields if f.name == name), None)
    if spec is None:
        return f"{name} is not a field of the schema"
    if spec.role != "existing":
        return f"{name} is computed by the procedure ({spec.role}), not data the agent is given"
    if name in inputs:
        return f"{name} is an input column: moving it changes which case a task is"
    return None


def verify_distractor_fields(bundle_folder: Path, schema: DataSchema, api_graph: APIGraph, rows: list[dict[str, Any]],
                             candidates: list[str], *, baseline: GroundTruth, seed: int = 0,
                             limits: SandboxLimits | None = None) -> list[FieldVerdict]:
    """Perturb each candidate field in turn and compare the recomputed ground truth to ``baseline``.

    Args:
        bundle_folder: Folder with tools.py, toolspecs.json and reference_procedure.py.
        schema: The data schema (the candidates must be existing, non-input fields).
        api_graph: The API graph (input columns).
        rows: The dataset rows ``baseline`` was computed from, in order.
        candidates: Field names proposed as distractors.
        baseline: Ground truth of the unperturbed rows.
        seed: Seed of the rotations (recorded with the verdicts so they can be reproduced).
        limits: Sandbox limits of each re-run.

    Returns:
        One verdict per candidate, in order.
    """
    inputs = input_columns(schema, api_graph)
    expected = _signature(baseline)
    excluded_before = {e.row_id for e in baseline.excluded}
    verdicts: list[FieldVerdict] = []
    with tempfile.TemporaryDirectory(prefix="sopforge-distractor-") as tmp:
        for name in candidates:
            problem = _candidate_problem(name, schema, inputs)
            if problem is None and len({str(r.get(name)) for r in rows}) < 2:
                problem = f"every row holds the same {name}, so moving it between rows proves nothing"
            if problem is not None:
                verdicts.append(FieldVerdict(name, False, problem))
                continue
            folder = Path(tmp) / name
            folder.mkdir()
            for part in (TOOLS_FILE, TOOLSPECS_FILE, PROCEDURE_FILE):  # as data: regular files, no links
                (folder / part).write_bytes(read_regular_file(Path(bundle_folder) / part))
            perturbed = _rotated(rows, name, seed)
            write_rows_csv(folder / CSV_FILE, perturbed, schema)
            gt, _ = compute_ground_truth(folder, schema, api_graph, perturbed, limits=limits, check_determinism=False)
            got = _signature(gt)
            changed = sorted(t for t, sig in expected.items() if t in got and got[t] != sig)
            newly_excluded = sorted({e.row_id for e in gt.excluded} - excluded_before)
            if changed or newly_excluded:
                reason = (f"moving {name} between rows changed the answer of {len(changed)} task(s)"
                          + (f" and made {len(newly_excluded)} row(s) unusable" if newly_excluded else "")
                          + f" (e.g. {(changed or newly_excluded)[0]}): it drives a decision, so it is not a distractor")
                verdicts.append(FieldVerdict(name, False, reason, changed, newly_excluded))
            else:
                verdicts.append(FieldVerdict(name, True, f"moving {name} between rows left all {len(got)} answers unchanged"))
    return verdicts


# --------------------------------------------------------------------------------------- stage proposals

def _pool_problem(f: DistractorField, schema: DataSchema | None = None) -> str | None:
    if f.depends_on is not None and schema is not None:
        other = next((x for x in schema.existing if x.name == f.depends_on), None)
        if other is None or not other.labels() or other.present_if is not None:
            return (f"depends_on names {f.depends_on!r}, which is not an existing enum or boolean field with a value "
                    "on every row")
        missing = [label for label in other.labels() if label not in f.pools]
        if missing:
            return (f"values_by has no values for {f.depends_on}={', '.join(missing)}: such rows would get a value "
                    f"drawn for another {f.depends_on}")
    wanted = FIELD_TYPES.get(f.type)
    if wanted is None:
        return f"type {f.type!r} is not one of {', '.join(FIELD_TYPES)}"
    bad = [v for v in f.pool if not isinstance(v, wanted) or (isinstance(v, bool) and bool not in wanted)]
    if bad:
        return f"value {bad[0]!r} is not a {f.type}"
    if f.type == "date":
        try:
            for v in f.pool:
                datetime.date.fromisoformat(v)
        except ValueError:
            return f"value {v!r} is not an ISO date YYYY-MM-DD"
    if len({str(v) for v in f.pool}) < 2:
        return "it needs at least two different values, or moving it between rows proves nothing"
    misread = table_problems([{f.name: v} for v in f.pool], [f.name])
    if misread:  # the export would refuse the column: drop it here, with the reason
        return f"the exported CSV would not keep its values: {misread[0]}"
    return None


def _new_field_spec(f: DistractorField) -> FieldSpec:
    distinct = list(dict.fromkeys(str(v) for v in f.pool))
    return FieldSpec(name=f.name, type=f.type, description=f.description or "distractor column",
                     example=repr(f.pool[0]) if isinstance(f.pool[0], str) else str(f.pool[0]),
                     choices=distinct if f.type == "enum" else None, role="existing", decision=False)


def extended_schema(schema: DataSchema, fields: list[DistractorField]) -> DataSchema:
    """``schema`` with one existing, non-decision field per new distractor column appended."""
    added = [_new_field_spec(f) for f in fields if f.origin == "new"]
    return schema.model_copy(update={"fields": [*schema.fields, *added]})


def verify_field_candidates(fields: list[DistractorField], *, bundle_folder: Path, schema: DataSchema,
                            api_graph: APIGraph, rows: list[dict[str, Any]], id_field: str, baseline: GroundTruth,
                            seed: int = 0, limits: SandboxLimits | None = None) -> list[DistractorField]:
    """Decide every proposed field: static problems first, then perturbation of the survivors.

    Args:
        fields: Parsed proposals, in answer order (new ones carry their value pool).
        bundle_folder: Folder with the base tools.py, toolspecs.json and reference_procedure.py.
        schema, api_graph, rows, baseline: As for :func:`verify_distractor_fields`.
        id_field: Field whose value keys a new column's values.
        seed: Seed of the value assignment and of the rotations.
        limits: Sandbox limits of each re-run.

    Returns:
        The same fields with ``values`` (new ones), ``kept``, ``reason`` and ``changed_tasks`` set.
    """
    taken = {n.lower() for n in schema.names}
    seen: set[str] = set()
    testable: list[DistractorField] = []
    row_ids = [str(row.get(id_field)) for row in rows]
    for f in fields:
        if f.name.lower() in seen:
            f.kept, f.reason = False, "another proposed field already has this name"
        elif f.origin == "new" and not _SNAKE.match(f.name):
            f.kept, f.reason = False, f"{f.name!r} is not a snake_case column name"
        elif f.origin == "new" and f.name.lower() in taken:
            f.kept, f.reason = False, f"{f.name} collides with a field of the schema"
        elif f.origin == "new" and (problem := _pool_problem(f, schema)) is not None:
            f.kept, f.reason = False, problem
        else:
            if f.origin == "new":
                conditions = [row.get(f.depends_on) for row in rows] if f.depends_on else None
                f.values = assign_values(f, row_ids, seed, conditions)
            elif f.name in schema.names:
                f.type = schema.field(f.name).type
            testable.append(f)
        seen.add(f.name.lower())
    if not testable:
        return fields
    wide = extended_schema(schema, testable)
    added = [f for f in testable if f.origin == "new"]
    wide_rows = [{**row, **{f.name: f.values[rid] for f in added}} for row, rid in zip(rows, row_ids, strict=True)]
    verdicts = verify_distractor_fields(bundle_folder, wide, api_graph, wide_rows, [f.name for f in testable],
                                        baseline=baseline, seed=seed, limits=limits)
    for f, verdict in zip(testable, verdicts, strict=True):
        f.kept, f.reason, f.changed_tasks = verdict.verified, verdict.reason, verdict.changed_tasks
    return fields
