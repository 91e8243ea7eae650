"""The SOP-Maze scorer: 1.0 correct, 0.2 schema-valid but wrong, 0 invalid (seeds/001 §4.2, L97, L112).

Model-free and deterministic, as the paper's evaluation (L30, L91-97) and its public scorer
(``src/evaluate.py`` in the authors' repository, digest §5):

1. **Parse** leniently: a code fence or text around the object is tolerated; no object is 0.
2. **Validate** against the instance's draft-07 schema; a violation is 0.
3. **Compare** every key of the target except the *exclusion keys* (the paper's
   ``no_required_eval_acc_keys``: free text such as ``response`` is schema-checked, never
   compared), at any depth: strings case- and whitespace-insensitively, lists as unordered
   collections, other scalars by value. All equal is 1.0, else 0.2.

Per field, each compared top-level key scores the same way on its own (1.0 / 0.2 / 0), which
shows, say, a right category with a wrong option. Aggregates follow the digest (§5): scenario
score = mean x 100; HRS and LRS scores = unweighted means of their scenarios; the overall both
instance-weighted and as (HRS + LRS) / 2, labelled.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, Field

from sopforge.families.maze.verify.instance_checks import schema_errors

__all__ = ["FORMAT_CREDIT", "AnswerScore", "SetScore", "parse_answer", "score_answer", "score_set"]

FORMAT_CREDIT = 0.2  # "a baseline score of 0.2 points is awarded when the output adheres to the format" (L97)


class AnswerScore(BaseModel):
    """The score of one answer."""

    score: float = Field(description="1.0, 0.2 or 0.")
    valid: bool = Field(description="Parsed and valid against the schema.")
    reason: str = Field(description="Why it is not 1.0 (empty when it is).")
    fields: dict[str, float] = Field(default_factory=dict, description="Compared key -> 1.0 / 0.2 / 0 on its own.")


class SetScore(BaseModel):
    """Scores of a set of answers, with the paper's aggregates."""

    per_instance: dict[str, AnswerScore] = Field(description="Instance id -> its score.")
    per_scenario: dict[str, float] = Field(description="Scenario -> mean score x 100.")
    per_field: dict[str, dict[str, float]] = Field(description="Scenario -> compared key -> mean field score x 100.")
    hrs: float | None = Field(description="Unweighted mean of the HRS scenarios' scores.")
    lrs: float | None = Field(description="Unweighted mean of the LRS scenarios' scores.")
    overall_instance_weighted: float = Field(description="Mean over all instances x 100 (the repository's number).")
    overall_kind_mean: float | None = Field(description="(HRS + LRS) / 2, as the paper's Figure 2 caption says.")
    counts: dict[str, int] = Field(description="How many answers scored 1.0, 0.2 and 0 (the paper's Table 1).")


def parse_answer(text: str) -> Any:
    """The JSON value in a model's reply, or None: a code fence or prose around one object is tolerated."""
    stripped = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", text.strip())
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        return value
    return None


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.lower().split())
    return value


def _drop(value: Any, exclusion: list[str]) -> Any:
    if isinstance(value, dict):
        return {k: _drop(v, exclusion) for k, v in value.items() if k not in exclusion}
    return value


def _differences(expected: Any, got: Any, exclusion: list[str], where: str = "") -> list[str]:
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [f"{where or 'answer'} is not an object"]
        found = []
        for key, value in expected.items():
            if key in exclusion:
                continue
            path = f"{where}.{key}" if where else key
            if key not in got:
                found.append(f"{path} missing")
            else:
                found += _differences(value, got[key], exclusion, path)
        return found
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return [f"{where}: expected {len(expected)} items"]
        canon = lambda items: Counter(json.dumps(_norm_deep(_drop(i, exclusion)), sort_keys=True) for i in items)  # noqa: E731
        return [] if canon(expected) == canon(got) else [f"{where}: items differ"]
    return [] if _norm(expected) == _norm(got) else [f"{where}: expected {expected!r}, got {got!r}"]


def _norm_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_norm_deep(v) for v in value]
    return _norm(value)


def score_answer(answer: str | dict[str, Any], target: dict[str, Any], schema: dict[str, Any],
                 exclusion_keys: list[str]) -> AnswerScore:
    """Score one answer against one instance's target, schema and exclusion keys."""
    compared = [k for k in target if k not in exclusion_keys]
    parsed = parse_answer(answer) if isinstance(answer, str) else answer
    if parsed is None:
        return AnswerScore(score=0.0, valid=False, reason="no JSON object in the answer", fields=dict.fromkeys(compared, 0.0))
    errors = schema_errors(schema, parsed)
    if errors:
        return AnswerScore(score=0.0, valid=False, reason="outside the schema: " + "; ".join(errors),
                           fields=dict.fromkeys(compared, 0.0))
    fields = {k: 1.0 if not _differences(target[k], parsed.get(k), exclusion_keys, k) and k in parsed
              else FORMAT_CREDIT for k in compared}
    differences = _differences(target, parsed, exclusion_keys)
    return AnswerScore(score=1.0 if not differences else FORMAT_CREDIT, valid=True,
                       reason="; ".join(differences), fields=fields)


def score_set(answers: dict[str, str | dict[str, Any]], instances: list[dict[str, Any]]) -> SetScore:
    """Score ``answers`` (instance id -> reply) over exported instance records (``id``, ``scenario``,
    ``kind``, ``target``, ``json_schema``, ``no_required_eval_acc_keys``). A missing answer scores 0."""
    per_instance: dict[str, AnswerScore] = {}
    by_scenario: dict[str, list[AnswerScore]] = defaultdict(list)
    kinds: dict[str, str] = {}
    for record in instances:
        result = score_answer(answers.get(record["id"], ""), record["target"], record["json_schema"],
                              record.get("no_required_eval_acc_keys") or [])
        per_instance[record["id"]] = result
        by_scenario[record["scenario"]].append(result)
        kinds[record["scenario"]] = record["kind"]
    per_scenario = {s: round(100 * sum(r.score for r in rs) / len(rs), 2) for s, rs in by_scenario.items()}
    per_field = {s: {k: round(100 * sum(r.fields[k] for r in rs) / len(rs), 2) for k in rs[0].fields}
                 for s, rs in by_scenario.items()}

    def macro(kind: str) -> float | None:
        values = [v for s, v in per_scenario.items() if kinds[s] == kind]
        return round(sum(values) / len(values), 2) if values else None

    hrs, lrs = macro("HRS"), macro("LRS")
    scores = [r.score for r in per_instance.values()]
    return SetScore(
        per_instance=per_instance, per_scenario=per_scenario, per_field=per_field, hrs=hrs, lrs=lrs,
        overall_instance_weighted=round(100 * sum(scores) / len(scores), 2) if scores else 0.0,
        overall_kind_mean=round((hrs + lrs) / 2, 2) if hrs is not None and lrs is not None else None,
        counts={"1.0": scores.count(1.0), "0.2": scores.count(FORMAT_CREDIT), "0": scores.count(0.0)})
