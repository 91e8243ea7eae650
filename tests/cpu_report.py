"""``PYTEST_CPU_REPORT=FILE``: the CPU each test used, its subprocesses included, and the suite's top tests.

On two cores ``make test`` keeps both busy, so its wall time is its CPU time over two, and a test's
``--durations`` depends on what ran beside it. What a test costs is its CPU: the test's own process,
the subprocesses it ran to the end (the CLI, the sandbox) and the CPU that processes still running
spent meanwhile (a server the test started, a browser). The Prefect server the session shares is not
a test's: ``tests/session_server.py`` adds its CPU as one line of its own. Each test process
appends one JSON line per test to FILE (xdist workers too); the process that prints the summary reads
them back and shows the tests that cost most, and which long-running commands the CPU went to.

A subprocess started before a test and reaped during it is counted from the test's start only.

An environment variable rather than a command-line option: xdist workers run without the controller's
``testpaths``, parse their options before they load ``tests/conftest.py``, and refuse an option it adds.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TOP = 15


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("PYTEST_CPU_REPORT")
    if not path:
        return
    if not hasattr(config, "workerinput"):  # the controller (or the only process) starts the file afresh
        Path(path).write_text("")
    config.pluginmanager.register(CpuReport(Path(path)), "cpu_report_writer")


@dataclass(frozen=True)
class Snapshot:
    wall: float
    own: float  # this process
    finished: float  # subprocesses waited for (and theirs)
    running: dict[int, tuple[str, float]]  # descendants alive now: pid -> (command name, CPU so far)


def _process_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command name, CPU seconds) for every process, from ``/proc``."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        command, fields = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:].split()
        table[int(name)] = (int(fields[1]), command, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return table


def _running_descendants() -> dict[int, tuple[str, float]]:
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = {}, list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        _, command, cpu = table[pid]
        found[pid] = (_label(pid, command), cpu)
        stack.extend(children.get(pid, []))
    return found


def _label(pid: int, command: str) -> str:
    """The command name, or for Python what it runs (the Prefect server is ``-m …prefect_cli``)."""
    if not command.startswith("python"):
        return command
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[1:]
    except OSError:
        return command
    if args[:1] == ["-m"] and len(args) > 1:
        return f"python -m {args[1]}"
    return f"python {Path(args[0]).name}" if args and args[0] and not args[0].startswith("-") else command


def snapshot() -> Snapshot:
    own, finished = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return Snapshot(time.perf_counter(), own.ru_utime + own.ru_stime, finished.ru_utime + finished.ru_stime,
                    _running_descendants())


def cost(before: Snapshot, after: Snapshot) -> dict:
    """What happened between two snapshots of one process, as one report line (without the test's name)."""
    by_command: Counter[str] = Counter()
    for pid, (command, cpu) in after.running.items():
        by_command[command] += cpu - before.running.get(pid, (command, 0.0))[1]
    # A process running at the start and reaped since is in `finished` with all its CPU: keep only its share.
    earlier = sum(cpu for pid, (_, cpu) in before.running.items() if pid not in after.running)
    finished = max(0.0, after.finished - before.finished - earlier)
    return {"wall": round(after.wall - before.wall, 3), "own": round(after.own - before.own, 3),
            "finished": round(finished, 3), "running": round(sum(by_command.values()), 3),
            "running_by_command": {c: round(s, 2) for c, s in by_command.items() if s >= 0.01}}


class CpuReport:
    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        before = snapshot()
        yield
        line = json.dumps({"test": item.nodeid, **cost(before, snapshot())})
        with open(self.path, "a") as f:  # one write per line: workers append side by side
            f.write(line + "\n")

    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config) -> None:
        if hasattr(config, "workerinput"):
            return
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line]
        for line in summary(rows):
            terminalreporter.write_line(line)


def summary(rows: list[dict]) -> list[str]:
    def total(row: dict) -> float:
        return row["own"] + row["finished"] + row["running"]

    everything = sum(map(total, rows))
    by_command: Counter[str] = Counter()
    for row in rows:
        by_command.update(row["running_by_command"])
    commands = "".join(f", {command} {cpu:.1f}" for command, cpu in by_command.most_common(5))
    tests = sum(not row["test"].startswith("(session)") for row in rows)  # lines such as tests/session_server.py's
    lines = [f"CPU per test, subprocesses included: {everything:.1f} CPU-s over {tests} tests (the tests' own "
             f"processes {sum(r['own'] for r in rows):.1f}, subprocesses they waited for "
             f"{sum(r['finished'] for r in rows):.1f}, running processes {sum(r['running'] for r in rows):.1f}{commands})",
             f"{'CPU-s':>8} {'wall s':>8} {'own':>7} {'finished':>9} {'running':>8}  test"]
    for row in sorted(rows, key=total, reverse=True)[:TOP]:
        lines.append(f"{total(row):8.1f} {row['wall']:8.1f} {row['own']:7.1f} {row['finished']:9.1f} "
                     f"{row['running']:8.1f}  {row['test']}")
    return lines
