"""Markdown of the maze artifacts for the Prefect UI, review pages and ``sopforge show``.

Works on stored content dicts, so any stored version renders; a scenario is shown as the SOP
the evaluated model reads (rendered from the tree) plus, for HRS, its step graph.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, atoms_of
from sopforge.markdown import funnel_markdown, markdown_table

__all__ = ["baselines_markdown", "instance_rows", "instances_markdown", "package_markdown", "scenario_markdown",
           "scenario_set_markdown"]


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
        exceptions = sum(len(o.overrides) for _, o in scenario.leaves())
        shape = (f"LRS (wide, {scenario.task_type or 'disposition'}): {len(scenario.categories)} categories, "
                 f"{len(scenario.leaves())} options, {len(scenario.facts)} facts, {len(scenario.actions)} actions, "
                 f"{exceptions} stated exceptions" + (f", reports {', '.join(scenario.report)}" if scenario.report else ""))
        extra = ""
    else:
        shape = (f"HRS (deep, {scenario.task_type or 'call'}): {len(scenario.steps)} steps, {sum(len(s.branches) for s in scenario.steps)} sub-steps, "
                 f"{len(scenario.rules)} global rules, {len(scenario.replies)} reply kinds, {len(scenario.facts)} facts")
        extra = "\n\n## Step graph\n\n" + _graph(scenario)
    sop = scenario.sop_text(messy=True).replace("\n# ", "\n### ").replace("\n## ", "\n#### ")
    sop = sop.replace("# Procedure", "### Procedure", 1)
    return (f"# {scenario.title}\n\n{shape}\n\n## Objective\n\n{scenario.objective}\n\n## SOP (as the evaluated model "
            f"reads it: messy on purpose, the tree decides)\n\n{sop}{extra}\n")


def scenario_set_markdown(content: dict[str, Any]) -> str:
    """Every scenario of a set, one after the other."""
    scenarios = content.get("scenarios", [])
    parts = [f"# {content.get('kind', '')} scenarios: {len(scenarios)}\n"]
    parts += [scenario_markdown(s).replace("\n# ", "\n## ").replace("# ", "## ", 1) for s in scenarios]
    return "\n".join(parts)


def instance_rows(content: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per kept instance: its path, noise and reference answer."""
    rows = []
    for i in content.get("instances", []):
        plan = i["plan"]
        rows.append({"id": i["id"], "kind": i["kind"], "scenario": i.get("scenario", ""), "path": " > ".join(plan["path"]),
                     "path kind": plan["path_kind"], "features": ", ".join(plan.get("features", [])),
                     "noise": ", ".join(n["phenomenon"] + ("*" if n.get("changes_answer") else "")
                                        for n in plan.get("noise", [])),
                     "subtasks": len(plan.get("subtasks", [])),
                     "facts stated": len(plan["facts"]), "user turns": len(plan["turns"]),
                     "answer": f"{plan['target'].get('step')} / {plan['target'].get('action')}",
                     "format": plan["input_format"], "cycles": i.get("cycles", 1)})
    return rows


def instances_markdown(content: dict[str, Any]) -> str:
    columns = ["id", "kind", "scenario", "path", "path kind", "features", "noise", "facts stated", "user turns",
               "subtasks", "answer", "format", "cycles"]
    parts = ["# SOP-Maze instances\n", "Noise marked * changes the answer when its decoy is taken for the truth.\n",
             markdown_table(instance_rows(content), columns), funnel_markdown(content)]
    for kind in ("LRS", "HRS"):
        example = next((i for i in content.get("instances", []) if i["kind"] == kind), None)
        if example:
            parts.append(f"\n## Example user input ({kind}, {example['id']})\n\n```\n{example['user_input']}\n```\n")
    return "\n".join(parts)


def baselines_markdown(content: dict[str, Any]) -> str:
    names = ["majority", "first_turn", "last_turn", "first_option"]
    rows = [{"scenario": s["scenario"], "kind": s["kind"], "instances": s["instances"],
             **{r["name"]: f"{r['mean']:.2f} ({r['correct']} exact)" for r in s["results"]}}
            for s in content.get("scenarios", [])]
    rows += [{"scenario": f"all {kind}", "kind": kind, "instances": "-", **{n: f"{m[n]:.2f}" for n in names}}
             for kind, m in content.get("pooled", {}).items()]
    readings = [{"instance": r["instance"], "reader": r["shortcut"], "asked": "yes" if r["asked"] else "reused",
                 "decided": r["decided"]} for r in content.get("readings", [])]
    return (f"# Shortcut baselines (format-only credit 0.20, gate < {content.get('max_baseline', 0.35):.2f})\n\n"
            + markdown_table(rows, ["scenario", "kind", "instances", *names])
            + "\n## Shortcut readers\n\n" + markdown_table(readings, ["instance", "reader", "asked", "decided"]))


def package_markdown(content: dict[str, Any]) -> str:
    names = ["majority", "first_turn", "last_turn", "first_option"]
    comparison = [{"figure": a, "this set": b, "SOP-Maze paper": c} for a, b, c in content.get("paper", [])]
    noise = [{"phenomenon": r["phenomenon"], "tagged": r["tagged"], "answer changes": r["changes_answer"]}
             for r in content.get("noise_table", [])]
    baselines = [{"scenario": b["scenario"], "kind": b["kind"],
                  **{n: f"{b[n]['mean']:.2f}" for n in names if n in b}} for b in content.get("baselines", [])]
    files = [{"file": k, "path": v} for k, v in content.get("files", {}).items()]
    return ("# SOP-Maze export\n\n" + markdown_table(comparison, ["figure", "this set", "SOP-Maze paper"])
            + "\n## Noise that changes answers\n\n" + markdown_table(noise, ["phenomenon", "tagged", "answer changes"])
            + "\n## Shortcut baselines (mean score on final answers; format-only credit 0.20)\n\n"
            + markdown_table(baselines, ["scenario", "kind", *names])
            + f"\nSubtask targets scored by the family's scorer: {content.get('reference_scores', {})}\n\n## Files\n\n"
            + markdown_table(files, ["file", "path"]))
