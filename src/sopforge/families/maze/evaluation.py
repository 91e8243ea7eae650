"""SOP-Maze in ``sopforge eval``: the paper's four-part prompt, its scorer, its LRS/HRS/overall tables.

The evaluated model gets exactly the exported ``input`` of a subtask (【Background】【Requirements】
【Input】【Output Requirement】, L56-64: the objective, the messy SOP, the dialogue up to one user turn,
the JSON schema) as one user message and must answer with one JSON object. The family's scorer gives
1.0 / 0.2 / 0 (L97, L112). No tools: SOP-Maze is single-turn and text-only (digest §1).

Two suites:

* ``subtasks``: every input-target pair along the dialogues (Appendix B.2), for the model and the two
  shortcuts that read nothing (``majority``, leave-one-out over the other dialogues' subtasks, and
  ``first_option``);
* ``finals``: each dialogue's last pair, for the four shortcuts of the ``maze_baselines`` stage
  (``majority``, ``first_turn``, ``last_turn``, ``first_option``); the model's score there is read
  from its ``subtasks`` items, so it costs no call.

The report prints, per agent, the paper's aggregates (Tables 3-5): per-scenario score x100, LRS and
HRS as the unweighted mean of their scenarios, the overall instance-weighted and as (HRS+LRS)/2, and
the 1.0 / 0.2 / 0 counts of Table 1.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from sopforge.errors import ResponsePending, UserError
from sopforge.evaluation.protocol import EvalContext, EvalItem, EvalReport, EvalSpec, ItemRecord, ItemResult, MetricTable
from sopforge.families.maze.export.files import FOLDER
from sopforge.families.maze.models.baselines import BASELINES
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario
from sopforge.families.maze.verify.scorer import FORMAT_CREDIT, score_answer
from sopforge.families.maze.verify.shortcuts import answer_key, first_option_answer
from sopforge.llm.types import LLMClient, LLMRequest, Message

__all__ = ["EVALUATION", "SUITES", "plan", "report", "run"]

FAMILY = "maze"
SUITES = ("subtasks", "finals")
SUBTASK_BASELINES = ("majority", "first_option")
_lock = threading.Lock()
_cache: dict[Path, dict[str, Any]] = {}


def _export(ctx: EvalContext) -> dict[str, Any]:
    """The export's subtasks by id and its scenarios by name, read once per process.

    Raises:
        UserError: the run has no SOP-Maze export (or one without subtasks) to evaluate.
    """
    folder = (ctx.export_dir / FOLDER).resolve()
    with _lock:
        if folder not in _cache:
            path = folder / "subtasks.jsonl"
            if not path.is_file():
                raise UserError(f"{path} is missing: the run has no SOP-Maze subtasks to evaluate; generate with "
                                "--family maze, or re-export with `sopforge rerun RUN --from maze_package`")
            subtasks = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            scenarios = {}
            for scenario_file in folder.glob("*/scenario.json"):
                content = json.loads(scenario_file.read_text(encoding="utf-8"))
                model = HRSScenario if content.get("kind") == "HRS" else LRSScenario
                scenarios[content["name"]] = model.model_validate(content)
            _cache[folder] = {"subtasks": {s["id"]: s for s in subtasks}, "order": [s["id"] for s in subtasks],
                              "scenarios": scenarios}
        return _cache[folder]


def _majority_by_instance(subtasks: list[dict[str, Any]], constant: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Subtask id -> the most frequent target among the *other* dialogues' subtasks of its scenario."""
    guesses = {}
    for sub in subtasks:
        others = [s["target"] for s in subtasks if s["scenario"] == sub["scenario"] and s["instance"] != sub["instance"]]
        counts = Counter(answer_key(t) for t in others)
        guesses[sub["id"]] = next((t for t in others if counts[answer_key(t)] == max(counts.values())),
                                  constant[sub["scenario"]])
    return guesses


def plan(ctx: EvalContext) -> list[EvalItem]:
    """The model on every subtask (the first ``--limit`` ones), the shortcuts beside it."""
    export = _export(ctx)
    subtasks = [export["subtasks"][i] for i in export["order"]][:ctx.options.limit or None]
    constant = {name: first_option_answer(s) for name, s in export["scenarios"].items()}
    items = [EvalItem(suite="subtasks", agent=ctx.options.agent, item_id=s["id"]) for s in subtasks]
    majority = _majority_by_instance(subtasks, constant)
    for s in subtasks:
        items.append(EvalItem(suite="subtasks", agent="majority", item_id=s["id"], payload={"answer": majority[s["id"]]}))
        items.append(EvalItem(suite="subtasks", agent="first_option", item_id=s["id"],
                              payload={"answer": constant[s["scenario"]]}))
    finals = [s for s in subtasks if s["final"]]
    shortcuts = ctx.stage_content("maze_baselines") or {}
    answers: dict[str, dict[str, Any]] = defaultdict(dict)   # shortcut -> instance -> answer
    for scenario in shortcuts.get("scenarios", []):
        for result in scenario.get("results", []):
            answers[result["name"]].update(result.get("answers", {}))
    for s in finals:
        for name in BASELINES:
            answer = answers.get(name, {}).get(s["instance"])
            if answer is None and name == "first_option":
                answer = constant[s["scenario"]]
            if answer is not None:
                items.append(EvalItem(suite="finals", agent=name, item_id=s["id"], payload={"answer": answer}))
    return items


def _score(sub: dict[str, Any], answer: str | dict[str, Any]) -> dict[str, Any]:
    scored = score_answer(answer, sub["target"], sub["json_schema"], sub.get("no_required_eval_acc_keys") or [])
    return {"score": scored.score, "valid": scored.valid, "reason": scored.reason, "fields": scored.fields,
            "scenario": sub["scenario"], "kind": sub["kind"], "instance": sub["instance"], "final": sub["final"]}


def run(item: EvalItem, ctx: EvalContext, llm: LLMClient) -> ItemResult:
    """One subtask for the model (one call: the exported four-part prompt) or a shortcut (no call)."""
    sub = _export(ctx)["subtasks"].get(item.item_id)
    if sub is None:
        return ItemResult(error=f"subtask {item.item_id} is not in the export")
    if "answer" in item.payload:
        return ItemResult(output={"answer": item.payload["answer"]}, score=_score(sub, item.payload["answer"]))
    request = LLMRequest(messages=[Message(role="user", content=sub["input"])], model=ctx.options.model,
                         temperature=ctx.options.temperature, max_tokens=ctx.options.max_tokens,
                         call_key=ctx.call_key(FAMILY, item, 1), stage=f"eval_{FAMILY}")
    try:
        text = llm.complete(request).text
    except ResponsePending:
        raise
    except Exception as error:  # the model could not be asked: scored 0, as an answer outside the schema
        return ItemResult(score={**_score(sub, ""), "reason": "no answer"},
                          error=f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}")
    score = _score(sub, text)
    return ItemResult(output={"text": text}, score=score,
                      error=None if score["valid"] else f"answer scores 0: {score['reason'][:300]}")


def _aggregate(scored: list[dict[str, Any]]) -> dict[str, Any]:
    """The paper's aggregates over item scores (each with scenario, kind and score)."""
    by_scenario: dict[str, list[float]] = defaultdict(list)
    kinds = {}
    for s in scored:
        by_scenario[s["scenario"]].append(s["score"])
        kinds[s["scenario"]] = s["kind"]
    per_scenario = {n: 100 * sum(v) / len(v) for n, v in by_scenario.items()}
    macro = {k: [v for n, v in per_scenario.items() if kinds[n] == k] for k in ("LRS", "HRS")}
    lrs = sum(macro["LRS"]) / len(macro["LRS"]) if macro["LRS"] else None
    hrs = sum(macro["HRS"]) / len(macro["HRS"]) if macro["HRS"] else None
    scores = [s["score"] for s in scored]
    return {"per_scenario": per_scenario, "lrs": lrs, "hrs": hrs,
            "overall": 100 * sum(scores) / len(scores) if scores else None,
            "kind_mean": (lrs + hrs) / 2 if lrs is not None and hrs is not None else None,
            "counts": {"1.0": scores.count(1.0), "0.2": scores.count(FORMAT_CREDIT), "0": scores.count(0.0)},
            "items": len(scores)}


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def report(records: list[ItemRecord], ctx: EvalContext) -> EvalReport:
    """Per agent: per-scenario, LRS, HRS and overall scores x100 and the 1.0/0.2/0 counts, on every subtask and on
    the dialogues' final answers, the shortcuts beside the model."""
    model = ctx.options.agent
    sub_rows = {a: [r.score for r in records if r.suite == "subtasks" and r.agent == a and r.score]
                for a in (model, *SUBTASK_BASELINES)}
    final_rows = {model: [s for s in sub_rows[model] if s.get("final")]}
    final_rows.update({a: [r.score for r in records if r.suite == "finals" and r.agent == a and r.score]
                       for a in BASELINES})
    scenarios = sorted({s["scenario"] for rows in sub_rows.values() for s in rows})
    tables: list[MetricTable] = []
    facts: dict[str, Any] = {"model": ctx.options.model, "subtasks": {}, "finals": {}}
    for suite, rows, title in (
            ("subtasks", sub_rows, "SOP-Maze, every subtask (input-target pairs along the dialogues, Appendix B.2): "
                                   "scores x100 as Tables 3-5, 1.0/0.2/0 counts as Table 1"),
            ("finals", final_rows, "SOP-Maze, each dialogue's final answer: the model beside the four shortcuts "
                                   "(format-only credit 20)")):
        table = MetricTable(title=title, columns=["agent", "LRS", "HRS", "overall", "(HRS+LRS)/2", "1.0 / 0.2 / 0",
                                                  "items", *scenarios])
        for agent, scored in rows.items():
            if not scored:
                continue
            agg = _aggregate(scored)
            facts[suite][agent] = agg
            counts = agg["counts"]
            table.rows.append([agent if agent != model else f"{ctx.options.model} ({agent})", _cell(agg["lrs"]),
                               _cell(agg["hrs"]), _cell(agg["overall"]), _cell(agg["kind_mean"]),
                               f"{counts['1.0']} / {counts['0.2']} / {counts['0']}", str(agg["items"]),
                               *(_cell(agg["per_scenario"].get(n)) for n in scenarios)])
        tables.append(table)
    return EvalReport(tables=tables, facts=facts)


EVALUATION = EvalSpec(plan=plan, run=run, report=report, suites=SUITES)
