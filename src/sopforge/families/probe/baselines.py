"""Baseline agents for PROBE evaluation: answers that read no meaning into the datastore.

Scored by the same code as the evaluated model (``sopforge eval``), they show what the metrics give
for nothing: ``empty`` answers nothing; ``random`` returns |T| documents and an action at random (it
is told |T|, which no real agent is, so its search scores are random's at the right size);
``bm25`` returns the |T| documents BM25 ranks highest for the world model and the actions, and the
action the datastore matches most; ``recency`` the |T| newest documents and a random action. None of
them states a bottleneck or parameters, so identification and resolution score 0 without a judge.
"""

from __future__ import annotations

import random
from typing import Any

from sopforge.families.probe.models.bottlenecks import Action
from sopforge.families.probe.models.documents import Document, parse_document
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.attacks import action_attacks, search_attacks

__all__ = ["BASELINES", "baseline_answer", "export_documents", "export_world"]

BASELINES: tuple[str, ...] = ("empty", "random", "bm25", "recency")


def export_documents(record: dict[str, Any]) -> list[Document]:
    """The datastore of an exported sample as documents (roles unknown to an agent: all read as distractors)."""
    docs = []
    for entry in record["agent_input"]["datastore"]:
        parsed = parse_document(entry["text"], entry["type"])
        docs.append(Document(**parsed.model_dump(), id=entry["id"], role="distractor", persona_id=record["persona_id"],
                             sample_id=record["sample_id"], origin="export"))
    return docs


def export_world(record: dict[str, Any]) -> tuple[WorldModel, list[Action]]:
    """The world model and actions of an exported sample (the export drops the persona's difficulty)."""
    world = dict(record["agent_input"]["world_model"])
    actions = [Action.model_validate(a) for a in world.pop("available_actions")]
    world["persona"] = {**world["persona"], "difficulty": record["difficulty"]}
    return WorldModel.model_validate(world), actions


def baseline_answer(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """The answer of baseline ``name`` on an exported sample, in the agent's answer format."""
    if name == "empty":
        return {"retrieved_documents": [], "bottleneck": "", "action": {"function_name": "", "parameters": {}}}
    world, actions = export_world(record)
    docs = export_documents(record)
    k = len(record["ground_truth"]["true_positives"])
    rng = random.Random(f"{record['sample_id']}:{name}")
    action = rng.choice(actions).id
    if name == "random":
        picked = rng.sample([d.id for d in docs], k)
    else:
        scores = search_attacks(world, actions, docs, [])["bm25_actions" if name == "bm25" else "recency"]
        picked = sorted(scores, key=lambda i: (-scores[i], i))[:k]
        if name == "bm25":
            action = action_attacks(actions, docs)["action_overlap"][0]
    return {"retrieved_documents": picked, "bottleneck": "", "action": {"function_name": action, "parameters": {}}}
