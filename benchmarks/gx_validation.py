"""What GX validation of dataset rows costs when pass/fail comes first and offending values are asked for
only where an expectation failed, against one pass that asks for every expectation's values; one run.

The rows are the example's two recorded dataset batches (tests/fixtures/answers), validated whole, as
the dataset stage's final check does, and once more with three values broken, so that the second pass
runs too. Each case alternates the two ways N times in this process (GX is imported and warmed up
first), prints the median CPU seconds of each and the ratio, and says whether the two reports agree
check for check (name, verdict and message).

    .venv/bin/python benchmarks/gx_validation.py [N]      # default 5
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sopforge.families.sop_tools.models.data_schema import DataSchema  # noqa: E402
from sopforge.families.sop_tools.models.dataset import DatasetBatch  # noqa: E402
from sopforge.families.sop_tools.verify.gx_suite import validate_rows  # noqa: E402

ANSWERS = ROOT / "tests" / "fixtures" / "answers"


def example_rows() -> tuple[DataSchema, list[dict]]:
    schema = DataSchema.parse((ANSWERS / "schema.txt").read_text())
    rows = [row for n in (1, 2) for row in
            DatasetBatch.parse((ANSWERS / f"dataset_batch{n}.txt").read_text(), schema).rows]
    return schema, rows


def broken(rows: list[dict], schema: DataSchema) -> list[dict]:
    """Three values the suite rejects: a missing required field, a wrong type and a repeated identifier."""
    rows = copy.deepcopy(rows)
    names = [f.name for f in schema.existing]
    rows[0][names[1]] = None
    rows[1][names[2]] = {"not": "a scalar"}
    rows[2][names[0]] = rows[3][names[0]]
    return rows


def cpu_of(rows: list[dict], schema: DataSchema, pass_fail_first: bool) -> tuple[float, list[tuple]]:
    start = time.process_time()
    report = validate_rows(rows, schema, pass_fail_first=pass_fail_first)
    return time.process_time() - start, [(c.name, c.passed, c.message) for c in report.checks]


def main(n: int) -> None:
    schema, rows = example_rows()
    validate_rows(rows[:3], schema)  # imports GX and creates its context outside the measurement
    for label, case in (("example rows", rows), ("three values broken", broken(rows, schema))):
        cpu: dict[bool, list[float]] = {True: [], False: []}
        reports: dict[bool, list[tuple]] = {}
        for _ in range(n):
            for way in (False, True):
                seconds, reports[way] = cpu_of(case, schema, way)
                cpu[way].append(seconds)
        failed = sum(not passed for _, passed, _ in reports[True])
        print(f"{label} ({len(case)} rows, {len(reports[True])} expectations, {failed} failed):")
        print(f"  one detailed pass      median {statistics.median(cpu[False]):.3f} CPU-s  min {min(cpu[False]):.3f}")
        print(f"  pass/fail, then detail median {statistics.median(cpu[True]):.3f} CPU-s  min {min(cpu[True]):.3f}")
        print(f"  ratio {statistics.median(cpu[True]) / statistics.median(cpu[False]):.2f}"
              f"  same report: {reports[True] == reports[False]}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
