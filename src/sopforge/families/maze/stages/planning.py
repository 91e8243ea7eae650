"""Seeded instance plans for one scenario: the drafts (LRS here, HRS walks), their dates, formats and noise.

It sits above :mod:`.sampling`, :mod:`.hrs_walks` and :mod:`.noise`, which share the draft type and
the shortcut test, so none of them imports another's caller.
"""

from __future__ import annotations

import random
from datetime import timedelta

from sopforge.families.maze.models.execution import compile_logic
from sopforge.families.maze.models.instances import INPUT_FORMATS, InstancePlan
from sopforge.families.maze.models.scenario import LRSScenario, Scenario
from sopforge.families.maze.stages.hrs_walks import hrs_drafts
from sopforge.families.maze.stages.noise import assign_noise
from sopforge.families.maze.stages.sampling import BASE_DATE, PlanError, finish, lrs_drafts

__all__ = ["PlanError", "plan_instances"]


def plan_instances(scenario: Scenario, count: int, *, noise: dict[str, float], max_turns: int, seed: int,
                   prefix: str | None = None) -> list[InstancePlan]:
    """``count`` seeded plans for ``scenario``, with every answer computed.

    Args:
        prefix: Instance ids are ``<prefix><n>`` (default ``L`` or ``H``).

    Raises:
        PlanError: fewer than ``count`` distinct plans exist.
    """
    rng = random.Random(f"{seed}:{scenario.kind}:{scenario.name}")
    logic = compile_logic(scenario)
    drafts = (lrs_drafts(scenario, logic, count, rng) if isinstance(scenario, LRSScenario)
              else hrs_drafts(scenario, logic, count, max_turns, rng))
    if len(drafts) < count:
        raise PlanError(f"scenario {scenario.name}: only {len(drafts)} distinct instances can be planned, "
                        f"{count} were asked for")
    formats = list(INPUT_FORMATS)
    rng.shuffle(formats)
    plans = drafts[:count]
    for index, draft in enumerate(plans, start=1):
        draft.call_date = (BASE_DATE + timedelta(days=rng.randrange(300))).isoformat()
        draft.format = formats[(index - 1) % len(formats)]
    assign_noise(scenario, logic, plans, noise, rng, max_turns=max(max_turns, 4))
    prefix = prefix if prefix is not None else ("L" if scenario.kind == "LRS" else "H")
    return [finish(scenario, logic, f"{prefix}{i}", d) for i, d in enumerate(plans, start=1)]
