"""What importing Great Expectations costs a command that validates a dataset, with and without what
``gx_import.import_gx`` leaves out (scipy.stats and altair deferred, sqlalchemy hidden), measured in one run.

Each run is a fresh interpreter that imports GX, creates the ephemeral context and validates the example
dataset's first batch, either with a plain ``import great_expectations`` first (the baseline) or
through ``gx_import.import_gx`` only. The two alternate N times so drift hits both alike. It prints the median
CPU seconds (user + system) of each and the ratio sopforge / plain, and checks that both validations
agree. No assertions beyond that: run it and read the figures.

    .venv/bin/python benchmarks/gx_import.py [N]      # default 5
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "tests" / "fixtures" / "answers"
SCRIPT = f"""
import resource, sys
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
if sys.argv[1] == "plain":
    import great_expectations
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.verify.gx_suite import validate_rows
schema = DataSchema.parse(open({str(ANSWERS / "schema.txt")!r}).read())
rows = DatasetBatch.parse(open({str(ANSWERS / "dataset_batch1.txt")!r}).read(), schema).rows
report = validate_rows(rows, schema)
print(cpu(), sum(c.passed for c in report.checks), len(report.checks), "altair.vegalite" in sys.modules,
      "sqlalchemy.engine" in sys.modules)
"""


def one(mode: str) -> tuple[float, str]:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "GX_ANALYTICS_ENABLED": "false"}, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"{mode}: failed:\n{proc.stderr[-2000:]}")
    seconds, *verdict = proc.stdout.split()
    return float(seconds), " ".join(verdict)


def main(n: int) -> None:
    cpu: dict[str, list[float]] = {"plain": [], "sopforge": []}
    verdicts: dict[str, set[str]] = {"plain": set(), "sopforge": set()}
    for _ in range(n):
        for mode in cpu:
            seconds, verdict = one(mode)
            cpu[mode].append(seconds)
            verdicts[mode].add(verdict)
    for mode, values in cpu.items():
        print(f"{mode:9} median {statistics.median(values):5.2f} CPU-s  min {min(values):5.2f}  "
              f"(checks passed/total, altair loaded, sqlalchemy loaded: {' | '.join(sorted(verdicts[mode]))})")
    plain = [v.split()[:2] for v in verdicts["plain"]]
    same = plain == [v.split()[:2] for v in verdicts["sopforge"]]
    print(f"ratio sopforge / plain: median {statistics.median(cpu['sopforge']) / statistics.median(cpu['plain']):.2f}"
          f"  min {min(cpu['sopforge']) / min(cpu['plain']):.2f}  same checks: {same}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
