"""Speed of ``sopforge audit`` on a published-style folder of 200 rows (issue 26).

Builds a 200-row copy of tests/fixtures/published/package_inspection (its tools re-read the CSV
with pandas on every call, as published domains do), audits it in the sandbox, and prints the
seconds per phase against a bound, and the orchestration modules the audit imported (none).

    .venv/bin/python benchmarks/audit_published.py
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLEAN = ROOT / "tests" / "fixtures" / "published" / "package_inspection"
ROWS = 200
BOUND_SECONDS = 10.0


def build(folder: Path) -> None:
    shutil.copytree(CLEAN, folder)
    path = folder / "test_set_with_outputs.csv"
    rows = list(csv.DictReader(path.open()))
    out = []
    for i in range(ROWS):
        row = dict(rows[i % len(rows)])
        row["po_number"] = f"PO-{2001 + i}"
        out.append(row)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(out[0]))
        writer.writeheader()
        writer.writerows(out)


def main() -> None:
    probe = ("import sys; from sopforge.audit import audit_folder; "
             "print(sorted({m.split('.')[0] if not m.startswith('sopforge') else '.'.join(m.split('.')[:2]) "
             "for m in sys.modules if m.startswith(('prefect', 'sopforge.orchestration', 'sopforge.store', "
             "'duckdb', 'anthropic', 'openai'))}))")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"orchestration, store and SDK modules imported by the audit: {imported}")
    from sopforge.audit import audit_folder

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "package_inspection"
        build(folder)
        started = time.perf_counter()
        report = audit_folder(folder)
        seconds = time.perf_counter() - started
    calls = report.get("runtime.calls_succeed")
    print(f"{ROWS} rows, 4 tools: {seconds:.2f} s (bound {BOUND_SECONDS:.0f} s, ratio {seconds / BOUND_SECONDS:.2f}); "
          f"verdict {'PASSED' if report.ok else 'FAILED'}; {calls.message if calls else ''}")
    print("phases:", {k: v for k, v in report.timings.items()})


if __name__ == "__main__":
    main()
