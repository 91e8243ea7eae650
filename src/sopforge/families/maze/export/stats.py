"""The set's statistics beside the paper's (SOP-Maze §3.1, L8, L25, L52, L79, L145).

"Subtasks" are never defined in the paper; the authors' data gives about 8.6 per instance, close
to the number of compared answer fields (digest section 1), so we count the compared fields of
every target (all keys minus the exclusion keys). Specification tokens are those of the prompt
without the user input, counted with :func:`sopforge.tokens.approx_token_count` (an
approximation, labelled with its method).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sopforge.families.maze.export.task_prompt import task_prompt
from sopforge.families.maze.models.instances import MazeInstance
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, HRSScenario, LRSScenario, Scenario
from sopforge.tokens import TOKEN_METHOD, approx_token_count

__all__ = ["PAPER", "set_statistics", "paper_comparison"]

PAPER: dict[str, Any] = {
    "scenarios": 23, "lrs_scenarios": 13, "hrs_scenarios": 10, "instances": 397, "subtasks": 3422,
    "avg_specification_tokens": 5040, "lrs_avg_parents": 5, "lrs_avg_leaves": 58,
    "source": "seeds/001_6dd03d47fea0db71.txt L8, L25, L52, L145",
}


def set_statistics(scenarios: list[Scenario], instances: list[MazeInstance]) -> dict[str, Any]:
    """Counts of the exported set (what metadata.json and the run summary report)."""
    spec_tokens = {s.name: approx_token_count(task_prompt(s, "")) for s in scenarios}
    lrs = [s for s in scenarios if isinstance(s, LRSScenario)]
    hrs = [s for s in scenarios if isinstance(s, HRSScenario)]
    noise = Counter(n.phenomenon for i in instances for n in i.plan.noise)
    return {
        "scenarios": len(scenarios), "lrs_scenarios": len(lrs), "hrs_scenarios": len(hrs),
        "instances": len(instances),
        "instances_by_kind": dict(Counter(i.kind for i in instances)),
        "subtasks": sum(len([k for k in i.target if k not in EXCLUSION_KEYS]) for i in instances),
        "avg_specification_tokens": round(sum(spec_tokens.values()) / len(spec_tokens)) if spec_tokens else 0,
        "specification_tokens": spec_tokens,
        "token_method": TOKEN_METHOD,
        "lrs_parents": {s.name: len(s.categories) for s in lrs},
        "lrs_leaves": {s.name: len(s.leaves()) for s in lrs},
        "hrs_steps": {s.name: len(s.steps) for s in hrs},
        "hrs_sub_steps": {s.name: sum(len(st.branches) for st in s.steps) + len(s.rules) for s in hrs},
        "user_turns": dict(sorted(Counter(len(i.plan.turns) for i in instances).items())),
        "noise_phenomena": {p: noise.get(p, 0) for p in ("intent_reversal", "sarcasm", "disfluency", "off_topic",
                                                         "calculation")},
        "instances_with_noise": sum(1 for i in instances if i.plan.noise),
        "path_kinds": dict(Counter(f"{i.kind}:{i.plan.path_kind}" for i in instances)),
        "path_features": dict(Counter(f for i in instances for f in i.plan.features)),
        "input_formats": dict(Counter(i.plan.input_format for i in instances)),
        "repaired": sum(1 for i in instances if i.cycles > 1),
    }


def paper_comparison(stats: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, this set, the paper) rows for the summary and the review page."""
    lrs_parents = list(stats["lrs_parents"].values())
    lrs_leaves = list(stats["lrs_leaves"].values())
    mean = lambda xs: f"{sum(xs) / len(xs):.0f}" if xs else "-"  # noqa: E731
    return [
        ("scenarios (LRS / HRS)", f"{stats['scenarios']} ({stats['lrs_scenarios']} / {stats['hrs_scenarios']})",
         f"{PAPER['scenarios']} ({PAPER['lrs_scenarios']} / {PAPER['hrs_scenarios']})"),
        ("instances", str(stats["instances"]), str(PAPER["instances"])),
        ("subtasks (compared answer fields)", str(stats["subtasks"]), str(PAPER["subtasks"])),
        ("specification tokens per scenario (approx.)", str(stats["avg_specification_tokens"]),
         str(PAPER["avg_specification_tokens"])),
        ("LRS parents per scenario", mean(lrs_parents), f"about {PAPER['lrs_avg_parents']}"),
        ("LRS leaves per scenario", mean(lrs_leaves), str(PAPER["lrs_avg_leaves"])),
        ("noise phenomena (reversal / sarcasm / disfluency / off-topic / calculation)",
         " / ".join(str(v) for v in stats["noise_phenomena"].values()), "not counted"),
    ]
