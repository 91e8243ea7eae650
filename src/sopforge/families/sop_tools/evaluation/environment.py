"""An exported sop_tools domain as a tool environment: what ``sopforge mcp RUN`` serves.

The environment is the exported SOP-Bench folder (``exports/<run id>/<slug>/``): its toolspecs
(the registry with the distractor tools, or ``registry/minimal``), the SOP (``sop.txt`` or one of
``sop_variants/``) and its tasks, the agent-visible part only (task id and input columns).

Tool code runs only in the sandbox, through the replay driver every check of the domain uses
(:mod:`sopforge.families.sop_tools.verify.replay`). A session is the list of calls it has made:
each new call replays them and itself on a fresh Manager seeded from the folder's CSV, so the state
a session sees is exactly what its own calls left (τ²-bench's replay on a fresh environment), two
sessions never see each other's writes, and a reset is forgetting the calls. The generated tools
are deterministic (the tools gate runs every tool twice to check it), so replaying a prefix gives
the same results it gave the first time. Arguments are validated against the tool's schema before
anything runs, so a call the schema rejects never reaches the tools and changes nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

from sopforge.errors import UserError
from sopforge.evaluation.protocol import EnvTool, ToolOutcome
from sopforge.families.sop_tools.verify.ground_truth_bundle import CSV_FILE, TOOLS_FILE, TOOLSPECS_FILE
from sopforge.families.sop_tools.verify.oracle import METADATA_FILE, TASKS_FILE
from sopforge.families.sop_tools.verify.replay import ReplayRun, replay_plans
from sopforge.sandbox.staging import read_regular_file

__all__ = ["REGISTRIES", "SopToolsEnvironment", "SopToolsSession", "domain_folder", "sop_names"]

REGISTRIES = ("with_distractors", "minimal")
WRITE_MARK = "[WRITE]"


def domain_folder(export_dir: Path) -> Path:
    """The SOP-Bench folder of a run's export (``exports/<run id>/<slug>/``).

    Raises:
        UserError: The folder is not a sop_tools export.
    """
    metadata = Path(export_dir) / METADATA_FILE
    try:
        slug = json.loads(metadata.read_text(encoding="utf-8"))["benchmark"]
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"{export_dir} holds no sop_tools export ({METADATA_FILE} with 'benchmark' is missing): "
                        "generate the domain with the sop_tools family first") from None
    folder = Path(export_dir) / str(slug)
    if not (folder / TOOLS_FILE).is_file():
        raise UserError(f"{folder} has no {TOOLS_FILE}: the export is incomplete; run `sopforge rerun` on the run")
    return folder


def sop_names(folder: Path) -> list[str]:
    """``base`` and every exported SOP variant, in a stable order."""
    return ["base", *sorted(p.stem for p in (folder / "sop_variants").glob("*.txt"))]


def _specs(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [element.get("toolSpec", element) for element in data]


class SopToolsEnvironment:
    """The domain of one export, with one SOP and one registry.

    Args:
        export_dir: ``exports/<run id>``.
        options: ``{"sop": "base" | <variant>, "registry": "with_distractors" | "minimal"}``.

    Raises:
        UserError: Not a sop_tools export, or an unknown SOP variant or registry.
    """

    def __init__(self, export_dir: Path, options: dict[str, Any] | None = None):
        options = options or {}
        self.folder = domain_folder(export_dir)
        self.name = self.folder.name
        sop, registry = str(options.get("sop") or "base"), str(options.get("registry") or "with_distractors")
        if sop not in sop_names(self.folder):
            raise UserError(f"unknown SOP {sop!r}: choose one of {', '.join(sop_names(self.folder))}")
        if registry not in REGISTRIES:
            raise UserError(f"unknown registry {registry!r}: choose one of {', '.join(REGISTRIES)}")
        self.sop, self.registry = sop, registry
        sop_file = self.folder / "sop.txt" if sop == "base" else self.folder / "sop_variants" / f"{sop}.txt"
        self.instructions = sop_file.read_text(encoding="utf-8")
        specs_file = self.folder / TOOLSPECS_FILE if registry == "with_distractors" \
            else self.folder / "registry" / "minimal" / TOOLSPECS_FILE
        self._tools = [EnvTool(name=s["name"], description=s.get("description", ""),
                               input_schema=(s.get("inputSchema") or {}).get("json") or {"type": "object"},
                               writes=str(s.get("description", "")).lstrip().startswith(WRITE_MARK))
                       for s in _specs(specs_file)]
        from jsonschema import Draft7Validator  # loaded by an evaluation, not by every command that loads the family

        self._validators = {t.name: Draft7Validator(t.input_schema) for t in self._tools}
        metadata = json.loads((self.folder / METADATA_FILE).read_text(encoding="utf-8"))
        self.input_columns: list[str] = list(metadata.get("input_columns") or [])
        self.output_columns: list[str] = list(metadata.get("output_columns") or [])
        self._tasks = self._read_tasks()
        # Only what the tools need is staged for each call (not the reference procedure or the task
        # files): a smaller folder to copy and check. Read as data, never through a link.
        self.work = Path(tempfile.mkdtemp(prefix="sopforge-env-"))
        for name in (TOOLS_FILE, CSV_FILE):
            (self.work / name).write_bytes(read_regular_file(self.folder / name))
        weakref.finalize(self, shutil.rmtree, str(self.work), True)

    def _read_tasks(self) -> list[dict[str, Any]]:
        path = self.folder / TASKS_FILE
        if not path.is_file():
            return []
        tasks = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                task = json.loads(line)
                tasks.append({"task_id": task["task_id"],
                              "inputs": {c: task["inputs"].get(c) for c in self.input_columns if c in task["inputs"]}})
        return tasks

    def tools(self) -> list[EnvTool]:
        """The registry's tools, distractors included unless the registry is ``minimal``."""
        return list(self._tools)

    def tasks(self) -> list[dict[str, Any]]:
        """Every task as the agent sees it: the task id and the input columns."""
        return list(self._tasks)

    def new_session(self) -> SopToolsSession:
        """A session on the seeded state."""
        return SopToolsSession(self)

    def check_arguments(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """Why a call is refused before it runs (unknown tool, schema error), or None."""
        validator = self._validators.get(tool)
        if validator is None:
            return f"unknown tool {tool!r}: call one of {', '.join(self._validators)}"
        problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if problems:
            where = "/".join(str(p) for p in problems[0].absolute_path) or "arguments"
            return f"arguments do not match the schema of {tool}: {where}: {problems[0].message}"
        return None


class SopToolsSession:
    """One client's calls on the environment (see the module docstring)."""

    def __init__(self, environment: SopToolsEnvironment):
        self.environment = environment
        self.calls: list[dict[str, Any]] = []  # every call that reached the tools, with its outcome
        self._diff: dict[str, Any] = {}
        self._lock = threading.Lock()

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one tool call after the session's earlier ones; a refused or failed call is an error outcome."""
        refused = self.environment.check_arguments(tool, arguments)
        if refused is not None:
            return ToolOutcome(error=refused)
        with self._lock:
            plan = [{"tool": c["tool"], "args": c["input"]} for c in self.calls] + [{"tool": tool, "args": arguments}]
            result, runs = replay_plans(self.environment.work, [plan], fresh=True)
            run = runs[0] if runs else None
            if not result.ok or run is None or not run.ok:
                why = (run.error if run is not None else "") or f"{result.error_kind}: {result.error_message}"
                return ToolOutcome(error=f"the tool could not be run in the sandbox ({why})")
            last = run.calls[-1]
            entry = {"tool": tool, "input": arguments, "output": last.get("output"), "error": last.get("error"),
                     "state_diff": last.get("state_diff") or {}}
            self.calls.append(entry)
            self._diff = run.state_diff or {}
        if last.get("error"):
            return ToolOutcome(error=last["error"])
        if last.get("unencodable"):
            return ToolOutcome(error=f"the tool returned a value that is not JSON ({last['unencodable']})")
        return ToolOutcome(result=last.get("output"))

    def reset(self) -> None:
        """Back to the seeded state: forget every call."""
        with self._lock:
            self.calls, self._diff = [], {}

    def state(self) -> dict[str, Any]:
        """The database state view: records this session's calls created or changed, and the calls."""
        with self._lock:
            return {"state_diff": self._diff, "calls": list(self.calls)}

    def replayed(self) -> ReplayRun:
        """The session as a replay run (for the trajectory scorer)."""
        with self._lock:
            return ReplayRun(ok=True, calls=list(self.calls), state_diff=dict(self._diff), stateful=True)
