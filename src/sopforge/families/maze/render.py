"""Markdown of the maze artifacts for the Prefect UI, review pages and ``sopforge show``.

Works on stored content dicts, so any stored version renders; a scenario is shown as the SOP
the evaluated model reads (rendered from the tree) plus, for HRS, its step graph.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, atoms_of
from sopforge.markdown import funnel_markdown, markdown_table

__all__ = ["baselines_markdown", "instance_rows", "instances_markdown", "package_markdown", "scenario_markdown"]


def _graph(s: HRSScenario) -> str:
    """The step graph as mermaid (Prefect's V2 UI draws it; elsewhere it reads as an edge list)."""
    lines = ["```mermaid", "graph TD"]
    for st in s.steps:
        shape = f'{st.id}["{st.id}. {st.title}"]' if st.script else f'{st.id}{{"{st.id}. {st.title}"}}'
        lines.append(f"    S{shape}")
        for b in st.branches:
            label = " & ".join(a.text() for a in atoms_of(b.when)).replace('"', "'")
            if b.then == "goto":
                lines.append(f'    S{st.id} -->|"{b.id}: {label}"| S{b.target}')
            else:
                lines.append(f'    S{st.id} -->|"{b.id}: {label}"| E{b.id.replace(".", "_")}(("{b.then}"))')
    lines.append("```")
    return "\n".join(lines)


def scenario_markdown(content: dict[str, Any]) -> str:
    """The scenario as its SOP text, with a shape line (and the step graph for HRS)."""
    model = HRSScenario if content.get("kind") == "HRS" else LRSScenario
    try:
        scenario = model.model_validate(content)
    except ValidationError as exc:  # an old or hand-edited version still shows something useful
        return f"# Scenario {content.get('name', '?')}\n\nNot a valid scenario: {exc.errors()[0]['msg']}\n"
    if isinstance(scenario, LRSScenario):
        shape = (f"LRS (wide): {len(scenario.categories)} categories, {len(scenario.leaves())} options, "
                 f"{len(scenario.facts)} facts, {len(scenario.actions)} actions")
        extra = ""
    else:
        shape = (f"HRS (deep): {len(scenario.steps)} steps, {sum(len(s.branches) for s in scenario.steps)} sub-steps, "
                 f"{len(scenario.rules)} global rules, {len(scenario.replies)} reply kinds, {len(scenario.facts)} facts")
        extra = "\n\n## Step graph\n\n" + _graph(scenario)
    sop = scenario.sop_text().replace("\n# ", "\n### ").replace("\n## ", "\n#### ")
    sop = sop.replace("# Procedure", "### Procedure", 1)
    return (f"# {scenario.title}\n\n{shape}\n\n## Objective\n\n{scenario.objective}\n\n## SOP (as the evaluated model "
            f"reads it)\n\n{sop}{extra}\n")


def instance_rows(content: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per kept instance: its path, noise and reference answer."""
    rows = []
    for i in content.get("instances", []):
        plan = i["plan"]
        rows.append({"id": i["id"], "kind": i["kind"], "path": " > ".join(plan["path"]),
                     "path kind": plan["path_kind"], "features": ", ".join(plan.get("features", [])),
                     "noise": ", ".join(n["phenomenon"] for n in plan.get("noise", [])),
                     "facts stated": len(plan["facts"]), "user turns": len(plan["turns"]),
                     "answer": f"{plan['target'].get('step')} / {plan['target'].get('action')}",
                     "format": plan["input_format"], "cycles": i.get("cycles", 1)})
    return rows


def instances_markdown(content: dict[str, Any]) -> str:
    columns = ["id", "kind", "path", "path kind", "features", "noise", "facts stated", "user turns", "answer",
               "format", "cycles"]
    parts = ["# SOP-Maze instances\n", markdown_table(instance_rows(content), columns), funnel_markdown(content)]
    for kind in ("LRS", "HRS"):
        example = next((i for i in content.get("instances", []) if i["kind"] == kind), None)
        if example:
            parts.append(f"\n## Example user input ({kind}, {example['id']})\n\n```\n{example['user_input']}\n```\n")
    return "\n".join(parts)


def baselines_markdown(content: dict[str, Any]) -> str:
    rows = [{"scenario": s["scenario"], "kind": s["kind"], "instances": s["instances"],
             **{r["name"]: f"{r['mean']:.2f} ({r['correct']} exact)" for r in s["results"]}}
            for s in content.get("scenarios", [])]
    readings = [{"instance": r["instance"], "asked": "yes" if r["asked"] else "reused", "decided": r["decided"]}
                for r in content.get("first_turn", [])]
    return ("# Shortcut baselines (format-only credit 0.20)\n\n"
            + markdown_table(rows, ["scenario", "kind", "instances", "majority_leaf", "first_turn", "constant"])
            + "\n## First-turn reader\n\n" + markdown_table(readings, ["instance", "asked", "decided"]))


def package_markdown(content: dict[str, Any]) -> str:
    comparison = [{"figure": a, "this set": b, "SOP-Maze paper": c} for a, b, c in content.get("paper", [])]
    baselines = [{"scenario": b["scenario"], "kind": b["kind"],
                  **{n: f"{b[n]['mean']:.2f}" for n in ("majority_leaf", "first_turn", "constant") if n in b}}
                 for b in content.get("baselines", [])]
    files = [{"file": k, "path": v} for k, v in content.get("files", {}).items()]
    return ("# SOP-Maze export\n\n" + markdown_table(comparison, ["figure", "this set", "SOP-Maze paper"])
            + "\n## Shortcut baselines (mean score; format-only credit 0.20)\n\n"
            + markdown_table(baselines, ["scenario", "kind", "majority_leaf", "first_turn", "constant"])
            + f"\nReference answers scored by the family's scorer: {content.get('reference_scores', {})}\n\n## Files\n\n"
            + markdown_table(files, ["file", "path"]))
