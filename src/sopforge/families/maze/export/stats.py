"""The set's statistics beside the paper's (SOP-Maze §3.1, L8, L25, L52, L79, L145; Appendix B.2).

**Subtasks** are counted as the paper lays them out in Appendix B.2 ("Evaluation Input-Target Pairs
(Subtasks)"): one input-target pair per dialogue prefix that ends with a user turn and has an answer
(every user turn of an HRS call; every user turn of an LRS conversation whose facts settle one
option). The compared answer fields are counted too, as the digest's earlier reading did.
Specification tokens are those of the prompt without the user input, counted with
:func:`sopforge.tokens.approx_token_count` (an approximation, labelled with its method).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sopforge.families.maze.export.task_prompt import task_prompt
from sopforge.families.maze.models.instances import PHENOMENA, MazeInstance
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, HRSScenario, LRSScenario, Scenario
from sopforge.tokens import TOKEN_METHOD, approx_token_count

__all__ = ["PAPER", "noise_table", "paper_comparison", "set_statistics"]

PAPER: dict[str, Any] = {
    "scenarios": 23, "lrs_scenarios": 13, "hrs_scenarios": 10, "instances": 397, "subtasks": 3422,
    "avg_specification_tokens": 5040, "lrs_avg_parents": 5, "lrs_avg_leaves": 58,
    "source": "seeds/001_6dd03d47fea0db71.txt L8, L25, L52, L145, Appendix B.2",
}


def _coverage(scenario: Scenario, instances: list[MazeInstance]) -> tuple[int, int]:
    """(answer indices reached by some subtask or path, indices in all) of one scenario."""
    mine = [i for i in instances if i.scenario == scenario.name]
    if isinstance(scenario, LRSScenario):
        total = {o.id for _, o in scenario.leaves()}
        reached = {s.target["step"] for i in mine for s in i.plan.subtasks}
    else:
        total = set(scenario.answer_ids())
        reached = {n for i in mine for n in i.plan.path} | {s.target["step"] for i in mine for s in i.plan.subtasks}
    return len(reached & total), len(total)


def noise_table(instances: list[MazeInstance]) -> list[dict[str, Any]]:
    """Per phenomenon: instances tagged with it, and how many of those it changes the answer of."""
    rows = []
    for phenomenon in PHENOMENA:
        tagged = [n for i in instances for n in i.plan.noise if n.phenomenon == phenomenon]
        rows.append({"phenomenon": phenomenon, "tagged": len(tagged),
                     "changes_answer": sum(n.changes_answer for n in tagged)})
    noisy = [i for i in instances if i.plan.noise]
    rows.append({"phenomenon": "instances with noise", "tagged": len(noisy),
                 "changes_answer": sum(any(n.changes_answer for n in i.plan.noise) for i in noisy)})
    return rows


def set_statistics(scenarios: list[Scenario], instances: list[MazeInstance]) -> dict[str, Any]:
    """Counts of the exported set (what metadata.json and the run summary report)."""
    spec_tokens = {s.name: approx_token_count(task_prompt(s, "")) for s in scenarios}
    lrs = [s for s in scenarios if isinstance(s, LRSScenario)]
    hrs = [s for s in scenarios if isinstance(s, HRSScenario)]
    subtasks = [s for i in instances for s in i.plan.subtasks]
    coverage = {s.name: _coverage(s, instances) for s in scenarios}
    return {
        "scenarios": len(scenarios), "lrs_scenarios": len(lrs), "hrs_scenarios": len(hrs),
        "instances": len(instances),
        "instances_by_kind": dict(Counter(i.kind for i in instances)),
        "subtasks": len(subtasks),
        "subtasks_by_kind": dict(Counter(i.kind for i in instances for _ in i.plan.subtasks)),
        "compared_fields": sum(len([k for k in s.target if k not in EXCLUSION_KEYS]) for s in subtasks),
        "avg_specification_tokens": round(sum(spec_tokens.values()) / len(spec_tokens)) if spec_tokens else 0,
        "specification_tokens": spec_tokens,
        "token_method": TOKEN_METHOD,
        "task_types": {s.name: s.task_type for s in scenarios},
        "lrs_parents": {s.name: len(s.categories) for s in lrs},
        "lrs_leaves": {s.name: len(s.leaves()) for s in lrs},
        "hrs_steps": {s.name: len(s.steps) for s in hrs},
        "hrs_sub_steps": {s.name: sum(len(st.branches) for st in s.steps) + len(s.rules) for s in hrs},
        "coverage": {name: {"reached": r, "total": t} for name, (r, t) in coverage.items()},
        "user_turns": dict(sorted(Counter(len(i.plan.turns) for i in instances).items())),
        "noise_phenomena": {p: sum(1 for i in instances for n in i.plan.noise if n.phenomenon == p) for p in PHENOMENA},
        "noise_table": noise_table(instances),
        "instances_with_noise": sum(1 for i in instances if i.plan.noise),
        "precedence_decided": sum(1 for i in instances if i.kind == "LRS" and _decided_by_precedence(scenarios, i)),
        "path_kinds": dict(Counter(f"{i.kind}:{i.plan.path_kind}" for i in instances)),
        "path_features": dict(Counter(f for i in instances for f in i.plan.features)),
        "input_formats": dict(Counter(i.plan.input_format for i in instances)),
        "repaired": sum(1 for i in instances if i.cycles > 1),
    }


def _decided_by_precedence(scenarios: list[Scenario], instance: MazeInstance) -> bool:
    """The instance's facts satisfy an option its answer overrides (the stated precedence decides it)."""
    scenario = next((s for s in scenarios if s.name == instance.scenario), None)
    if not isinstance(scenario, LRSScenario):
        return False
    found = scenario.option(instance.target["step"])
    if found is None or not found[1].overrides:
        return False
    from sopforge.families.maze.models.execution import compile_logic
    from sopforge.families.maze.models.logic import Tri

    logic = compile_logic(scenario)
    region = logic.region_of(instance.plan.facts)
    return any(logic.truth(scenario.leaf_atoms(*loser), region) is Tri.TRUE
               for other in found[1].overrides if (loser := scenario.option(other)) is not None)


def paper_comparison(stats: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, this set, the paper) rows for the summary and the review page."""
    lrs_parents = list(stats["lrs_parents"].values())
    lrs_leaves = list(stats["lrs_leaves"].values())
    mean = lambda xs: f"{sum(xs) / len(xs):.0f}" if xs else "-"  # noqa: E731
    reached = sum(c["reached"] for c in stats["coverage"].values())
    total = sum(c["total"] for c in stats["coverage"].values())
    per_instance = stats["subtasks"] / stats["instances"] if stats["instances"] else 0
    return [
        ("scenarios (LRS / HRS)", f"{stats['scenarios']} ({stats['lrs_scenarios']} / {stats['hrs_scenarios']})",
         f"{PAPER['scenarios']} ({PAPER['lrs_scenarios']} / {PAPER['hrs_scenarios']})"),
        ("instances (dialogues)", str(stats["instances"]), str(PAPER["instances"])),
        ("subtasks (input-target pairs along the dialogues)",
         f"{stats['subtasks']} ({per_instance:.1f} per instance)", f"{PAPER['subtasks']} (8.6 per instance)"),
        ("specification tokens per scenario (approx.)", str(stats["avg_specification_tokens"]),
         str(PAPER["avg_specification_tokens"])),
        ("LRS parents per scenario", mean(lrs_parents), f"about {PAPER['lrs_avg_parents']}"),
        ("LRS leaves per scenario", mean(lrs_leaves), str(PAPER["lrs_avg_leaves"])),
        ("answer indices reached (options, steps, sub-steps, rules)", f"{reached} of {total}", "not reported"),
        ("noisy instances whose noise changes the answer",
         f"{stats['noise_table'][-1]['changes_answer']} of {stats['noise_table'][-1]['tagged']}", "not reported"),
    ]
