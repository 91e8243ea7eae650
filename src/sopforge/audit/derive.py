"""``--derive-reference``: labels checked against the SOP when the folder ships no reference procedure.

A model writes ``run_procedure(manager, case)`` from ``sop.txt``, the toolspecs and ``tools.py``
(template ``teller/derive_reference``; it never sees the CSV's labels, only the values each
output column takes). Every call goes through the gateway, so it is recorded and replayable
like any other (call key ``audit/<folder>/derive_reference/d<n>/a<attempt>``). Each derivation
runs in the sandbox on every row, its tools in a process of their own. Per row, the verdict:

* **agrees**: every derivation that ran returns the CSV's labels;
* **contradicts**: every derivation ran, they agree with each other, and not with the CSV (an
  error, reported with the SOP clause each derivation names and the tool calls it made); with a
  single derivation a contradiction is only a warning, since one model's reading is not proof;
* **undecidable**: a derivation raised, or the derivations disagree with each other.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from pydantic import BaseModel, Field

from sopforge.ask import ask_until_valid
from sopforge.audit.checks_data import shown
from sopforge.audit.loader import REFERENCE_FILE, FolderContents
from sopforge.audit.values import cell_matches
from sopforge.checks import CheckResult, check
from sopforge.llm.types import LLMClient
from sopforge.parsing import extract_tag, strip_code_fence
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.pyast import parse_python
from sopforge.sandbox import CallOutcome, SandboxLimits, check_code, run_in_sandbox
from sopforge.settings import Settings

__all__ = ["TEMPLATE_ID", "DerivedProcedure", "derive_procedures", "judge_derivations", "run_derivations"]

TEMPLATE_ID = "teller/derive_reference"
STAGE = "derive_reference"
_EXAMPLES = 5
_MAX_VALUES = 12


class DerivedProcedure(BaseModel):
    """One model-written reference procedure."""

    derivation: int = Field(description="1, 2, ...: which independent derivation.")
    code: str = Field(description="The module's source (defines run_procedure(manager, case)).")


def _render_inputs(c: FolderContents) -> dict[str, str]:
    inputs = [col for col in c.input_columns if col in c.header]
    example = {col: c.records[0][col] for col in inputs} if c.records else {}
    outputs = []
    for col in c.output_columns:
        if col in c.header:
            values = list(dict.fromkeys(r[col].strip() for r in c.records))[:_MAX_VALUES]
            outputs.append(f"- {col}: " + ", ".join(json.dumps(v) for v in values))
    return {
        "sop_file_contents": c.sop_text or "",
        "toolspecs": json.dumps(c.toolspecs, indent=1, ensure_ascii=False),
        "tool_code": c.tools_source or "",
        "input_columns": "\n".join(f"- {col}" for col in inputs)
                         + f"\nExample case, exactly as run_procedure receives it: {json.dumps(example, ensure_ascii=False)}",
        "output_columns": "\n".join(outputs),
    }


def _parse(derivation: int):
    def parse_and_check(text: str) -> tuple[DerivedProcedure, list[CheckResult]]:
        code = strip_code_fence(extract_tag(text, "code"))
        checks = [r.model_copy(update={"name": r.name.replace("tools.policy", "derived.policy", 1)})
                  for r in check_code(code, mode="published")]
        try:
            tree = parse_python(code)
            defines = any(isinstance(n, ast.FunctionDef) and n.name == "run_procedure" for n in tree.body)
        except (SyntaxError, ValueError):
            defines = False
        checks.append(check("derived.defines_run_procedure", defines,
                            "the module defines run_procedure(manager, case) at module level" if defines
                            else "define def run_procedure(manager, case): at module level"))
        return DerivedProcedure(derivation=derivation, code=code), checks
    return parse_and_check


def derive_procedures(c: FolderContents, *, llm: LLMClient, settings: Settings, model: str, count: int = 2,
                      temperature: float = 0.7, registry: PromptRegistry | None = None) -> list[DerivedProcedure]:
    """Ask ``count`` independent derivations of the reference procedure (re-asked on policy or parse failures).

    Raises:
        ValidationFailed: a derivation never produced an acceptable module.
        ProviderError, ResponsePending: from the gateway, unchanged (an exchange waits for its answer).
    """
    registry = registry or default_registry(settings)
    params = _render_inputs(c)
    folder = c.path.name or "folder"
    out = []
    for n in range(1, count + 1):
        rendered = registry.render(TEMPLATE_ID, derivation=str(n), **params)
        result = ask_until_valid(llm, rendered, parse_and_check=_parse(n), stage=STAGE,
                                 call_key_prefix=f"audit/{folder}/{STAGE}/d{n}", settings=settings, model=model,
                                 temperature=temperature)
        out.append(result.artifact)
    return out


def run_derivations(c: FolderContents, procedures: list[DerivedProcedure], *, limits: SandboxLimits | None,
                    skip_policy: bool = False) -> list[list[CallOutcome] | str]:
    """Run each procedure on every row's input columns; per procedure its outcomes, or why its process failed."""
    inputs = [col for col in c.input_columns if col in c.header]
    calls = [{"args": [{col: r[col] for col in inputs}]} for r in c.records]
    runs: list[list[CallOutcome] | str] = []
    for p in procedures:
        result = run_in_sandbox(c.path, REFERENCE_FILE, {"op": "run_function", "function": "run_procedure",
                                                         "calls": calls, "tools_entry": "tools.py"},
                                limits=limits, extra_files={REFERENCE_FILE: p.code}, policy_mode="published",
                                skip_policy=skip_policy)
        outcomes: list[CallOutcome] = result.results  # type: ignore[assignment]
        runs.append(outcomes if result.ok or len(outcomes) == len(calls)
                    else f"{result.error_kind}: {result.error_message}"[:300])
    return runs


def _answers(outcome: CallOutcome | None, outputs: list[str]) -> dict[str, Any] | None:
    if outcome is None or not outcome.ok or not isinstance(outcome.result, dict):
        return None
    if any(col not in outcome.result for col in outputs):
        return None
    return outcome.result


def judge_derivations(c: FolderContents, runs: list[list[CallOutcome] | str]) -> list[CheckResult]:
    """Per row: agrees, contradicts (with clause and tool calls) or undecidable; see the module docstring."""
    outputs = [col for col in c.output_columns if col in c.header]
    failed = [f"derivation {i + 1}: {r}" for i, r in enumerate(runs) if isinstance(r, str)]
    usable = [r for r in runs if not isinstance(r, str)]
    if not usable or not outputs:
        return [check("labels.derived_reference", False, "no derived reference procedure ran: "
                      + ("; ".join(failed) or "the folder has no output column in its CSV"), severity="warning")]
    agrees, contradicts, undecidable = [], [], []
    for task, record in enumerate(c.records):
        answers = [_answers(r[task] if task < len(r) else None, outputs) for r in usable]
        if any(a is None for a in answers) or len(usable) < len(runs):
            why = next((r[task].error.message[:120] for r in usable if task < len(r) and r[task].error), "")
            undecidable.append({"task": task, "why": why or "a derivation did not answer"})
            continue
        differ = [col for col in outputs if not cell_matches(answers[0][col], record[col], casefold=True)]
        consistent = all(all(cell_matches(a[col], str(answers[0][col]), casefold=True) for col in outputs)
                         for a in answers[1:])
        if not consistent:
            undecidable.append({"task": task, "why": "the derivations disagree: " + "; ".join(
                f"{col} {[a[col] for a in answers]}" for col in outputs)})
        elif not differ:
            agrees.append(task)
        else:
            first = usable[0][task]
            clauses = answers[0].get("sop_clause") if isinstance(answers[0].get("sop_clause"), dict) else {}
            contradicts.append({
                "task": task, "columns": {col: {"csv": record[col], "derived": answers[0][col]} for col in differ},
                "clause": {col: str(clauses.get(col, ""))[:300] for col in differ},
                "tool_calls": [{"tool": t.tool, "input": t.input, "ok": t.ok} for t in (first.tool_calls or [])][:20]})
    severity = "error" if len(usable) >= 2 and not failed else "warning"
    ids = [x["task"] for x in contradicts]
    message = (f"{len(ids)} of {len(c.records)} row(s) have labels that contradict the SOP as {len(usable)} independent "
               f"derivation(s) read it (ids {shown(ids, 20)}): " + "; ".join(
                   f"task {x['task']} " + ", ".join(f"{col}: CSV {v['csv']!r}, SOP {v['derived']!r}"
                                                    for col, v in x["columns"].items())
                   + (f" per {next(iter(x['clause'].values()))!r}" if any(x["clause"].values()) else "")
                   + " after " + ", ".join(t["tool"] for t in x["tool_calls"])
                   for x in contradicts[:_EXAMPLES])
               if contradicts else f"{len(agrees)} row(s) agree with the SOP as derived")
    out = [check("labels.derived_reference", not contradicts, message, severity=severity, tasks=ids,
                 agrees=agrees, contradicts=contradicts, undecidable=undecidable, derivations=len(runs),
                 failed=failed)]
    if undecidable or failed:
        out.append(check("labels.derived_undecidable", True,
                         f"{len(undecidable)} row(s) undecidable (a derivation raised, or they disagree): "
                         + "; ".join(f"task {u['task']}: {u['why']}" for u in undecidable[:_EXAMPLES])
                         + ("; " + "; ".join(failed) if failed else ""),
                         tasks=[u["task"] for u in undecidable]))
    return out
