"""PROBE in ``sopforge eval``: the paper's task, its three metrics, baselines and the judges' agreement.

Through the family eval protocol (:mod:`sopforge.evaluation.protocol`):
- ``plan``: one item per exported sample for the evaluated model and for each baseline
  (:mod:`sopforge.families.probe.baselines`), and one per entry of the annotated judge set
  (``validation/probe_judge_agreement.json``) for the judges.
- ``run``: the model gets the paper's task (``prompts/probe/agent_task.j2``: the world model, the
  actions and the whole datastore, as in the paper's Table 3) and answers once. It is scored with
  the paper's metrics (L128-146): search precision, recall and F1 against the true positives; the
  T24 judge on the bottleneck it states (0 without a judge when it states none); 0 for a wrong
  action, else the T25 judge on its parameters (0 without a judge when it gives none). The judges run
  on ``--judge-model`` (default: the evaluated model). An answer that cannot be read is an item error
  and scores 0.
- ``report``: the metric table with every baseline beside the model, and the judges' agreement with
  the annotations (the paper: 80% human-LLM, 84% between humans, L150).
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sopforge.errors import ProviderError, UserError, ValidationFailed
from sopforge.evaluation.protocol import (
    AGENT_KINDS, EvalContext, EvalItem, EvalReport, EvalSpec, ItemRecord, ItemResult, MetricTable,
)
from sopforge.families.probe.asker import Asker
from sopforge.families.probe.baselines import BASELINES, baseline_answer, export_documents, export_world
from sopforge.families.probe.models.verdicts import IdentificationVerdict, ParameterVerdict
from sopforge.families.probe.models.world import parse_json_block
from sopforge.families.probe.verify.attacks import TASK_STATEMENT
from sopforge.families.probe.verify.judges import IDENTIFICATION_TEMPLATE, PARAMETERS_TEMPLATE, actions_text
from sopforge.families.probe.verify.scoring import identification_score, resolution_score, search_scores
from sopforge.llm.types import LLMClient
from sopforge.parsing import ParseError, extract_json, extract_tag, one_line

__all__ = ["AGENT_TEMPLATE", "AGREEMENT", "EVALUATION", "SUITE", "agent_prompt_params", "judge_set"]

SUITE, AGREEMENT, FAMILY = "probe", "judge_agreement", "probe"
AGENT_TEMPLATE = "probe/agent_task"
METRICS = ("precision", "recall", "f1", "identification", "resolution")


class AgentAction(BaseModel):
    function_name: str = Field("", description="The chosen action's id.")
    parameters: dict[str, Any] = Field(default_factory=dict)


class AgentAnswer(BaseModel):
    """The companion code's answer format (research/probe.md section 9)."""

    retrieved_documents: list[str] = Field(default_factory=list)
    bottleneck: str = ""
    action: AgentAction = Field(default_factory=AgentAction)


def _samples(ctx: EvalContext) -> dict[str, dict[str, Any]]:
    path = ctx.export_dir / "probe" / "samples.jsonl"
    if not path.exists():
        raise UserError(f"run {ctx.run_id} has no PROBE export ({path}); generate it with --family probe first")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["sample_id"]: r for r in records}


@cache
def _judge_set(path: Path) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(path.read_text(encoding="utf-8"))["items"])


def judge_set(project_root: Path) -> list[dict[str, Any]]:
    """The annotated judge-agreement items shipped with the repository."""
    return list(_judge_set(project_root / "validation" / "probe_judge_agreement.json"))


def plan(ctx: EvalContext) -> list[EvalItem]:
    samples = list(_samples(ctx))[: ctx.options.limit]
    items = [EvalItem(suite=SUITE, agent=agent, item_id=sid, payload={"sample_id": sid})
             for sid in samples for agent in (ctx.options.agent, *BASELINES)]
    items += [EvalItem(suite=AGREEMENT, agent="judge", item_id=entry["id"], payload=entry)
              for entry in judge_set(ctx.settings.project_root)]
    return items


def _key(ctx: EvalContext, item: EvalItem, turn: int) -> str:
    """The call key's item part for turn ``turn`` (the Asker adds the slug, stage and attempt)."""
    return ctx.call_key(FAMILY, item, turn).split("/", 2)[2]


def agent_prompt_params(record: dict[str, Any]) -> dict[str, str]:
    """The task prompt's parameters for an exported sample: what the evaluated model sees, nothing more."""
    world, actions = export_world(record)
    documents = "\n\n".join(f"<item id=\"{d['id']}\" type=\"{d['type']}\">\n{d['text']}\n</item>"
                            for d in record["agent_input"]["datastore"])
    return {"task_statement": TASK_STATEMENT, "world_model": world.to_prompt_text(), "actions": actions_text(actions),
            "documents": documents}


def _parse_answer(raw: str) -> tuple[AgentAnswer, list]:
    try:
        value = extract_json(extract_tag(raw, "answer"))
    except ParseError:  # no <answer> tags: the outermost JSON object of the text, as the paper's harness falls back
        start, end = raw.find("{"), raw.rfind("}")
        if start < 0 or end < start:
            raise ParseError("no JSON answer found (expected one object inside <answer></answer>)") from None
        value = extract_json(raw[start:end + 1])
    try:
        return AgentAnswer.model_validate(value), []
    except Exception as exc:  # a shape the format does not allow is the answer's fault, reported as the item's error
        raise ParseError(f"the answer is not the asked JSON object: {one_line(str(exc), 200)}") from exc


def _ask_agent(item: EvalItem, ctx: EvalContext, llm: LLMClient, record: dict[str, Any]) -> tuple[AgentAnswer, str]:
    settings = ctx.settings.model_copy(update={"max_tokens": ctx.options.max_tokens, "max_attempts": 1})
    asker = Asker("eval_probe", ctx.theme_slug, (AGENT_TEMPLATE,), llm=llm, settings=settings, model=ctx.options.model,
                  temperature=ctx.options.temperature)
    answer = asker.ask(_key(ctx, item, 1), AGENT_TEMPLATE, agent_prompt_params(record), _parse_answer, keep_checks=False)
    return answer, asker.last_raw


def _judge(ctx: EvalContext, llm: LLMClient) -> Asker:
    return Asker("eval_probe", ctx.theme_slug, (IDENTIFICATION_TEMPLATE, PARAMETERS_TEMPLATE), llm=llm,
                 settings=ctx.settings, model=ctx.options.judge_model or ctx.options.model, temperature=0)


def _score(item: EvalItem, ctx: EvalContext, llm: LLMClient, record: dict[str, Any],
           answer: AgentAnswer) -> tuple[dict[str, Any], dict[str, Any]]:
    truth = record["ground_truth"]
    world, _ = export_world(record)
    score: dict[str, Any] = dict(search_scores(answer.retrieved_documents, truth["true_positives"]))
    judged: dict[str, Any] = {}
    if answer.bottleneck.strip():
        verdict = identification_score(_judge(ctx, llm), _key(ctx, item, 2), world, answer.bottleneck,
                                       truth["bottleneck"]["description"])
        score["identification"], judged["identification"] = verdict.score, verdict.model_dump()
    else:
        score["identification"] = 0.0
    chosen = answer.action.function_name
    score["action_correct"] = chosen == truth["action"]
    if score["action_correct"] and answer.action.parameters:
        evidence = [d for d in export_documents(record) if d.id in truth["true_positives"]]
        verdict = resolution_score(_judge(ctx, llm), _key(ctx, item, 3), world, truth["bottleneck"]["description"],
                                   evidence, truth["action"], truth["expected_parameters"], chosen,
                                   answer.action.parameters)
        score["resolution"], judged["resolution"] = verdict.score, verdict.model_dump()
    else:
        score["resolution"] = 0.0
    return score, judged


def _agreement(item: EvalItem, ctx: EvalContext, llm: LLMClient) -> ItemResult:
    """Ask a judge about one annotated item and compare its label with the annotation."""
    entry, asker = item.payload, _judge(ctx, llm)
    if entry["judge"] == "identification":
        verdict = asker.ask(_key(ctx, item, 1), IDENTIFICATION_TEMPLATE, {
            key: str(entry[key]) for key in ("persona_name", "company_name", "department", "team_size",
                                             "actual_bottleneck", "identified_bottleneck")},
            lambda raw: (parse_json_block(raw, "verdict", IdentificationVerdict), []), keep_checks=False)
        label = {1.0: "CORRECT", 0.5: "PARTIALLY_CORRECT", 0.0: "INCORRECT"}[verdict.score()]
    else:
        verdict = asker.ask(_key(ctx, item, 1), PARAMETERS_TEMPLATE, {
            "bottleneck": entry["bottleneck"], "company_name": entry["company_name"], "department": entry["department"],
            "persona_name": entry["persona_name"], "relationships": entry["relationships"],
            "evidence": entry["evidence"], "action_id": entry["action_id"],
            "selected_parameters": json.dumps(entry["selected_parameters"], indent=2, ensure_ascii=False),
            "expected_parameters": json.dumps(entry["expected_parameters"], indent=2, ensure_ascii=False)},
            lambda raw: (parse_json_block(raw, "verdict", ParameterVerdict), []), keep_checks=False)
        label = verdict.judgment
    return ItemResult(output={"verdict": verdict.model_dump(), "raw_text": asker.last_raw},
                      score={"judge": entry["judge"], "annotation": entry["label"], "label": label,
                             "agree": label == entry["label"]})


def run(item: EvalItem, ctx: EvalContext, llm: LLMClient) -> ItemResult:
    """One item; a problem of the item (an unreadable answer, a refused call) is its error, never raised."""
    try:
        if item.suite == AGREEMENT:
            return _agreement(item, ctx, llm)
        record = _samples(ctx)[item.payload["sample_id"]]
        if item.agent in AGENT_KINDS:
            answer, raw = _ask_agent(item, ctx, llm, record)
        else:
            answer, raw = AgentAnswer.model_validate(baseline_answer(item.agent, record)), ""
        score, judged = _score(item, ctx, llm, record, answer)
        return ItemResult(output={"answer": answer.model_dump(), "raw_text": raw, "judges": judged}, score=score)
    except (ValidationFailed, ProviderError, ParseError) as exc:
        return ItemResult(error=one_line(str(exc), 300))


def _mean(records: list[ItemRecord], metric: str) -> float:
    return round(statistics.fmean(float(r.score.get(metric, 0.0)) if not r.error else 0.0 for r in records), 3)


def report(records: list[ItemRecord], ctx: EvalContext) -> EvalReport:
    """The paper's Table 3 metrics per agent (the model first, then each baseline), and the judges' agreement."""
    report = EvalReport()
    samples = [r for r in records if r.suite == SUITE]
    agents = list(dict.fromkeys([a for a in AGENT_KINDS if any(r.agent == a for r in samples)] + list(BASELINES)))
    rows, facts = [], {}
    for agent in agents:
        mine = [r for r in samples if r.agent == agent]
        if not mine:
            continue
        means = {m: _mean(mine, m) for m in METRICS}
        facts[agent] = {**means, "samples": len(mine), "errors": sum(1 for r in mine if r.error)}
        rows.append([agent, str(len(mine)), *(f"{means[m]:.2f}" for m in METRICS), str(facts[agent]["errors"])])
    report.tables.append(MetricTable(
        title="PROBE (Table 3 metrics, mean over samples): search precision, recall, F1; bottleneck identification "
              "(T24); task execution (right action, then T25 on its parameters)",
        columns=["agent", "samples", "search P", "search R", "search F1", "identification", "resolution", "errors"],
        rows=rows))
    agreement = [r for r in records if r.suite == AGREEMENT and not r.error]
    if agreement:
        table = []
        for judge in ("identification", "parameters"):
            mine = [r for r in agreement if r.score.get("judge") == judge]
            if mine:
                share = sum(bool(r.score["agree"]) for r in mine) / len(mine)
                facts[f"judge_agreement_{judge}"] = round(share, 3)
                table.append([judge, str(len(mine)), f"{share:.0%}", "80% (human-LLM, both judges, L150)"])
        report.tables.append(MetricTable(title="PROBE judges against the annotated set "
                                               "(validation/probe_judge_agreement.json)",
                                         columns=["judge", "items", "agreement", "paper"], rows=table))
    report.facts = facts
    return report


EVALUATION = EvalSpec(plan=plan, run=run, report=report, suites=(SUITE, AGREEMENT))
