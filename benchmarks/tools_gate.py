"""Throughput and memory of the tools gate on a 10,000-row synthetic domain.

Run from the repository root::

    .venv/bin/python benchmarks/tools_gate.py              # 10,000 rows
    .venv/bin/python benchmarks/tools_gate.py --rows 2000  # smaller
    .venv/bin/python benchmarks/tools_gate.py --keep /tmp/gate   # keep the generated folder

It scales the loan_triage example of ``research/sopbench_format.md`` §7 to N rows (ids
``A-00001`` …, three look-up tools over the CSV, a reference procedure implementing the SOP's
rule), exports it with ``write_sopbench_folder(audit=False)`` and then times, separately:

1. spec validation: every row's arguments against every tool's inputSchema (in process);
2. sandboxed tool execution: every tool on every row in one sandbox child (``call_tools``);
3. the reference procedure over every row in one sandbox child (``run_function``);
4. the audit end to end (static checks + oracle run + determinism run + reference run);
5. peak memory: ``resource.getrusage`` of this process and of its largest child, and the
   Python-heap peak of one more audit run under ``tracemalloc`` (its time overhead is shown).

It prints a table and the ratios against the gate's targets (whole gate < 60 s, < 1 GiB).
Nothing is asserted: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

from sopforge.audit import audit_folder  # noqa: E402
from sopforge.audit.checks_specs import build_oracle_calls, check_rows_against_specs, oracle_tools  # noqa: E402
from sopforge.audit.loader import load_folder  # noqa: E402
from sopforge.audit.checks_runtime import reference_calls  # noqa: E402
from sopforge.families.sop_tools.export.sopbench import write_sopbench_folder  # noqa: E402
from sopforge.sandbox import run_in_sandbox  # noqa: E402

TARGET_SECONDS = 60.0
TARGET_BYTES = 1024 ** 3

SOP = """1. Purpose
Triage small personal-loan applications into approve, refer or decline.

2. Scope
Applications for amounts up to 50,000.

3. Definitions
3.1 Credit score: integer 300-850 returned by getCreditScore.
3.2 DTI: debt-to-income ratio (0-1) returned by getDebtToIncome.
3.3 Employment years: whole years with the current employer, returned by getEmploymentRecord.

4. Input
- application_id (format A-NNNNN)
- applicant_name
- requested_amount

5. Main Procedure
5.1 Call getCreditScore with the application_id.
5.2 Call getDebtToIncome with the application_id.
5.3 Call getEmploymentRecord with the application_id.
5.4 Decide:
    - credit_score >= 700 and dti_ratio <= 0.35 and employment_years >= 2 -> approve
    - otherwise, credit_score >= 620 and dti_ratio <= 0.45 -> refer
    - otherwise -> decline

6. Output
final_decision: one of approve, refer, decline.
"""


def _spec(name: str, description: str) -> dict:
    return {"toolSpec": {"name": name, "description": f"{description} Params: application_id (string, e.g. A-00001).",
                         "inputSchema": {"json": {"type": "object", "properties": {
                             "application_id": {"type": "string", "pattern": "^A-[0-9]{5}$",
                                                "description": "Application identifier, e.g. A-00001"}},
                             "required": ["application_id"], "additionalProperties": False}}}}


TOOLSPECS = [
    _spec("getCreditScore", "Return the applicant's credit score (300-850)."),
    _spec("getDebtToIncome", "Return the applicant's debt-to-income ratio (0-1)."),
    _spec("getEmploymentRecord", "Return the applicant's years with the current employer."),
]

TOOLS = '''"""Mock tools for loan_triage_large: deterministic look-ups in this folder's CSV."""
import csv
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


class LoanTriageManager:
    def __init__(self):
        with open(os.path.join(_HERE, "test_set_with_outputs.csv"), newline="") as f:
            self._rows = {r["application_id"]: r for r in csv.DictReader(f)}

    def _row(self, application_id):
        if not application_id:
            raise ValueError("application_id is required")
        if application_id not in self._rows:
            raise ValueError(f"unknown application_id {application_id}")
        return self._rows[application_id]

    def getCreditScore(self, application_id):
        return {"credit_score": int(self._row(application_id)["credit_score"])}

    def getDebtToIncome(self, application_id):
        return {"dti_ratio": float(self._row(application_id)["dti_ratio"])}

    def getEmploymentRecord(self, application_id):
        row = self._row(application_id)
        return {"employment_years": int(row["employment_years"]), "employer": row["employer"]}

    def process_tool_call(self, tool_name, tool_input):
        if tool_name == "getCreditScore":
            return self.getCreditScore(**tool_input)
        if tool_name == "getDebtToIncome":
            return self.getDebtToIncome(**tool_input)
        if tool_name == "getEmploymentRecord":
            return self.getEmploymentRecord(**tool_input)
        raise ValueError(f"Invalid tool_name: {tool_name}")
'''

REFERENCE = '''"""Reference procedure: section 5 of the SOP as code."""


def decide(credit_score, dti_ratio, employment_years):
    if credit_score >= 700 and dti_ratio <= 0.35 and employment_years >= 2:
        return "approve"
    if credit_score >= 620 and dti_ratio <= 0.45:
        return "refer"
    return "decline"


def run_procedure(manager, case):
    key = {"application_id": case["application_id"]}
    score = manager.process_tool_call("getCreditScore", key)["credit_score"]
    dti = manager.process_tool_call("getDebtToIncome", key)["dti_ratio"]
    years = manager.process_tool_call("getEmploymentRecord", key)["employment_years"]
    return {"credit_score": score, "dti_ratio": dti, "employment_years": years,
            "final_decision": decide(score, dti, years)}
'''

FIRST = ["Ada", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea", "Mo", "Nia"]
LAST = ["Park", "Ortiz", "Nilsen", "Rao", "Okafor", "Silva", "Weber", "Kim", "Haddad", "Novak", "Ito"]
EMPLOYERS = ["Acme Corp", "Globex", "Initech", "Umbrella, Ltd.", "Hooli", "Vandelay Industries"]


def decide(score: int, dti: float, years: int) -> str:
    if score >= 700 and dti <= 0.35 and years >= 2:
        return "approve"
    if score >= 620 and dti <= 0.45:
        return "refer"
    return "decline"


def make_rows(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(1, n + 1):
        score, dti, years = rng.randint(520, 820), round(rng.uniform(0.05, 0.6), 2), rng.randint(0, 15)
        rows.append({
            "application_id": f"A-{i:05d}", "applicant_name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "requested_amount": rng.randrange(1000, 50001, 500), "employer": rng.choice(EMPLOYERS),
            "credit_score": score, "dti_ratio": dti, "employment_years": years,
            "final_decision": decide(score, dti, years),
        })
    return rows


def peak_memory() -> tuple[int, int]:
    """Peak RSS in bytes of this process and of its largest (waited-for) child (Linux: KiB)."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)


def mib(n: float) -> str:
    return f"{n / 1024 ** 2:,.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the folder here and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="sopforge-gate-"))
    results: list[tuple[str, float, str]] = []
    try:
        t = time.perf_counter()
        rows = make_rows(args.rows)
        folder = write_sopbench_folder(
            root, name="loan_triage_large", domain="finance", description="Synthetic loan triage at scale",
            sop_text=SOP, toolspecs=TOOLSPECS, tools_source=TOOLS, rows=rows,
            input_columns=["application_id", "applicant_name", "requested_amount"],
            intermediate_columns=["credit_score", "dti_ratio", "employment_years"],
            output_columns=["final_decision"], reference_source=REFERENCE, audit=False, overwrite=True)
        results.append(("generate + export (no audit)", time.perf_counter() - t, f"{args.rows:,} rows"))

        t = time.perf_counter()
        contents = load_folder(folder)
        tools = oracle_tools(contents)
        groups = build_oracle_calls(contents, tools)
        spec_checks = check_rows_against_specs(contents, tools, groups)
        dt = time.perf_counter() - t
        n_calls = sum(map(len, groups))
        ok = all(c.passed for c in spec_checks)
        results.append(("spec validation (load + coerce + jsonschema)", dt,
                        f"{args.rows / dt:,.0f} rows/s, {n_calls / dt:,.0f} calls/s, passed={ok}"))

        t = time.perf_counter()
        oracle = run_in_sandbox(folder, "tools.py", {"op": "call_tools", "groups": groups})
        dt = time.perf_counter() - t
        results.append(("sandboxed tool execution (1 child)", dt,
                        f"{args.rows / dt:,.0f} rows/s, {n_calls / dt:,.0f} calls/s, ok={oracle.ok}, "
                        f"child peak {mib(oracle.peak_rss_bytes or 0)}, child wall {oracle.wall_seconds:.2f} s"))

        t = time.perf_counter()
        ref = run_in_sandbox(folder, "reference_procedure.py", {
            "op": "run_function", "function": "run_procedure", "calls": reference_calls(contents),
            "tools_entry": "tools.py"})
        dt = time.perf_counter() - t
        results.append(("reference procedure (1 child)", dt,
                        f"{args.rows / dt:,.0f} rows/s, ok={ref.ok}, child peak {mib(ref.peak_rss_bytes or 0)}"))

        t = time.perf_counter()
        report = audit_folder(folder)
        audit_seconds = time.perf_counter() - t
        phases = ", ".join(f"{k} {v:.2f} s" for k, v in report.timings.items())
        results.append(("audit end to end", audit_seconds,
                        f"ok={report.ok}, {len(report.errors)} errors, {len(report.warnings)} warnings; {phases}"))

        self_peak, child_peak = peak_memory()
        tracemalloc.start()
        t = time.perf_counter()
        audit_folder(folder)
        traced_seconds = time.perf_counter() - t
        _, heap_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        results.append(("audit under tracemalloc", traced_seconds,
                        f"Python heap peak {mib(heap_peak)} (overhead x{traced_seconds / audit_seconds:.1f})"))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)

    width = max(len(name) for name, _, _ in results)
    print(f"tools gate on {args.rows:,} rows, {len(TOOLSPECS)} tools (python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs)")
    print(f"{'phase':<{width}}  {'seconds':>8}  detail")
    for name, seconds, detail in results:
        print(f"{name:<{width}}  {seconds:8.2f}  {detail}")
    print()
    peak = max(self_peak, child_peak)
    print(f"peak RSS: this process {mib(self_peak)}, largest child {mib(child_peak)} (RUSAGE_CHILDREN may include "
          "the pages a child shares with this process between fork and exec; the per-child wait4 figures above "
          "are the sandbox's own)")
    print(f"target ratios: audit {audit_seconds:.2f} s / {TARGET_SECONDS:.0f} s = {audit_seconds / TARGET_SECONDS:.2f}; "
          f"peak {mib(peak)} / 1 GiB = {peak / TARGET_BYTES:.2f} "
          f"(parent and child run one after the other, so the larger of the two is the peak)")


if __name__ == "__main__":
    main()
