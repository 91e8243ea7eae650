"""Verify distractor tools: each is kept only if it is harmless, callable and never needed (issue 5, item 1).

SOP-Bench §3.3.2 adds look-alike tools by hand; TELLER's check for its distractor APIs is "no
name collisions with core APIs; no distractor in the ground-truth graph" (teller.md §7 item 10).
Here every proposed tool goes through, in order:

* **answer-level** checks (:func:`check_distractor_code`, blocking, so the model is re-asked):
  the code passes the sandbox AST policy, parses, defines ``class DistractorTools`` with no
  ``__init__`` or other dunder, keeps everything but imports inside the class, and imports
  nothing under a name tools.py already uses for something else;
* **static, per tool** (the tool is dropped): its name collides with a real tool
  (case-insensitive), a Manager member or an earlier distractor; its spec is not a valid toolSpec;
  it is in some task's expected calls; its method is missing, async or takes other parameters
  than the spec's properties; it (or a helper it uses) has the name of a Manager member;
* **sandboxed, per tool**: called through the merged Manager with arguments taken from dataset
  rows, it raises or returns a non-dict on every tried row, or it changes the database (a
  distractor only reads: an agent that calls one must not change the final state);
* **with all survivors registered**: the oracle replays every task through the merged folder
  and must score TSR 1.00, and the reference procedure re-run over the merged tools must give
  exactly the same tasks (outputs, calls, results). On failure each survivor is tried alone,
  the culprits are dropped and the rest re-checked: this catches a "distractor" that changes
  shared state, i.e. one the real tools secretly depend on.
"""

from __future__ import annotations

import ast
import csv
import json
import tempfile
from pathlib import Path
from typing import Any

from sopforge.pyast import parse_python
from sopforge.families.sop_tools.models.api_graph import API_NAME_RE, APIGraph
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.distractor_code import (
    MIXIN_CLASS, MixinSource, base_manager_members, merge_tools_source, module_bindings, read_mixin,
)
from sopforge.families.sop_tools.models.distractors import DistractorTool
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, csv_cell
from sopforge.families.sop_tools.models.tools import ToolsArtifact
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import write_bundle
from sopforge.families.sop_tools.verify.ground_truth_bundle import CSV_FILE, TOOLS_FILE, TOOLSPECS_FILE
from sopforge.families.sop_tools.verify.oracle import METADATA_FILE, oracle_check
from sopforge.families.sop_tools.verify.replay import replay_plans
from sopforge.sandbox import SandboxLimits, check_code
from sopforge.families.sop_tools.verify.tool_common import _schema_problem, typed_row

__all__ = ["PROBE_ROWS", "RegistryCheck", "baseline_problem", "check_distractor_code", "probe_arguments", "verify_distractor_tools"]

PROBE_ROWS = 3
_PLAIN = {"string": "example", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


# --------------------------------------------------------------------------------------- answer level

def _renamed(results: list[CheckResult]) -> list[CheckResult]:
    return [r.model_copy(update={"name": r.name.replace("tools.", "distractors.code.", 1)}) for r in results]


def check_distractor_code(code: str, base: ToolsArtifact) -> list[CheckResult]:
    """Problems of the distractor code as a whole; any failure re-asks the model.

    Returns:
        ``distractors.code.policy*`` (the sandbox AST policy), then ``distractors.code.mixin``
        (class present, nothing but imports outside it, no dunder members, no import that
        rebinds a name of tools.py).
    """
    results = _renamed(check_code(code))
    try:
        mixin = read_mixin(code)
    except (SyntaxError, ValueError) as exc:
        if not isinstance(exc, SyntaxError):
            results.append(check("distractors.code.mixin", False, f"{exc}; put every distractor tool in it as a "
                                 f"method: class {MIXIN_CLASS}: def toolName(self, ...): ..."))
        return results
    problems = []
    tree = parse_python(code)
    for node in tree.body:
        is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        is_mixin = isinstance(node, ast.ClassDef) and node.name == MIXIN_CLASS
        if not (is_doc or is_mixin or isinstance(node, (ast.Import, ast.ImportFrom))):
            problems.append(f"line {node.lineno}: only imports and class {MIXIN_CLASS} may be at module level "
                            "(make constants class attributes and helpers private methods)")
    dunders = sorted(n for n in mixin.members if n.startswith("__") and n.endswith("__"))
    if dunders:
        problems.append(f"{MIXIN_CLASS} must not define {', '.join(dunders)} (the Manager's own __init__ runs; "
                        "read data lazily inside the methods)")
    if mixin.class_node.bases or mixin.class_node.keywords or mixin.class_node.decorator_list:
        problems.append(f"class {MIXIN_CLASS} must be a plain class: no base classes, metaclass or decorators")
    base_names = module_bindings(parse_python(base.code.source))
    for name, how in module_bindings(ast.Module(body=mixin.imports, type_ignores=[])).items():
        if name in base_names and base_names[name] != how:
            problems.append(f"'{how}' rebinds {name}, which tools.py binds by '{base_names[name]}'; import under "
                            "another name")
    results.append(check("distractors.code.mixin", not problems, "; ".join(problems[:3]) if problems
                         else f"one plain class {MIXIN_CLASS}", problems=problems))
    return results


# --------------------------------------------------------------------------------------- static, per tool

def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [x.arg for x in [*a.posonlyargs, *a.args]][1:] + [x.arg for x in a.kwonlyargs]


def _spec_problem(tool: DistractorTool) -> str | None:
    spec = tool.spec
    if not API_NAME_RE.match(tool.name):
        return f"{tool.name!r} is not a valid tool name (a letter, then letters, digits or _; at most 64)"
    if not isinstance(spec.get("description"), str) or not spec["description"].strip():
        return "its toolSpec has no description"
    holder = spec.get("inputSchema")
    inner = holder.get("json") if isinstance(holder, dict) else None
    if not isinstance(inner, dict):
        return "its toolSpec has no inputSchema.json object"
    problem = _schema_problem(inner)
    return f"its toolSpec is invalid: {problem}" if problem else None


def _static_reasons(tools: list[DistractorTool], mixin: MixinSource, base: ToolsArtifact,
                    gt: GroundTruth) -> dict[str, str]:
    real = {n.lower(): n for n in base.toolspecs.names if isinstance(n, str)}
    members = base_manager_members(base.code.source, base.class_name) | {"process_tool_call"}
    required = {c.tool for t in gt.tasks for c in t.expected_calls}
    seen: set[str] = set()
    reasons: dict[str, str] = {}
    for i, tool in enumerate(tools):
        key, name = f"{i}:{tool.name}", tool.name
        fn = mixin.method(name)
        helpers = sorted((mixin.needed_members([name]) - {name}) & members)
        if name.lower() in real:
            reason = f"its name collides with the real tool {real[name.lower()]}"
        elif name in members:
            reason = f"its name collides with the Manager's own {name}"
        elif name.lower() in seen:
            reason = "another distractor already has this name"
        elif (problem := _spec_problem(tool)) is not None:
            reason = problem
        elif name in required:
            reason = "it is in a task's expected call sequence, so it is not a distractor"
        elif fn is None or not isinstance(fn, ast.FunctionDef):
            reason = f"{MIXIN_CLASS} has no plain (non-async) method {name}"
        elif fn.args.vararg or fn.args.kwarg or sorted(_params(fn)) != sorted(_input_properties(tool)):
            reason = (f"method {name}({', '.join(_params(fn))}) must take exactly the toolSpec's properties "
                      f"({', '.join(_input_properties(tool))})")
        elif helpers:
            reason = (f"it uses {MIXIN_CLASS}.{helpers[0]}, which has the name of a Manager member: one of them "
                      "would silently replace the other")
        else:
            reason = ""
        seen.add(name.lower())
        reasons[key] = reason
    return reasons


def _input_properties(tool: DistractorTool) -> list[str]:
    props = (tool.spec.get("inputSchema") or {}).get("json", {}).get("properties", {})
    return list(props) if isinstance(props, dict) else []


# --------------------------------------------------------------------------------------- sandboxed

def _argument(prop: dict[str, Any]) -> Any:
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    kind = prop.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind == "string" and prop.get("format") == "date":
        return "2025-01-15"
    if kind in ("integer", "number") and isinstance(prop.get("minimum"), (int, float)):
        return prop["minimum"]
    return _PLAIN.get(kind, "example")


def probe_arguments(tool: DistractorTool, rows: list[dict[str, Any]], schema: DataSchema) -> list[dict[str, Any]]:
    """Arguments for up to :data:`PROBE_ROWS` calls: row values where a property is a field, else a typed guess."""
    props = (tool.spec.get("inputSchema") or {}).get("json", {}).get("properties", {})
    calls = []
    for row in rows[:PROBE_ROWS]:
        typed = typed_row(row, schema)
        calls.append({p: typed[p] if p in typed else _argument(s if isinstance(s, dict) else {})
                      for p, s in props.items()})
    return calls


class RegistryCheck:
    """Builds merged folders for a subset of distractors and runs the sandboxed checks on them."""

    def __init__(self, root: Path, base: ToolsArtifact, mixin: MixinSource | None, tools: dict[str, DistractorTool],
                 schema: DataSchema, graph: APIGraph, rows: list[dict[str, Any]], gt: GroundTruth,
                 limits: SandboxLimits | None) -> None:
        self.root, self.base, self.mixin, self.tools = root, base, mixin, tools
        self.schema, self.graph, self.rows, self.gt, self.limits = schema, graph, rows, gt, limits
        self._n = 0

    def merged(self, names: list[str]) -> str:
        if not names or self.mixin is None:
            return self.base.code.source
        return merge_tools_source(self.base.code.source, self.base.class_name, self.mixin.keep_only(names), names)

    def _bundle(self, names: list[str]) -> Path:
        self._n += 1
        specs = [*({"toolSpec": s} for s in self.base.toolspecs.specs), *({"toolSpec": self.tools[n].spec}
                                                                          for n in names)]
        return write_bundle(self.root / f"bundle-{self._n}", tool_code=self.merged(names), toolspecs=specs,
                            procedure_source=self.gt.procedure.source, rows=self.rows, schema=self.schema)

    def probe(self, names: list[str]) -> dict[str, str] | None:
        """name -> why it failed every tried row or wrote ('' when it worked); None when the module did not load."""
        folder = self._bundle(names)
        plans = [[{"tool": n, "args": args} for args in probe_arguments(self.tools[n], self.rows, self.schema)]
                 for n in names]
        result, runs = replay_plans(folder, plans, fresh=False, limits=self.limits)
        if len(runs) < len(names) or not all(r.ok for r in runs):
            return None
        verdicts = {}
        for name, run in zip(names, runs, strict=True):
            good = [c for c in run.calls if isinstance(c.get("output"), dict) and "unencodable" not in c]
            first = run.calls[0] if run.calls else {}
            wrote = sorted({t for c in run.calls for t in c.get("state_diff") or {}})
            if wrote:
                verdicts[name] = (f"calling it changed the database ({', '.join(wrote)}): a distractor must only "
                                  "read, or an agent that calls it would change the final state")
            elif good:
                verdicts[name] = ""
            elif "error" in first:
                verdicts[name] = f"calling it raised on every tried row ({first['error']})"
            else:
                shown = type(first.get("output")).__name__ if first else "nothing"
                verdicts[name] = f"it returned {shown} instead of a JSON object on every tried row"
        return verdicts

    def registry_problem(self, names: list[str]) -> str:
        """'' when the oracle scores TSR 1.00 and the reference re-run reproduces the ground truth with ``names``."""
        folder = self.root / f"oracle-{self._n + 1}"
        bundle = self._bundle(names)
        folder.mkdir()
        for part in (TOOLS_FILE, TOOLSPECS_FILE):
            (folder / part).write_bytes((bundle / part).read_bytes())
        _write_export_csv(folder / CSV_FILE, self.gt)
        (folder / METADATA_FILE).write_text(json.dumps({"input_columns": self.gt.input_columns,
                                                        "output_columns": self.gt.output_columns}), encoding="utf-8")
        report = oracle_check(folder, self.gt.tasks, limits=self.limits)
        if report.tsr < 1.0 or report.problems:
            why = report.problems[0] if report.problems else (report.failures[0].reasons[0] if report.failures
                                                              and report.failures[0].reasons else "")
            return f"with it registered the oracle scores TSR {report.tsr:.2f}, not 1.00 ({why})"
        rerun, _ = compute_ground_truth(bundle, self.schema, self.graph, self.rows, limits=self.limits,
                                        check_determinism=False)
        return _ground_truth_difference(self.gt, rerun)


def _write_export_csv(path: Path, gt: GroundTruth) -> None:
    """The CSV of an exported folder: every column of every task (what the oracle compares with)."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(gt.columns)
        writer.writerows([csv_cell(row.get(c)) for c in gt.columns] for row in gt.export_rows())


def _ground_truth_difference(before: GroundTruth, after: GroundTruth) -> str:
    old = {t.task_id: t for t in before.tasks}
    new = {t.task_id: t for t in after.tasks}
    if set(old) != set(new):
        lost = sorted(set(old) - set(new))
        return (f"with it registered the reference procedure no longer completes task {lost[0]}" if lost
                else "with it registered the reference procedure completes different tasks")
    for task_id, task in old.items():
        other = new[task_id]
        if task.expected_outputs != other.expected_outputs:
            return (f"with it registered the reference procedure answers task {task_id} with "
                    f"{json.dumps(other.expected_outputs, default=str)} instead of "
                    f"{json.dumps(task.expected_outputs, default=str)}")
        if task.model_dump(mode="json") != other.model_dump(mode="json"):
            return f"with it registered the tool calls of task {task_id} return different results"
    return ""


def baseline_problem(base: ToolsArtifact, schema: DataSchema, graph: APIGraph, rows: list[dict[str, Any]],
                     ground_truth: GroundTruth, limits: SandboxLimits | None = None) -> str:
    """Why the inputs disagree before any distractor is added ('' when the oracle and the re-run agree).

    Without this, a stale ground truth would make every distractor look guilty.
    """
    with tempfile.TemporaryDirectory(prefix="sopforge-distractor-baseline-") as tmp:
        checker = RegistryCheck(Path(tmp), base, None, {}, schema, graph, rows, ground_truth, limits)
        return checker.registry_problem([]).replace("with it registered ", "without distractors ")


# --------------------------------------------------------------------------------------- entry point

def verify_distractor_tools(tools: list[DistractorTool], code: str, *, base: ToolsArtifact, schema: DataSchema,
                            graph: APIGraph, rows: list[dict[str, Any]], ground_truth: GroundTruth,
                            limits: SandboxLimits | None = None) -> tuple[list[DistractorTool], str, list[CheckResult]]:
    """Verify each proposed tool; return them with ``kept``/``reason`` set, the kept mixin code and the checks.

    Args:
        tools: Parsed proposals, in answer order.
        code: The ``<distractor_code>`` source.
        base: The accepted tools artifact (tools.py, toolspecs, Manager class).
        schema: The data schema (argument types of probe calls; the bundle CSV).
        graph: The API graph (reference re-run).
        rows: The dataset rows the ground truth was computed from, in order.
        ground_truth: The accepted ground truth (expected calls; oracle tasks; re-run baseline).
        limits: Sandbox limits of each child process.

    Returns:
        (tools with their fate, mixin source with only the kept tools, checks). The checks are
        the answer-level ones (blocking: the caller re-asks) plus ``distractors.oracle_with_distractors``.
    """
    checks = check_distractor_code(code, base)
    if any(c.blocking for c in checks):
        return tools, "", checks
    mixin = read_mixin(code)
    reasons = _static_reasons(tools, mixin, base, ground_truth)
    order = [f"{i}:{t.name}" for i, t in enumerate(tools)]
    by_name = {t.name: t for i, t in enumerate(tools) if not reasons[order[i]]}
    alive = list(by_name)
    with tempfile.TemporaryDirectory(prefix="sopforge-distractor-tools-") as tmp:
        checker = RegistryCheck(Path(tmp), base, mixin, by_name, schema, graph, rows, ground_truth, limits)
        if alive:
            policy = _renamed(check_code(checker.merged(alive)))
            if any(not c.passed for c in policy):
                return tools, "", checks + [c.model_copy(update={"name": c.name.replace(
                    "distractors.code.policy", "distractors.code.merged_policy", 1),
                    "message": f"merged into tools.py: {c.message}"}) for c in policy]
        found = _probe_all(checker, alive)
        failed = {n: why for n, why in found.items() if why}
        alive = [n for n in alive if n not in failed]
        problem = checker.registry_problem(alive) if alive else ""
        while problem and alive:
            alone = {n: checker.registry_problem([n]) for n in alive}
            culprits = {n: why for n, why in alone.items() if why}
            if not culprits:  # only the combination breaks: none of them can be kept safely
                culprits = dict.fromkeys(alive, f"together with the other distractors: {problem}")
            failed.update(culprits)
            alive = [n for n in alive if n not in culprits]
            problem = checker.registry_problem(alive) if alive else ""
        kept_code = mixin.keep_only(alive)
    for i, tool in enumerate(tools):
        why = reasons[order[i]] or failed.get(tool.name, "")
        tool.kept, tool.reason = (tool.name in alive and not reasons[order[i]]), why
    kept = [t.name for t in tools if t.kept]
    checks.append(check("distractors.oracle_with_distractors", not problem,
                        problem or f"with {len(kept)} distractor tool(s) registered the oracle scores TSR 1.00 and "
                        "the reference procedure reproduces every task", kept=kept))
    return tools, kept_code, checks


def _probe_all(checker: RegistryCheck, names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    found = checker.probe(names)
    if found is not None:
        return found
    # The merged module did not load at all: find out which tools make it fail.
    result: dict[str, str] = {}
    for name in names:
        alone = checker.probe([name])
        result[name] = "tools.py no longer loads with it registered" if alone is None else alone[name]
    return result
