"""Three scripted agents for the fake LLM server, built from a demo export's ground truth.

* **perfect**: makes each task's expected calls in order, one per turn, then answers the expected
  outputs; reconstructs the API graph exactly; answers the TOD tasks with their gold labels and
  writes the reference response; as a judge, says compliant only for the reference response.
* **lazy**: calls no tool and answers the first label of each field; empty graph; "yes" to every
  compliance question; a one-word response.
* **eager** (over-eager): the perfect calls, then every read tool again and an extra write the SOP
  does not ask for, then the right answer; every API with a chain for the graph; like perfect on TOD.

The server routes each request by its ``model`` field, so one server plays all three.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sopforge.llm.testserver_agents import AgentView, Move, agent_responder, view_of


class Truth:
    """What the agents know about one export (read from its files and the run's API graph)."""

    def __init__(self, export: Path, graph: dict[str, Any]):
        folder = next(p.parent for p in export.glob("*/tools.py"))
        self.tasks = [json.loads(line) for line in (folder / "tasks.jsonl").read_text().splitlines() if line.strip()]
        self.specs = [s["toolSpec"] for s in json.loads((folder / "toolspecs.json").read_text())]
        self.fields = json.loads((folder / "metadata.json").read_text())["output_columns"]
        self.tod = [json.loads(line) for line in (export / "tod_procbench.jsonl").read_text().splitlines() if line]
        self.nodes = [a["api_name"] for a in graph["apis"]]
        self.edges = [(d["dependent_api"], a["api_name"]) for a in graph["apis"] for d in a["direct_dependencies"]]
        self.graph = graph

    def task_in(self, text: str) -> dict[str, Any] | None:
        return next((t for t in self.tasks if f": {t['task_id']}\n" in text + "\n"), None)

    def labels(self, field: str) -> list[str]:
        return sorted({str(t["expected_outputs"][field]) for t in self.tasks})


def _final(outputs: dict[str, Any]) -> str:
    return f"<final_response>{json.dumps(outputs)}</final_response>"


def _sop_bench(truth: Truth, view: AgentView, model: str) -> Move:
    task = truth.task_in(view.task)
    if task is None:
        return Move(text="I cannot tell which case this is.")
    expected = [(c["tool"], c["input"]) for c in task["expected_calls"]]
    wrong = {f: next(v for v in truth.labels(f) if v != str(task["expected_outputs"][f])) if len(truth.labels(f)) > 1
             else truth.labels(f)[0] for f in truth.fields}
    if model == "lazy" or "No tools are available" in view.task:
        return Move(text=_final(task["expected_outputs"] if model != "lazy" else wrong))
    plan = list(expected)
    if model == "eager":
        reads = [s["name"] for s in truth.specs if not s["description"].startswith("[WRITE]")
                 and set(s["inputSchema"]["json"].get("required", [])) <= {"request_id"}]
        writes = [s["name"] for s in truth.specs if s["description"].startswith("[WRITE]")
                  and s["name"] not in {tool for tool, _ in expected}]
        plan += [(name, {"request_id": task["task_id"]}) for name in reads]
        if writes:
            spec = next(s for s in truth.specs if s["name"] == writes[0])
            plan.append((writes[0], _arguments_for(spec, task)))
    if len(view.calls) < len(plan):
        return Move(calls=[plan[len(view.calls)]])
    return Move(text=_final(task["expected_outputs"]))


def _arguments_for(spec: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    """Schema-valid arguments for a write the SOP does not ask for on this task (an over-eager agent)."""
    schema = spec["inputSchema"]["json"]
    values = {**task["hidden"], **task["inputs"]}
    out = {}
    for name in schema.get("required", []):
        prop = schema["properties"].get(name, {})
        if "enum" in prop:
            out[name] = prop["enum"][0]
        elif name in values and values[name] is not None:
            out[name] = values[name]
        else:
            out[name] = {"integer": 1, "number": 1.0, "boolean": True}.get(prop.get("type"), "n/a")
    return out


def _tod(truth: Truth, view: AgentView, model: str) -> str:
    text = view.task
    if "<api_signatures>" in text:
        if model == "lazy":
            return "<nodes></nodes><edges></edges>"
        nodes = [s["name"] for s in truth.specs] if model == "eager" else truth.nodes
        edges = list(zip(nodes, nodes[1:])) if model == "eager" else truth.edges
        return f"<nodes>{', '.join(nodes)}</nodes><edges>\n" + "\n".join(f"{a} -> {b}" for a, b in edges) + "\n</edges>"
    conversation = text.split("<conversation>", 1)[-1].split("</conversation>", 1)[0]
    if "<policies>" in text:
        record = next((r for r in truth.tod if r.get("record_type") == "task1_item"
                       and all(line in conversation for line in r["prefix"])), None)
        if model == "lazy" or record is None:
            return "<output></output>"
        return f"<reason>gold</reason><output>{record['gold_actions'][0]},{record['gold_section_id']},do.a1</output>"
    if "write only your next response" in text:
        record = next((r for r in truth.tod if r.get("record_type") == "task3_item"
                       and all(line in conversation for line in r["prefix"])), None)
        response = "ok." if model == "lazy" or record is None else record["reference_response"]
        return f"<reason>next step</reason><response>{response}</response>"
    response = text.split("<response>", 1)[-1].split("</response>", 1)[0].strip()
    if model == "lazy":
        return "<compliant>yes</compliant>"
    item = next((r for r in truth.tod if r.get("record_type") == "compliance_item" and r["response"] == response), None)
    if item is not None:
        return f"<reason>gold</reason><compliant>{'yes' if item['label'] == 'compliant' else 'no'}</compliant>"
    references = {r["reference_response"] for r in truth.tod if r.get("record_type") == "task3_item"}
    return f"<reason>judge</reason><compliant>{'yes' if response in references else 'no'}</compliant>"


def responder(truth: Truth):
    """The fake server's responder: every request answered by the agent its ``model`` names."""

    def respond(body: dict[str, Any], protocol: str):
        model = str(body.get("model"))
        view = view_of(body, protocol)
        if "<sop>" in view.task:  # an SOP-Bench task (fc, react or no tools)
            return agent_responder(lambda v: _sop_bench(truth, v, model))(body, protocol)
        return _tod(truth, view, model)

    return respond
