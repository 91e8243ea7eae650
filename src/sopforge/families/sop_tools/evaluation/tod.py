"""TOD-ProcBench tasks 1-3 in ``sopforge eval`` (research/tod_procbench.md §5).

* ``tod_task1``: from a dialogue's prefix (ending with a customer turn) and the instruction
  document with statement ids, name the next action and the two most relevant conditions. Scored
  as the paper does: retrieval (the gold section among the two), next action (one of the actions
  the gold agent turn carries out), overall (both).
* ``tod_task2``: the balanced compliance set: is this response compliant with the policy?
  Accuracy and F1 (violating as the positive class), per manipulation type too.
* ``tod_task3``: write the next compliant agent response; an LLM judge (the task 2 prompt, the
  evaluated model unless ``--judge-model``) decides compliance; the share judged compliant.

Task 1 and task 3 instances come from the run's dialogues; an export written before they were
exported gets them appended to its ``tod_procbench.jsonl`` (``task1_item``, ``task3_item`` records).

Baselines: task 1 ``empty``, ``majority`` (the most common gold action and section), ``label_soup``
(every statement id at once, read strictly: the first id is the action); task 2 ``empty``,
``majority_label`` (always "compliant": 0.5 on the balanced set) and ``label_soup`` ("yes no",
which a strict reader refuses); task 3 ``empty`` (no response: non-compliant without asking the judge).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from sopforge.errors import ResponsePending
from sopforge.evaluation.protocol import EvalContext, EvalItem, ItemResult
from sopforge.families.sop_tools.evaluation.common import first_message, last_tag, request_factory
from sopforge.families.sop_tools.export.hardening import TOD_JSONL, dialogue_records
from sopforge.families.sop_tools.models.instructions import render_f1_with_ids
from sopforge.families.sop_tools.models.manipulations import ManipulationSet
from sopforge.llm.types import LLMClient

__all__ = ["BASELINES", "SUITES", "conversation_lines", "plan", "run", "task_records"]

SUITES = ("tod_task1", "tod_task2", "tod_task3")
BASELINES = {"tod_task1": ("empty", "majority", "label_soup"), "tod_task2": ("empty", "majority_label", "label_soup"),
             "tod_task3": ("empty",)}
TEMPLATES = {"tod_task1": "tod_procbench/task1_next_action", "tod_task2": "tod_procbench/task2_compliance",
             "tod_task3": "tod_procbench/task3_response"}
_ID = re.compile(r"^[\w.]+$")


def conversation_lines(prefix: list[str]) -> str:
    """``turn N: role: text`` lines, as the paper's task prompts number them (0-based)."""
    return "\n".join(f"turn {i}: {line}" for i, line in enumerate(prefix))


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def task_records(ctx: EvalContext) -> list[dict[str, Any]]:
    """Every record of the export's tod_procbench.jsonl, task 1 and 3 items added (and written) when missing.

    Raises:
        LookupError: The export has no instruction document (the family's manipulations made none).
    """
    path = ctx.export_dir / TOD_JSONL
    records = _read(path)
    if not any(r.get("record_type") == "instruction_document" for r in records):
        raise LookupError(f"{path} holds no instruction document: the run made no TOD-ProcBench items")
    if not any(r.get("record_type") in ("task1_item", "task3_item") for r in records):
        content = ctx.stage_content("manipulations")
        if content is not None:
            benchmark = records[0].get("benchmark", ctx.theme_slug)
            extra = dialogue_records(ManipulationSet.model_validate(content), benchmark, ctx.run_id)
            if extra:
                tmp = path.with_suffix(".tmp")
                tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records + extra), encoding="utf-8")
                tmp.replace(path)
                records += extra
    return records


def plan(ctx: EvalContext) -> list[EvalItem]:
    """Items of the three TOD-ProcBench suites (LookupError when the export has none)."""
    records = task_records(ctx)
    limit = ctx.options.limit
    task1 = [r for r in records if r.get("record_type") == "task1_item"][:limit]
    task3 = [r for r in records if r.get("record_type") == "task3_item"][:limit]
    pairs = list(dict.fromkeys(r["pair_id"] for r in records if r.get("record_type") == "compliance_item"))[:limit]
    task2 = [r for r in records if r.get("record_type") == "compliance_item" and r["pair_id"] in pairs]
    items = []
    for suite, chosen, key in (("tod_task1", task1, "item_id"), ("tod_task2", task2, None), ("tod_task3", task3, "item_id")):
        for record in chosen:
            item_id = record[key] if key else f"{record['pair_id']}:{record['label']}"
            items += [EvalItem(suite=suite, agent=agent, item_id=item_id)
                      for agent in (ctx.options.agent, *BASELINES[suite])]
    return items


def _record(ctx: EvalContext, item: EvalItem) -> tuple[dict[str, Any], dict[str, Any]]:
    records = task_records(ctx)
    document = next(r for r in records if r.get("record_type") == "instruction_document")
    if item.suite == "tod_task2":
        found = next(r for r in records if r.get("record_type") == "compliance_item"
                     and f"{r['pair_id']}:{r['label']}" == item.item_id)
    else:
        kind = "task1_item" if item.suite == "tod_task1" else "task3_item"
        found = next(r for r in records if r.get("record_type") == kind and r["item_id"] == item.item_id)
    return document, found


def _ask(llm: LLMClient, ctx: EvalContext, item: EvalItem, template: str, turn: int | str,
         model: str | None = None, **params: Any) -> str:
    request = request_factory(ctx, item, template, model=model)
    return llm.complete(request(turn, [first_message(ctx, template, **params)], None)).text


def _verdict(text: str | None) -> str | None:
    value = (last_tag(text or "", "compliant") or "").strip().lower().rstrip(".")
    return {"yes": "compliant", "no": "violating"}.get(value)


def _task1_answer(text: str | None) -> tuple[str, list[str]] | None:
    ids = [p.strip() for p in (last_tag(text or "", "output") or "").split(",") if p.strip()]
    if not ids or not all(_ID.match(i) for i in ids):
        return None
    return ids[0], ids[1:3]


def _score_task1(record: dict[str, Any], answer: tuple[str, list[str]] | None) -> dict[str, Any]:
    if answer is None:
        return {"parsed": False, "retrieval": False, "next_action": False, "overall": False}
    action, sections = answer
    retrieval = record["gold_section_id"] in sections
    next_action = action in record["gold_actions"]
    return {"parsed": True, "retrieval": retrieval, "next_action": next_action, "overall": retrieval and next_action}


def _baseline(ctx: EvalContext, item: EvalItem, document: dict[str, Any], record: dict[str, Any]) -> ItemResult:
    records = task_records(ctx)
    if item.suite == "tod_task1":
        task1 = [r for r in records if r.get("record_type") == "task1_item"]
        if item.agent == "empty":
            text = ""
        elif item.agent == "majority":
            action = Counter(a for r in task1 for a in r["gold_actions"][:1]).most_common(1)[0][0]
            sections = [s for s, _ in Counter(r["gold_section_id"] for r in task1).most_common(2)]
            text = f"<output>{','.join([action, *sections])}</output>"
        else:
            text = f"<output>{','.join(_statements(document))}</output>"
        answer = _task1_answer(text)
        return ItemResult(output={"text": text}, score=_score_task1(record, answer))
    if item.suite == "tod_task2":
        text = {"empty": "", "majority_label": "<compliant>yes</compliant>",
                "label_soup": "<compliant>yes no</compliant>"}[item.agent]
        predicted = _verdict(text)
        return ItemResult(output={"text": text}, score={"label": record["label"], "predicted": predicted,
                                                        "correct": predicted == record["label"],
                                                        "type": record.get("manipulation_type")})
    return ItemResult(output={"response": None}, score={"parsed": False, "compliant": False})


def run(item: EvalItem, ctx: EvalContext, llm: LLMClient) -> ItemResult:
    """Run one TOD-ProcBench item; every problem is the item's error."""
    try:
        document, record = _record(ctx, item)
    except (LookupError, StopIteration):
        return ItemResult(error=f"{item.suite} item {item.item_id} is not in the export")
    if item.agent in BASELINES[item.suite]:
        return _baseline(ctx, item, document, record)
    conversation = conversation_lines(record["prefix"])
    try:
        if item.suite == "tod_task1":
            text = _ask(llm, ctx, item, TEMPLATES[item.suite], 1, instructions_with_ids=_document_with_ids(ctx, document),
                        conversation=conversation)
            answer = _task1_answer(text)
            return ItemResult(output={"text": text}, score=_score_task1(record, answer),
                              error=None if answer else "unparseable answer: no <output> with statement ids")
        if item.suite == "tod_task2":
            text = _ask(llm, ctx, item, TEMPLATES[item.suite], 1, conversation=conversation,
                        response=record["response"], policy=record["policy"])
            predicted = _verdict(text)
            return ItemResult(output={"text": text},
                              score={"label": record["label"], "predicted": predicted,
                                     "correct": predicted == record["label"], "type": record.get("manipulation_type")},
                              error=None if predicted else "unparseable answer: <compliant> is not yes or no")
        text = _ask(llm, ctx, item, TEMPLATES[item.suite], 1, conversation=conversation, policy=record["policy"])
        response = last_tag(text, "response")
        if not response:
            return ItemResult(output={"text": text}, score={"parsed": False, "compliant": False},
                              error="unparseable answer: no <response> block (counted non-compliant)")
        verdict_text = _ask(llm, ctx, item, TEMPLATES["tod_task2"], "judge", model=ctx.options.judge_model,
                            conversation=conversation, response=response, policy=record["policy"])
        verdict = _verdict(verdict_text)
        return ItemResult(output={"text": text, "response": response, "judge": verdict_text},
                          score={"parsed": True, "compliant": verdict == "compliant", "judged": verdict is not None},
                          error=None if verdict else "the judge's answer is unparseable (counted non-compliant)")
    except ResponsePending:
        raise
    except Exception as error:  # the model could not be asked: scored as a wrong answer
        return ItemResult(score=_failed(item.suite, record),
                          error=f"{type(error).__name__}: {str(error).splitlines()[0][:300]}")


def _failed(suite: str, record: dict[str, Any]) -> dict[str, Any]:
    if suite == "tod_task1":
        return _score_task1(record, None)
    if suite == "tod_task2":
        return {"label": record["label"], "predicted": None, "correct": False, "type": record.get("manipulation_type")}
    return {"parsed": False, "compliant": False}


def _document_with_ids(ctx: EvalContext, document: dict[str, Any]) -> str:
    """The What_to_do section with statement ids, from the run's instruction tree (flat ids if it is gone)."""
    content = ctx.stage_content("manipulations")
    instructions = ManipulationSet.model_validate(content).instructions if content else None
    if instructions is not None:
        return render_f1_with_ids(instructions.tree)
    return "\n".join(f"[{k}] {v}" for k, v in _statements(document).items())


def _statements(document: dict[str, Any]) -> dict[str, str]:
    value = document.get("statements") or {}
    return json.loads(value) if isinstance(value, str) else value
