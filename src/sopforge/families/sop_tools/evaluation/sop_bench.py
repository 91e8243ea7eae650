"""SOP-Bench tasks in ``sopforge eval``: the agent processes each case through the MCP environment.

Suites: ``sop_bench`` (the base SOP with the full registry, distractor tools included) and, with
``--ablations``, the paper's ablations: ``sop_bench.sop=<variant>`` for each exported SOP variant
(complexity injection, TELLER's abstractions) and ``sop_bench.registry=minimal`` (SOP-Bench's
registry-bloat ablation, L401).

Agents: the model as the fc or react agent; ``no_tools`` (the model with the same prompt but no
tools: what the SOP and the input columns alone give); and the deterministic baselines, scored by
the same code: ``empty`` (no call, no answer), ``majority_label`` (the most common outcome),
``label_soup`` (every known label of each field at once: what the paper's lenient matcher lets
through and the strict one does not), ``call_every_tool`` and ``read_only`` (replayed through the
tools in the sandbox, as in the reference stage's gate).

Each trajectory is scored by the trajectory scorer (outputs, final state, forbidden writes, order,
unnecessary calls), and the item's score also says whether the agent completed (a parseable final
answer within the step limit: SOP-Bench's n_c), its tool calls (tool-call accuracy) and the TELLER
Stage 2 figures (the invoked API set against the expected one; blank, validation and type errors).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from sopforge.errors import ResponsePending
from sopforge.evaluation.agents import AgentRun, McpToolbox, run_fc, run_react
from sopforge.evaluation.mcp_server import STATE_URI, build_server
from sopforge.evaluation.protocol import EvalContext, EvalItem, ItemResult
from sopforge.families.sop_tools.evaluation.common import (
    environment, first_message, last_tag, parse_json_object, prf, request_factory, tasks_of, tool_lines,
)
from sopforge.families.sop_tools.evaluation.environment import domain_folder, sop_names
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.ground_truth import Task, csv_cell
from sopforge.families.sop_tools.models.trajectory import Trajectory, TrajectoryCall
from sopforge.families.sop_tools.verify.baselines import baseline_plans, majority_answer
from sopforge.families.sop_tools.verify.replay import replay_plans, to_trajectory
from sopforge.families.sop_tools.verify.trajectory import score_trajectory
from sopforge.llm.types import LLMClient

__all__ = ["BASELINES", "SUITE", "parse_final_answer", "plan", "run", "score"]

SUITE = "sop_bench"
NO_TOOLS = "no_tools"
BASELINES = ("empty", "majority_label", "label_soup", "call_every_tool", "read_only")
TEMPLATES = {"fc": "sop_bench/agent_fc", "react": "sop_bench/agent_react"}
_REFUSED = ("arguments do not match the schema", "unknown tool", "the arguments of", "Action Input")


def plan(ctx: EvalContext) -> list[EvalItem]:
    """Items of the SOP-Bench suites (raises FileNotFoundError/UserError when the export cannot be scored)."""
    tasks = tasks_of(ctx.export_dir)[: ctx.options.limit]
    agents = [ctx.options.agent, NO_TOOLS, *BASELINES]
    items = [EvalItem(suite=SUITE, agent=agent, item_id=t.task_id, payload={"sop": "base", "registry": "with_distractors"})
             for agent in agents for t in tasks]
    if ctx.options.ablations:
        folder = domain_folder(ctx.export_dir)
        ablations = [(f"{SUITE}.sop={v}", v, "with_distractors") for v in sop_names(folder)[1:]]
        ablations.append((f"{SUITE}.registry=minimal", "base", "minimal"))
        items += [EvalItem(suite=suite, agent=ctx.options.agent, item_id=t.task_id,
                           payload={"sop": sop, "registry": registry})
                  for suite, sop, registry in ablations for t in tasks]
    return items


def parse_final_answer(text: str | None, fields: list[str]) -> dict[str, Any] | None:
    """The decision fields of a final answer: the JSON object in the last <final_response> (or, as
    SOP-Bench's parser falls back, <final_output> / <final_decision>) block; None when there is none."""
    for tag in ("final_response", "final_output", "final_decision"):
        block = last_tag(text or "", tag)
        if block is None:
            continue
        value = parse_json_object(block)
        if value is not None:
            return {k: v for k, v in value.items() if k in fields} or value
        if len(fields) == 1 and block:
            return {fields[0]: block}
    return None


def _case_lines(task: Task, columns: list[str]) -> str:
    return "\n".join(f"{c}: {csv_cell(task.inputs.get(c))}" for c in columns if c in task.inputs)


async def _agent_session(ctx: EvalContext, item: EvalItem, task: Task, llm: LLMClient) -> tuple[AgentRun, dict]:
    env = environment(ctx.export_dir, item.payload.get("sop", "base"), item.payload.get("registry", "with_distractors"))
    fields = "\n".join(f"- {f}" for f in env.output_columns)
    kind = ctx.options.agent
    async with Client(build_server(env), mode="legacy") as client:
        toolbox = McpToolbox(client)
        if item.agent == NO_TOOLS or kind == "fc":
            note = "No tools are available for this request: apply the SOP to the case data above as well as you " \
                   "can." if item.agent == NO_TOOLS else "Use the tools available to you to look up, compute and " \
                                                         "record everything else the SOP requires."
            first = first_message(ctx, TEMPLATES["fc"], sop=env.instructions, case_inputs=_case_lines(task, env.input_columns),
                                  output_fields=fields, tools_note=note)
            run_result = await run_fc(llm, toolbox, request_factory(ctx, item, TEMPLATES["fc"]), first,
                                      1 if item.agent == NO_TOOLS else ctx.options.steps,
                                      offer_tools=item.agent != NO_TOOLS)
        else:
            tools = await toolbox.load()
            first = first_message(ctx, TEMPLATES["react"], sop=env.instructions, tools=tool_lines(tools),
                                  tool_names=", ".join(t.name for t in tools),
                                  case_inputs=_case_lines(task, env.input_columns), output_fields=fields)
            run_result = await run_react(llm, toolbox, request_factory(ctx, item, TEMPLATES["react"]), first,
                                         ctx.options.steps)
        state = json.loads((await client.read_resource(STATE_URI)).contents[0].text)
    return run_result, state


def _leaf(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and group.exceptions:
        group = group.exceptions[0]
    return group


def _model_item(ctx: EvalContext, item: EvalItem, task: Task, llm: LLMClient) -> ItemResult:
    try:
        run_result, state = anyio.run(_agent_session, ctx, item, task, llm)
    except BaseExceptionGroup as group:  # the MCP client's task group wraps what the agent raised
        pending = group.subgroup(ResponsePending)
        raise _leaf(pending if pending is not None else group) from None
    env = environment(ctx.export_dir)
    answer = parse_final_answer(run_result.final, env.output_columns) if run_result.completed else None
    error = run_result.error
    if run_result.completed and answer is None:
        error = "unparseable answer: no <final_response> block with a JSON object of the decision fields"
    calls = [TrajectoryCall(tool=c["tool"], input=c["input"] if isinstance(c["input"], dict) else {},
                            output=None if c["error"] else c["result"], error=c["result"] if c["error"] else None)
             for c in run_result.calls]
    trajectory = Trajectory(task_id=task.task_id, calls=calls, state_diff=state.get("state_diff") or {},
                            answer=answer or {})
    output = {"agent": run_result.dump(), "answer": answer, "state": state}
    return ItemResult(output=output, score=score(task, trajectory, completed=answer is not None,
                                                 agent_calls=run_result.calls), error=error)


def _graph(ctx: EvalContext) -> APIGraph:
    content = ctx.stage_content("api_graph")
    if content is None:
        raise LookupError("the run has no api_graph artifact: the replayed baselines need the API graph")
    return APIGraph.model_validate(content)


def _baseline_item(ctx: EvalContext, item: EvalItem, task: Task) -> ItemResult:
    tasks = tasks_of(ctx.export_dir)
    majority = majority_answer(tasks)
    if item.agent in ("empty", "majority_label", "label_soup"):
        if item.agent == "label_soup":
            labels: dict[str, set[str]] = {}
            for t in tasks:
                for field, value in t.expected_outputs.items():
                    labels.setdefault(field, set()).add(csv_cell(value))
            answer = {field: ", ".join(sorted(values)) for field, values in labels.items()}
        else:
            answer = {} if item.agent == "empty" else dict(majority)
        trajectory = Trajectory(task_id=task.task_id, calls=[], state_diff={}, answer=answer)
        return ItemResult(output={"answer": answer}, score=score(task, trajectory, completed=True, agent_calls=[]))
    env = environment(ctx.export_dir)
    plans = baseline_plans([task], _graph(ctx), env.input_columns, majority)[item.agent]
    result, runs = replay_plans(env.work, plans, fresh=True)
    if not result.ok or not runs or not runs[0].ok:
        why = runs[0].error if runs else f"{result.error_kind}: {result.error_message}"
        return ItemResult(error=f"the baseline could not be replayed in the sandbox: {why}")
    trajectory = to_trajectory(task.task_id, runs[0], dict(majority))
    agent_calls = [{"tool": c.tool, "input": c.input, "result": c.error or "", "error": c.error is not None}
                   for c in trajectory.calls]
    return ItemResult(output={"answer": majority, "calls": [c.model_dump() for c in trajectory.calls]},
                      score=score(task, trajectory, completed=True, agent_calls=agent_calls))


def run(item: EvalItem, ctx: EvalContext, llm: LLMClient) -> ItemResult:
    """Run one SOP-Bench item; every problem is the item's error."""
    task = next((t for t in tasks_of(ctx.export_dir) if t.task_id == item.item_id), None)
    if task is None:
        return ItemResult(error=f"task {item.item_id} is not in the export's tasks.jsonl")
    if item.agent in BASELINES:
        return _baseline_item(ctx, item, task)
    return _model_item(ctx, item, task, llm)


def score(task: Task, trajectory: Trajectory, *, completed: bool, agent_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One item's figures (see the module docstring); ``success`` needs a completed answer too."""
    s = score_trajectory(task, trajectory)
    refused = [c for c in agent_calls if c["error"] and str(c["result"]).removeprefix("ERROR: ").startswith(_REFUSED)]
    failed = [c for c in agent_calls if c["error"]]
    expected = set(task.expected_path or [c.tool for c in task.expected_calls])
    invoked = {c["tool"] for c in agent_calls if not c["error"]}
    return {
        "completed": completed, "outputs_strict": completed and s.outputs_correct,
        "outputs_lenient": completed and s.outputs_harness, "state_correct": s.state_correct,
        "order_ok": s.order_ok, "success": completed and s.success,
        "forbidden_writes": len(s.forbidden_writes), "wrong_writes": len(s.wrong_writes),
        "missing_writes": len(s.missing_writes), "order_violations": len(s.order_violations),
        "unnecessary_calls": len(s.unnecessary_calls), "missing_calls": len(s.missing_calls),
        "calls": len(agent_calls), "calls_ok": len(agent_calls) - len(failed),
        "invoked": sorted(invoked), "api_set": prf(invoked, expected),
        "blank": not agent_calls, "validation_errors": len(refused), "type_errors": len(failed) - len(refused),
        "details": {k: v for k, v in s.model_dump().items() if isinstance(v, list) and v},
    }

