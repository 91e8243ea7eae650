"""Human-readable renderings of artifacts: markdown for the Prefect UI and the terminal.

Works on stored content dicts (what ``artifacts.content`` holds), so the CLI can render any
version without re-validating it.
"""

from __future__ import annotations

from typing import Any, Iterable


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    return head + "".join("| " + " | ".join(_cell(r.get(c)) for c in columns) + " |\n" for r in rows)


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


def context_markdown(content: dict[str, Any]) -> str:
    parts = [f"# Business context: {content.get('theme', '')}\n"]
    for section in content.get("sections", []):
        parts.append(f"## {section['number']}. {section['title']}\n\n{section['body'].strip()}\n")
    task = content.get("task", {})
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(task.get("required_steps", []), 1))
    parts.append(f"## Chosen task\n\n**{task.get('sop_title', '')}** (sub-business: {task.get('sub_business', '')})\n\n"
                 f"{task.get('task_context', '')}\n\n{steps}\n")
    return "\n".join(parts)


def schema_markdown(content: dict[str, Any]) -> str:
    columns = ["field", "role", "type", "allowed", "example", "description"]
    return "# Data schema\n\n" + markdown_table(schema_rows(content), columns)


def sop_markdown(content: dict[str, Any]) -> str:
    lines = [f"# {content.get('title', 'SOP')}\n"]
    for section in content.get("sections", []):
        lines.append(f"## {section['number']}. {section['title']}\n\n{section['body'].strip()}\n")
    return "\n".join(lines)


def api_graph_markdown(content: dict[str, Any]) -> str:
    """APIs as a table and the dependencies as a readable list (prerequisite → consumer)."""
    apis = content.get("apis", [])
    rows = [{
        "api": a["api_name"], "SOP steps": ", ".join(a.get("sop_steps", [])),
        "inputs": ", ".join(f"{p['name']} ({p['source']})" for p in a.get("input_parameters", [])),
        "outputs": ", ".join(p["name"] for p in a.get("output_parameters", [])),
    } for a in apis]
    deps = [f"- `{d['dependent_api']}` → `{a['api_name']}` ({d['dependency_type']}): {d.get('dependency_reason', '')}"
            for a in apis for d in a.get("direct_dependencies", [])]
    # Prefect's V2 UI draws mermaid blocks; the V1 UI and terminals show the source, which is
    # still a readable edge list.
    edges = [f"    {d['dependent_api']} --> {a['api_name']}" for a in apis for d in a.get("direct_dependencies", [])]
    diagram = "```mermaid\ngraph TD\n" + "\n".join([f"    {a['api_name']}" for a in apis] + edges) + "\n```\n"
    return ("# API dependency graph\n\n" + markdown_table(rows, ["api", "SOP steps", "inputs", "outputs"])
            + "\n## Dependencies\n\n" + ("\n".join(deps) or "none") + "\n\n" + diagram)


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
    rows = [{"tool": t["name"], "parameters": ", ".join(t["inputSchema"]["json"].get("properties", {})),
             "description": t["description"]} for t in specs]
    code = content.get("code", {}).get("source", "")
    return ("# Tools\n\n" + markdown_table(rows, ["tool", "parameters", "description"])
            + f"\n## tools.py ({len(code.splitlines())} lines)\n\n```python\n{code}\n```\n")


def reference_markdown(content: dict[str, Any]) -> str:
    """Ground truth: how many tasks, which rows were excluded and the decision coverage table."""
    rows = [{"field": f, "outcome": v, "tasks": n} for f, counts in content.get("coverage", {}).items()
            for v, n in counts.items()]
    excluded = content.get("excluded", [])
    return (f"# Ground truth\n\n{len(content.get('tasks', []))} tasks computed by executing the reference "
            f"procedure on {content.get('rows_total')} rows; {len(excluded)} excluded.\n\n"
            + markdown_table(rows, ["field", "outcome", "tasks"]))


def package_markdown(content: dict[str, Any]) -> str:
    stats = content.get("stats", {})
    graph = stats.get("graph") or {}
    return (f"# Export: {content.get('benchmark')}\n\nSOP-Bench folder: `{content.get('sopbench_folder')}`\n\n"
            f"Tasks {stats.get('num_tasks')}, tools {stats.get('num_tools')}, SOP tokens ~{stats.get('sop_tokens')}, "
            f"graph {graph.get('nodes')} nodes / {graph.get('edges')} edges (density {graph.get('density', 0):.4f}).\n\n"
            f"Oracle: {content.get('oracle', {}).get('summary')}\n")


FUNNEL_COLUMNS = ["component", "item_type", "generated", "verified", "retried", "dropped", "kept"]


def funnel_markdown(content: dict[str, Any]) -> str:
    """The funnel table and every drop with its reason (distractors and manipulations)."""
    drops = content.get("drops", [])
    dropped = (f"\n### Dropped ({len(drops)})\n\n" + markdown_table(drops, ["component", "item_type", "item", "reason"])
               if drops else "\nNothing dropped.\n")
    return "## Funnel\n\n" + markdown_table(content.get("funnel", []), FUNNEL_COLUMNS) + dropped


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


RENDERERS = {"context": context_markdown, "schema": schema_markdown, "sop": sop_markdown,
             "api_graph": api_graph_markdown, "dataset": dataset_markdown, "tools": tools_markdown,
             "reference": reference_markdown, "distractors": distractors_markdown,
             "manipulations": manipulations_markdown, "package": package_markdown}


def artifact_markdown(stage: str, content: dict[str, Any]) -> str:
    renderer = RENDERERS.get(stage)
    if renderer is None:
        return f"```json\n{content}\n```"
    return renderer(content)


def checks_markdown(checks: Iterable[Any]) -> str:
    """Check results with failures first, so a reviewer sees what matters at the top."""
    rows = sorted(({"check": c.check_name if hasattr(c, "check_name") else c.name, "passed": c.passed,
                    "severity": c.severity, "message": c.message} for c in checks),
                  key=lambda r: (r["passed"], r["severity"] != "error", r["check"]))
    rows = [{**r, "passed": "yes" if r["passed"] else "**NO**"} for r in rows]
    return "## Checks\n\n" + markdown_table(rows, ["passed", "severity", "check", "message"])
