"""PROBE's scorers (section 3.1, L128-146): search P/R/F1, identification (T24) and resolution (T25).

Search is deterministic. Identification and resolution ask the ported judges; each verdict is
returned with the judge's raw text (:class:`JudgedAnswer`) so agent evaluation can store both.
Resolution scores 0 without a judge when the action is wrong (L142-146).
"""

from __future__ import annotations

from typing import Any

from sopforge.families.probe.asker import Asker
from sopforge.families.probe.models.documents import ParsedDocument
from sopforge.families.probe.models.verdicts import JudgedAnswer
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.judges import (
    IDENTIFICATION_TEMPLATE, PARAMETERS_TEMPLATE, ask_identification, ask_parameters,
)

__all__ = ["identification_score", "resolution_score", "search_scores"]


def search_scores(retrieved: list[str], true_ids: list[str]) -> dict[str, float]:
    """Precision, recall and F1 of retrieved document ids against the true positives (duplicates ignored).

    An empty retrieval scores 0 precision (nothing right was returned), as does an empty truth set.
    """
    got, truth = set(retrieved), set(true_ids)
    hits = len(got & truth)
    precision = hits / len(got) if got else 0.0
    recall = hits / len(truth) if truth else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


def identification_score(asker: Asker, item: str, world: WorldModel, identified: str, actual: str) -> JudgedAnswer:
    """T24's verdict on an agent's bottleneck; the score comes from the per-detail statuses."""
    verdict, raw = ask_identification(asker, item, world, identified, actual)
    return JudgedAnswer(score=verdict.score(), verdict=verdict.model_dump(mode="json"), raw_text=raw,
                        template_id=IDENTIFICATION_TEMPLATE, model=asker.model)


def resolution_score(asker: Asker, item: str, world: WorldModel, bottleneck: str, evidence: list[ParsedDocument],
                     solver_id: str, expected: dict[str, Any], action_id: str,
                     parameters: dict[str, Any]) -> JudgedAnswer:
    """0 for a wrong action (no judge asked); else T25's 1.0 / 0.5 / 0.0 on the parameters."""
    if action_id != solver_id:
        return JudgedAnswer(score=0.0, verdict={"action_correct": False, "selected": action_id, "expected": solver_id},
                            raw_text="", template_id="-", model="-")
    verdict, raw = ask_parameters(asker, item, world, bottleneck, evidence, action_id, parameters, expected)
    return JudgedAnswer(score=verdict.score(), verdict={"action_correct": True, **verdict.model_dump(mode="json")},
                        raw_text=raw, template_id=PARAMETERS_TEMPLATE, model=asker.model)
