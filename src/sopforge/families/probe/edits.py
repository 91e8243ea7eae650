"""How a reviewer's edit of the gated PROBE artifact (bottlenecks and actions) is re-checked.

The edit is re-validated with the stage's deterministic checks against the world models it was
built from: bottleneck counts and diversity, exactly one solver per bottleneck, no bottleneck
keyword in any action. The LLM solver judge is not re-run on an edit: the reviewer's judgement
stands in for it, and the review page shows the earlier verdicts.
"""

from __future__ import annotations

from pydantic import BaseModel

from sopforge.checks import CheckResult
from sopforge.families.protocol import EditSpec
from sopforge.families.probe.models.bottlenecks import BottleneckSet
from sopforge.families.probe.verify.bottleneck_checks import check_actions, check_bottlenecks
from sopforge.settings import Settings

__all__ = ["BOTTLENECKS_EDIT"]


def _check(artifact: BottleneckSet, parents: dict[str, BaseModel], settings: Settings) -> list[CheckResult]:
    worlds = parents["probe_world"]
    checks: list[CheckResult] = []
    for p in artifact.personas:
        world = worlds.of(p.persona_id)
        checks += check_bottlenecks(p.bottlenecks, world, len(p.bottlenecks))
        checks += check_actions(p.actions, p.bottlenecks, world, len(p.actions))
    return checks


BOTTLENECKS_EDIT = EditSpec(check=_check)
