"""The sop_tools report: each paper's metrics, a row per agent (the model's first, then every baseline).

* SOP-Bench (per suite: the base run and each ablation): n, ECR = n_c/n, C-TSR = n_a/n_c,
  TSR = n_a/n with the paper's lenient matcher, strict TSR (exact match after normalisation), then
  the trajectory scorer's final state, order and full success (strict outputs, final state and order
  together), tool-call accuracy (calls that returned / calls), tasks with a forbidden write and mean
  unnecessary calls.
* TELLER Stage 2, from the same trajectories: Acc (exact final decisions), P/R/F1 of the invoked
  API set, and the error taxonomy (blank: no call; validation: refused by the schema; type: raised).
* TELLER Stage 1: node and edge P/R/F1.
* TOD-ProcBench: task 1 retrieval / next action / overall; task 2 accuracy and F1 (violating as
  positive), per manipulation type; task 3 share judged compliant.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sopforge.evaluation.protocol import EvalContext, EvalReport, ItemRecord, MetricTable
from sopforge.families.sop_tools.evaluation.common import f1
from sopforge.families.sop_tools.evaluation.sop_bench import SUITE as SOP_SUITE

__all__ = ["report"]


def _share(n: int | float, of: int) -> float | None:
    return round(n / of, 4) if of else None


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _by(records: list[ItemRecord], model_agent: str) -> dict[str, dict[str, list[ItemRecord]]]:
    """suite -> agent -> records, agents ordered model first, then as planned."""
    grouped: dict[str, dict[str, list[ItemRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        grouped[r.suite][r.agent].append(r)
    for suite, agents in grouped.items():
        grouped[suite] = dict(sorted(agents.items(), key=lambda kv: (kv[0] != model_agent, kv[0] != "no_tools")))
    return grouped


def _sop_bench(agent: str, rows: list[ItemRecord]) -> dict[str, Any]:
    n = len(rows)
    s = [r.score for r in rows]
    completed = sum(bool(x.get("completed")) for x in s)
    lenient = sum(bool(x.get("outputs_lenient")) for x in s)
    stateful = [x for x in s if x.get("state_correct") is not None]
    calls = sum(x.get("calls", 0) for x in s)
    return {"agent": agent, "n": n, "ecr": _share(completed, n), "c_tsr": _share(lenient, completed),
            "tsr": _share(lenient, n), "strict_tsr": _share(sum(bool(x.get("outputs_strict")) for x in s), n),
            "final_state": _share(sum(bool(x.get("state_correct")) for x in stateful), len(stateful)),
            "order": _share(sum(bool(x.get("order_ok")) for x in s), n),
            "success": _share(sum(bool(x.get("success")) for x in s), n),
            "tool_call_accuracy": _share(sum(x.get("calls_ok", 0) for x in s), calls),
            "forbidden_write_tasks": sum(bool(x.get("forbidden_writes")) for x in s),
            "mean_unnecessary_calls": round(sum(x.get("unnecessary_calls", 0) for x in s) / n, 2) if n else None,
            "errors": sum(bool(r.error) for r in rows)}


def _teller_exec(agent: str, rows: list[ItemRecord]) -> dict[str, Any]:
    n = len(rows)
    s = [r.score for r in rows]
    precision = sum(x.get("api_set", {}).get("precision", 0) for x in s) / n if n else 0.0
    recall = sum(x.get("api_set", {}).get("recall", 0) for x in s) / n if n else 0.0
    calls = sum(x.get("calls", 0) for x in s)
    return {"agent": agent, "n": n, "acc": _share(sum(bool(x.get("outputs_strict")) for x in s), n),
            "api_precision": round(precision, 4), "api_recall": round(recall, 4), "api_f1": f1(precision, recall),
            "blank": _share(sum(bool(x.get("blank")) for x in s), n),
            "validation_errors": _share(sum(x.get("validation_errors", 0) for x in s), calls),
            "type_errors": _share(sum(x.get("type_errors", 0) for x in s), calls)}


def _graph(agent: str, rows: list[ItemRecord]) -> dict[str, Any]:
    score = rows[0].score if rows else {}
    nodes, edges = score.get("nodes", {}), score.get("edges", {})
    return {"agent": agent, "node_p": nodes.get("precision"), "node_r": nodes.get("recall"), "node_f1": nodes.get("f1"),
            "edge_p": edges.get("precision"), "edge_r": edges.get("recall"), "edge_f1": edges.get("f1"),
            "error": rows[0].error if rows else None}


def _task1(agent: str, rows: list[ItemRecord]) -> dict[str, Any]:
    n = len(rows)
    return {"agent": agent, "n": n, **{k: _share(sum(bool(r.score.get(k)) for r in rows), n)
                                       for k in ("retrieval", "next_action", "overall")}}


def _task2(agent: str, rows: list[ItemRecord]) -> dict[str, Any]:
    n = len(rows)
    tp = sum(r.score.get("label") == "violating" and r.score.get("predicted") == "violating" for r in rows)
    fp = sum(r.score.get("label") == "compliant" and r.score.get("predicted") == "violating" for r in rows)
    fn = sum(r.score.get("label") == "violating" and r.score.get("predicted") != "violating" for r in rows)
    by_type: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        by_type[str(r.score.get("type"))].append(bool(r.score.get("correct")))
    return {"agent": agent, "n": n, "accuracy": _share(sum(bool(r.score.get("correct")) for r in rows), n),
            "f1_violating": f1(tp / (tp + fp) if tp + fp else 0.0, tp / (tp + fn) if tp + fn else 0.0),
            "unparsed": sum(r.score.get("predicted") is None for r in rows),
            "by_type": {t: _share(sum(v), len(v)) for t, v in sorted(by_type.items())}}


def _task3(agent: str, rows: list[ItemRecord]) -> dict[str, Any]:
    n = len(rows)
    return {"agent": agent, "n": n, "compliance_rate": _share(sum(bool(r.score.get("compliant")) for r in rows), n),
            "unparsed": sum(not r.score.get("parsed") for r in rows)}


_TABLES = {
    "sop_bench": ("SOP-Bench {suite}: ECR, C-TSR, TSR (lenient matcher, as the paper) and strict TSR; final state, "
                  "order and full success by the trajectory scorer", _sop_bench,
                  ("agent", "n", "ecr", "c_tsr", "tsr", "strict_tsr", "final_state", "order", "success",
                   "tool_call_accuracy", "forbidden_write_tasks", "mean_unnecessary_calls", "errors")),
    "teller_exec": ("TELLER Stage 2 on {suite}: exact final decisions, invoked-API set P/R/F1, error taxonomy "
                    "(blank tasks; validation and type errors per call)", _teller_exec,
                    ("agent", "n", "acc", "api_precision", "api_recall", "api_f1", "blank", "validation_errors",
                     "type_errors")),
    "teller_graph": ("TELLER Stage 1: API dependency graph reconstruction, node and edge P/R/F1", _graph,
                     ("agent", "node_p", "node_r", "node_f1", "edge_p", "edge_r", "edge_f1", "error")),
    "tod_task1": ("TOD-ProcBench task 1: relevant conditions (top 2), next action, overall", _task1,
                  ("agent", "n", "retrieval", "next_action", "overall")),
    "tod_task2": ("TOD-ProcBench task 2: compliance classification on the balanced set (accuracy; F1 of violating)",
                  _task2, ("agent", "n", "accuracy", "f1_violating", "unparsed", "by_type")),
    "tod_task3": ("TOD-ProcBench task 3: next response judged compliant by the LLM judge", _task3,
                  ("agent", "n", "compliance_rate", "unparsed")),
}


# Short column headers so the tables fit a terminal; the facts keep the long names.
_HEADERS = {"ecr": "ECR", "c_tsr": "C-TSR", "tsr": "TSR", "strict_tsr": "strict TSR", "final_state": "state",
            "tool_call_accuracy": "tool acc", "forbidden_write_tasks": "forbidden", "mean_unnecessary_calls": "extra calls",
            "api_precision": "API P", "api_recall": "API R", "api_f1": "API F1", "validation_errors": "validation",
            "type_errors": "type", "node_p": "node P", "node_r": "node R", "node_f1": "node F1", "edge_p": "edge P",
            "edge_r": "edge R", "edge_f1": "edge F1", "next_action": "next action", "f1_violating": "F1 violating",
            "by_type": "accuracy by manipulation", "compliance_rate": "compliant"}


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items())
    text = _fmt(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _table(kind: str, suite: str, agents: dict[str, list[ItemRecord]]) -> tuple[MetricTable, list[dict[str, Any]]]:
    title, fn, columns = _TABLES[kind]
    facts = [fn(agent, rows) for agent, rows in agents.items()]
    rows = [[_cell(f.get(c)) for c in columns] for f in facts]
    return MetricTable(title=title.format(suite=suite), columns=[_HEADERS.get(c, c) for c in columns], rows=rows), facts


def report(records: list[ItemRecord], ctx: EvalContext) -> EvalReport:
    """The family's tables (see the module docstring) and the same figures as facts."""
    grouped = _by(records, ctx.options.agent)
    out = EvalReport()
    for suite in sorted(grouped, key=lambda s: (not s.startswith(SOP_SUITE), s != SOP_SUITE, s)):
        agents = grouped[suite]
        if suite.startswith(SOP_SUITE):
            kinds = ["sop_bench", "teller_exec"]
        elif suite in _TABLES:
            kinds = [suite]
        else:
            continue
        for kind in kinds:
            table, facts = _table(kind, suite, agents)
            out.tables.append(table)
            out.facts.setdefault(suite if kind != "teller_exec" else f"{suite}.teller_exec", facts)
    return out
