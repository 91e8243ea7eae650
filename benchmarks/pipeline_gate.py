"""Speed and memory of sopforge's own tools gate on a generated domain scaled to many rows.

Unlike ``tools_gate.py`` (a synthetic SOP-Bench folder checked by ``sopforge audit``), this runs
the exact functions the flow runs, on the recorded pharmacy_refills domain (its schema, API graph,
toolspecs, tools.py and reference procedure as the example answers define them). The 50 recorded
cases are repeated with fresh ids until the requested row count:

- spec validation: every row's arguments against the toolspecs (``check_rows_against_specs``)
- sandboxed tool execution: every tool on every row, twice (``check_runtime``: determinism,
  stubs, data-dependence, decision leaks)
- reference procedure: ground truth and call sequences for every row, run twice for determinism
  (``compute_ground_truth``)
- oracle: replay of every task's expected calls through the exported folder (``oracle_check``)

It prints seconds, rows per second and peak memory, and ratios against the target (whole gate
under 60 s and under 1 GiB on this 2-core machine). No assertions: run it and read the figures.

    .venv/bin/python benchmarks/pipeline_gate.py [ROWS]      # default 10000
"""

from __future__ import annotations

import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

from sopforge.families.sop_tools.export.sopbench import write_sopbench_folder  # noqa: E402
from sopforge.families.sop_tools.models.api_graph import APIGraph  # noqa: E402
from sopforge.families.sop_tools.models.data_schema import DataSchema  # noqa: E402
from sopforge.families.sop_tools.models.dataset import Dataset, DatasetBatch  # noqa: E402
from sopforge.families.sop_tools.models.ground_truth import ReferenceProcedure  # noqa: E402
from sopforge.families.sop_tools.models.tools import ToolCode, ToolSpecs, manager_class_name  # noqa: E402
from sopforge.families.sop_tools.verify import oracle  # noqa: E402
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import write_bundle
from sopforge.families.sop_tools.verify.tool_checks import check_rows_against_specs
from sopforge.families.sop_tools.verify.tool_runtime import check_runtime

RECORDINGS = Path(__file__).resolve().parents[1] / "examples" / "recordings" / "pharmacy_refills"
TARGET_SECONDS, TARGET_BYTES = 60.0, 1 << 30


def answer(name: str) -> str:
    return (RECORDINGS / f"pharmacy_refills__{name}__a1.response.md").read_text(encoding="utf-8")


def scaled_rows(schema: DataSchema, n: int) -> list[dict]:
    base = [row for b in ("batch1", "batch2") for row in DatasetBatch.parse(answer(f"dataset__{b}"), schema).rows]
    return [{**base[i % len(base)], "request_id": f"RR-{1_000_000 + i}"} for i in range(n)]


def peak_rss_mib() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def timed(label: str, results: list, fn):
    started = time.perf_counter()
    value = fn()
    results.append((label, time.perf_counter() - started))
    return value


def blocking(checks) -> list[str]:
    return [f"{c.name}: {c.message[:160]}" for c in checks if not c.passed and c.severity == "error"]


def main(n: int) -> None:
    schema = DataSchema.parse(answer("schema__main"))
    graph = APIGraph.parse(answer("api_graph__main"))
    specs = ToolSpecs.parse(answer("tools__toolspecs"))
    code = ToolCode.parse(answer("tools__code"), manager_class_name("pharmacy_refills"))
    procedure = ReferenceProcedure.parse(answer("reference__main"))
    rows = scaled_rows(schema, n)
    dataset = Dataset(fields=[f.name for f in schema.existing], id_field="request_id", rows=rows, rows_requested=n)
    timings: list[tuple[str, float]] = []
    problems: list[str] = []

    problems += blocking(timed("spec validation", timings, lambda: check_rows_against_specs(dataset, specs, schema)))
    problems += blocking(timed("sandboxed tool execution (x2)", timings,
                               lambda: check_runtime(code, specs, graph, schema, dataset)))
    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_bundle(Path(tmp) / "bundle", tool_code=code.source, toolspecs=specs.specs,
                              procedure_source=procedure.source, rows=rows, schema=schema)
        truth, checks = timed("reference procedure (x2)", timings,
                              lambda: compute_ground_truth(bundle, schema, graph, rows))
        problems += blocking(checks)
        folder = write_sopbench_folder(
            Path(tmp) / "export", name="pharmacy_refills", domain="pharmacy", description="benchmark",
            sop_text=re.sub(r"(?s).*<SOP>|</SOP>.*", "", answer("sop__main")), toolspecs=specs.specs,
            tools_source=code.source, rows=truth.export_rows(), input_columns=truth.input_columns,
            intermediate_columns=truth.intermediate_columns, output_columns=truth.output_columns, audit=False)
        report = timed("oracle replay", timings, lambda: oracle.oracle_check(folder, truth.tasks))
        problems += blocking(report.checks())

    total = sum(seconds for _, seconds in timings)
    own, children = peak_rss_mib()
    print(f"sopforge tools gate on {n:,} rows of the pharmacy_refills domain (2 CPUs)")
    print(f"{'phase':34} {'seconds':>8} {'rows/s':>9}")
    for label, seconds in timings:
        print(f"{label:34} {seconds:8.2f} {n / seconds:9,.0f}")
    print(f"{'whole gate':34} {total:8.2f} {n / total:9,.0f}")
    print(f"tasks with ground truth: {len(truth.tasks):,}; excluded: {len(truth.excluded)}; "
          f"oracle: {report.summary()}")
    print(f"peak RSS: this process {own:,.0f} MiB, largest sandbox child {children:,.0f} MiB")
    print(f"target ratios: time {total:.1f} s / {TARGET_SECONDS:.0f} s = {total / TARGET_SECONDS:.2f}; "
          f"memory {max(own, children):,.0f} MiB / 1024 MiB = {max(own, children) * (1 << 20) / TARGET_BYTES:.2f}")
    print("blocking check failures: " + ("; ".join(problems) if problems else "none"))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
