"""What sopforge's collector thresholds (``sopforge.gc_thresholds``) save, measured in one run.

Two workloads, each run N times with CPython's default thresholds and N times with sopforge's,
alternating so drift hits both alike:

- import: a fresh interpreter importing Great Expectations and Prefect (what every command that
  generates or packages pays first);
- generate: the demo theme's sop_tools chain, offline, in a fresh home, against one Prefect server
  started here (``python -m sopforge.cli.app generate``; the thresholds are switched off for the
  baseline with ``SOPFORGE_GC_DEFAULTS=1``, which only this benchmark sets).

It prints CPU seconds (user + system of the process and its children) per run and the ratio
sopforge / default, and peak memory of the generate. No assertions: run it and read the figures.

    .venv/bin/python benchmarks/gc_thresholds.py [N]      # default 3
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from sopforge.gc_thresholds import THRESHOLDS

ROOT = Path(__file__).resolve().parents[1]
THEME = ROOT / "examples" / "themes" / "pharmacy_refills.yaml"
QUIET = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "GX_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
IMPORTS = "import gc, sys\nif sys.argv[1] == 'sopforge': gc.set_threshold(*{t})\nimport great_expectations, prefect\n"


def cpu_of(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of one command with its children (their own rusage: wait4)."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(args, env={**os.environ, **QUIET, **env}, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for its own rusage
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"{' '.join(args[:4])} failed:\n{err.read()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(n: int) -> None:
    from sopforge.orchestration.prefect_server import _free_port, healthy, stop_process

    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                   "--port", str(port)], env={**os.environ, **QUIET, "PREFECT_HOME": tmp},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not healthy(api):
                if server.poll() is not None:
                    sys.exit("the Prefect server did not start")
            figures: dict[tuple[str, str], list[float]] = {}
            peak: dict[str, float] = {}
            code = IMPORTS.format(t=tuple(THRESHOLDS))
            for i in range(n):
                for mode in ("default", "sopforge"):
                    cpu, _ = cpu_of([sys.executable, "-c", code, mode], {})
                    figures.setdefault(("import", mode), []).append(cpu)
                    home = Path(tmp) / f"home-{mode}-{i}"
                    env = {"SOPFORGE_HOME": str(home), "PREFECT_API_URL": api,
                           **({"SOPFORGE_GC_DEFAULTS": "1"} if mode == "default" else {})}
                    cpu, rss = cpu_of([sys.executable, "-m", "sopforge.cli.app", "generate", str(THEME),
                                       "--family", "sop_tools", "--json"], env)
                    figures.setdefault(("generate", mode), []).append(cpu)
                    peak[mode] = max(peak.get(mode, 0.0), rss)
        finally:
            stop_process(server)
    print(f"thresholds: default {(700, 10, 10)}, sopforge {tuple(THRESHOLDS)}; {n} runs each")
    for work in ("import", "generate"):
        base = statistics.mean(figures[(work, "default")])
        ours = statistics.mean(figures[(work, "sopforge")])
        print(f"{work:9s} default {base:6.2f} CPU-s   sopforge {ours:6.2f} CPU-s   ratio {ours / base:.2f}")
    print(f"generate peak memory: default {peak['default']:.0f} MB, sopforge {peak['sopforge']:.0f} MB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
