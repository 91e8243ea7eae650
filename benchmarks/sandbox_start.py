"""What the OS boundary costs per sandbox start (issue 10).

Measured in one run, alternating so drift hits both alike, N times each:

- plain: the interpreter as the old sandbox started it (``python -s -P -B``, clean environment,
  no namespaces), running nothing;
- old boundary: the same under ``unshare --net`` (what the sandbox used before, as root);
- bubblewrap: the same inside the full container of ``sopforge.sandbox.boundary`` (namespaces,
  read-only mounts, seccomp filter), running nothing;
- run_in_sandbox: a whole sandbox run of a tiny tools.py with one call (policy check, folder
  copy, container, child set-up, audit hook, classification).

It prints the mean and the ratio to plain. No assertions: run it and read the figures.

    .venv/bin/python benchmarks/sandbox_start.py [N]      # default 20
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sopforge.sandbox import boundary, run_in_sandbox

TOOLS = "class TinyManager:\n    def process_tool_call(self, tool_name, tool_input):\n        return {'ok': True}\n"
ARGV = [sys.executable, "-s", "-P", "-B", "-c", "pass"]
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def plain() -> None:
    subprocess.run(ARGV, env=ENV, check=True)


def old_boundary() -> None:
    subprocess.run(["unshare", "--net", "--", *ARGV], env=ENV, check=True)


def bubblewrap(folder: Path) -> None:
    program = boundary.seccomp_program()
    read_end, write_end = os.pipe()
    os.write(write_end, program or b"")
    os.close(write_end)
    try:
        cmd = boundary.bwrap_command(folder=folder, runtime_files=[], env=ENV, argv=ARGV,
                                     seccomp_fd=read_end if program else None)
        subprocess.run(cmd, env={}, check=True, pass_fds=(read_end,))
    finally:
        os.close(read_end)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    boundary.ensure_available()
    tmp = Path(tempfile.mkdtemp(prefix="sandbox-start-"))
    (tmp / "tools.py").write_text(TOOLS)
    payload = {"op": "call_tools", "groups": [[{"tool": "t"}]]}
    have_unshare = shutil.which("unshare") is not None and os.geteuid() == 0
    runs: dict[str, list[float]] = {"plain": [], "old boundary (unshare --net)": [], "bubblewrap": [],
                                     "run_in_sandbox (1 call)": []}
    try:
        for _ in range(n):
            runs["plain"].append(timed(plain))
            if have_unshare:
                runs["old boundary (unshare --net)"].append(timed(old_boundary))
            runs["bubblewrap"].append(timed(lambda: bubblewrap(tmp)))
            result = None

            def full() -> None:
                nonlocal result
                result = run_in_sandbox(tmp, "tools.py", payload)
            runs["run_in_sandbox (1 call)"].append(timed(full))
            assert result is not None and result.ok, result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.mean(runs["plain"])
    print(f"sandbox start cost, mean of {n} (2-core machine):")
    for name, values in runs.items():
        if values:
            mean = statistics.mean(values)
            print(f"  {name:<30} {mean * 1000:7.1f} ms   x{mean / base:4.2f} of plain   "
                  f"(+{(mean - base) * 1000:5.1f} ms)")


if __name__ == "__main__":
    main()
