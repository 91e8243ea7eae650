"""Markdown of the sop_tools artifacts for the Prefect UI, review pages and ``sopforge show``.

Works on stored content dicts (what ``artifacts.content`` holds), so any version renders
without being re-validated.
"""

from __future__ import annotations

from typing import Any

from sopforge.markdown import funnel_markdown, markdown_table


def schema_rows(content: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per field: the schema as a table (Prefect table artifact and ``sopforge show``)."""
    rows = []
    for f in content.get("fields", []):
        bounds = ""
        if f.get("choices"):
            bounds = " | ".join(f["choices"])
        elif f.get("minimum") is not None or f.get("maximum") is not None:
            bounds = f"{f.get('minimum', '')} to {f.get('maximum', '')}"
        rows.append({
            "field": f["name"], "role": f["role"] + (" (decision)" if f.get("decision") else ""),
            "type": f["type"], "allowed": bounds, "example": f.get("example") or "",
            "description": f.get("description", ""),
        })
    return rows



def schema_markdown(content: dict[str, Any]) -> str:
    columns = ["field", "role", "type", "allowed", "example", "description"]
    return "# Data schema\n\n" + markdown_table(schema_rows(content), columns)


def _keep_lines(body: str) -> str:
    """Markdown that shows each line of ``body`` on its own line (a hard break, two trailing spaces):
    plain Markdown joins consecutive lines into one paragraph, which runs an SOP's numbered steps
    together."""
    return "\n".join(line.rstrip() + "  " if line.strip() else "" for line in body.strip().splitlines())


def sop_markdown(content: dict[str, Any]) -> str:
    lines = [f"# {content.get('title', 'SOP')}\n"]
    for section in content.get("sections", []):
        lines.append(f"## {section['number']}. {section['title']}\n\n{_keep_lines(section['body'])}\n")
    return "\n".join(lines)


def api_graph_markdown(content: dict[str, Any]) -> str:
    """APIs as a table and the dependencies as a readable list (prerequisite → consumer)."""
    apis = content.get("apis", [])
    rows = [{
        "api": a["api_name"], "effect": _effect(a), "SOP steps": ", ".join(a.get("sop_steps", [])),
        "inputs": ", ".join(f"{p['name']} ({p['source']})" for p in a.get("input_parameters", [])),
        "outputs": ", ".join(p["name"] for p in a.get("output_parameters", [])) or "record_id",
    } for a in apis]
    deps = [f"- `{d['dependent_api']}` → `{a['api_name']}` ({d['dependency_type']}): {d.get('dependency_reason', '')}"
            for a in apis for d in a.get("direct_dependencies", [])]
    # Prefect's V2 UI draws mermaid blocks; the V1 UI and terminals show the source, which is
    # still a readable edge list.
    edges = [f"    {d['dependent_api']} --> {a['api_name']}" for a in apis for d in a.get("direct_dependencies", [])]
    diagram = "```mermaid\ngraph TD\n" + "\n".join([f"    {a['api_name']}" for a in apis] + edges) + "\n```\n"
    return ("# API dependency graph\n\n" + markdown_table(rows, ["api", "effect", "SOP steps", "inputs", "outputs"])
            + "\n## Dependencies\n\n" + ("\n".join(deps) or "none") + "\n\n" + diagram)


def _effect(api: dict[str, Any]) -> str:
    if api.get("effect") != "write":
        return "read"
    when = "; ".join(f"{k} in {' | '.join(v)}" for k, v in (api.get("when") or {}).items()) or "every branch"
    return f"write {api.get('writes_table')} ({when})"


def dataset_sample(content: dict[str, Any], limit: int = 20) -> list[dict[str, Any]]:
    return content.get("rows", [])[:limit]


def dataset_markdown(content: dict[str, Any]) -> str:
    rows = content.get("rows", [])
    head = (f"# Dataset\n\n{len(rows)} rows (requested {content.get('rows_requested')}), "
            f"{content.get('duplicates_dropped', 0)} duplicates dropped, {len(content.get('batches', []))} batches.\n\n")
    sample = dataset_sample(content)
    return head + (markdown_table(sample, list(content.get("fields", []))) if sample else "")


def tools_markdown(content: dict[str, Any]) -> str:
    specs = [s.get("toolSpec", s) for s in content.get("toolspecs", {}).get("specs", [])]
    rows = [{"tool": t["name"], "effect": "write" if str(t.get("description", "")).startswith("[WRITE]") else "read",
             "parameters": ", ".join(t["inputSchema"]["json"].get("properties", {})),
             "description": t["description"]} for t in specs]
    code = content.get("code", {}).get("source", "")
    return ("# Tools\n\n" + markdown_table(rows, ["tool", "effect", "parameters", "description"])
            + f"\n## tools.py ({len(code.splitlines())} lines)\n\n```python\n{code}\n```\n")


def _score(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def paths_markdown(paths: list[dict[str, Any]], gates: dict[str, Any]) -> str:
    """The path coverage table: one row per distinct expected tool path."""
    rows = [{"path": f"P{i}", "calls": " → ".join(p["path"]), "tasks": p["tasks"],
             "writes": ", ".join(p.get("writes", [])) or "none", "outcomes": "; ".join(p.get("outcomes", []))}
            for i, p in enumerate(paths, 1)]
    minimum = gates.get("min_distinct_paths")
    head = f"## Path coverage\n\n{len(paths)} distinct tool paths" + (
        f" (at least {int(minimum)} required)" if minimum is not None else "") + ".\n\n"
    return head + markdown_table(rows, ["path", "calls", "tasks", "writes", "outcomes"])


def baselines_markdown(baselines: list[dict[str, Any]], gates: dict[str, Any]) -> str:
    """The baseline agents' scores: outputs, final state, order and success."""
    rows = [{"agent": b["agent"], "outputs": _score(b["outputs"]), "final state": _score(b["final_state"]),
             "order": _score(b["order"]), "success": _score(b["success"]), "what it does": b.get("description", "")}
            for b in baselines]
    bound = gates.get("max_baseline_state_success")
    head = "## Baseline agents\n\n" + (f"Final-state success must stay at or below {_score(bound)}.\n\n"
                                        if bound is not None else "")
    return head + markdown_table(rows, ["agent", "outputs", "final state", "order", "success", "what it does"])


def reference_markdown(content: dict[str, Any]) -> str:
    """Ground truth: tasks, excluded rows, decision coverage, path coverage, writes and the baselines."""
    rows = [{"field": f, "outcome": v, "tasks": n} for f, counts in content.get("coverage", {}).items()
            for v, n in counts.items()]
    excluded = content.get("excluded", [])
    gates = content.get("gates") or {}
    writes = ", ".join(content.get("write_tools", [])) or "none"
    parts = [f"# Ground truth\n\n{len(content.get('tasks', []))} tasks computed by executing the reference "
             f"procedure on {content.get('rows_total')} rows; {len(excluded)} excluded. Write tools: {writes}.\n\n"
             + markdown_table(rows, ["field", "outcome", "tasks"])]
    if content.get("paths"):
        parts.append(paths_markdown(content["paths"], gates))
    if content.get("baselines"):
        parts.append(baselines_markdown(content["baselines"], gates))
    return "\n".join(parts)


def package_markdown(content: dict[str, Any]) -> str:
    stats = content.get("stats", {})
    graph = stats.get("graph") or {}
    gates = content.get("gates") or {}
    text = (f"# Export: {content.get('benchmark')}\n\nSOP-Bench folder: `{content.get('sopbench_folder')}`\n\n"
            f"Tasks {stats.get('num_tasks')}, tools {stats.get('num_tools')} "
            f"(write tools: {', '.join(content.get('write_tools', [])) or 'none'}), "
            f"SOP tokens ~{stats.get('sop_tokens')}, graph {graph.get('nodes')} nodes / {graph.get('edges')} edges "
            f"(density {graph.get('density', 0):.4f}).\n\nOracle: {content.get('oracle', {}).get('summary')}\n")
    if content.get("paths"):
        text += "\n" + paths_markdown(content["paths"], gates)
    if content.get("baselines"):
        text += "\n" + baselines_markdown(content["baselines"], gates)
    return text


def distractors_markdown(content: dict[str, Any]) -> str:
    tools = [{"tool": t["name"], "kind": t["kind"], "kept": t["kept"], "reason": t.get("reason", ""),
              "description": t["spec"].get("description", "")} for t in content.get("tools", [])]
    fields = [{"field": f["name"], "origin": f["origin"], "kept": f["kept"], "reason": f.get("reason", ""),
               "description": f.get("description", "")} for f in content.get("fields", [])]
    return ("# Distractors\n\n## Tools\n\n" + markdown_table(tools, ["tool", "kind", "kept", "reason", "description"])
            + "\n## Data fields\n\n" + markdown_table(fields, ["field", "origin", "kept", "reason", "description"])
            + "\n" + funnel_markdown(content))


def manipulations_markdown(content: dict[str, Any]) -> str:
    parts = ["# Manipulations\n"]
    for v in content.get("variants", []):
        parts.append(f"## SOP variant: {v['variant_type']} ({v['paper']})\n\n{v.get('summary', '')}\n\n"
                     f"```diff\n{v['diff']}\n```\n")
    doc = content.get("instructions")
    if doc:
        parts.append(f"## Instruction document (f1)\n\n```\n{doc['what_to_do']}\n```\n")
    pairs = [{"pair": i["pair_id"], "label": i["label"], "type": i.get("manipulation_type") or "",
              "changed": ", ".join(i.get("changed_ids") or []), "response": i["response"]}
             for i in content.get("compliance", [])]
    if pairs:
        parts.append("## Compliance set\n\n" + markdown_table(pairs, ["pair", "label", "type", "changed", "response"]))
    parts.append(funnel_markdown(content))
    return "\n".join(parts)

