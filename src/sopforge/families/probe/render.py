"""Markdown of the PROBE artifacts for the Prefect UI, review pages and ``sopforge show``.

Works on stored content dicts, so any version renders without being re-validated.
"""

from __future__ import annotations

from typing import Any

from sopforge.markdown import funnel_markdown, markdown_table

__all__ = ["assembly_markdown", "attack_rows", "bottlenecks_markdown", "documents_markdown", "package_markdown", "personas_markdown",
           "plans_markdown", "sample_rows", "world_markdown"]


def personas_markdown(content: dict[str, Any]) -> str:
    rows = content.get("personas", [])
    return "# PROBE personas\n\n" + markdown_table(rows, ["id", "name", "occupation", "role", "sub_business",
                                                         "location", "difficulty"])


def world_markdown(content: dict[str, Any]) -> str:
    parts = ["# PROBE world models\n"]
    for w in content.get("worlds", []):
        p, o, c = w["persona"], w["org"], w["personal"]
        parts.append(f"## {p['id']}: {p['name']}, {p['occupation']} ({p['difficulty']})\n\n"
                     f"{o['company_name']} ({o['company_type']}), {o['department']}; reports to {o['reporting_to']}; "
                     f"today {w.get('today', '')}.\n\nGoals: " + "; ".join(c["current_goals"]) + "\n")
        parts.append(markdown_table(w["relationships"], ["name", "role", "type", "department", "email"]))
    return "\n".join(parts)


def bottlenecks_markdown(content: dict[str, Any]) -> str:
    """The review page of the gate: each bottleneck beside its solver and the judge's verdict."""
    parts = ["# PROBE bottlenecks and action spaces\n",
             "Each bottleneck becomes a sample; its solver is the one action labelled for it, proven unique by an "
             "independent judge that never saw the label. Dropped bottlenecks are listed under the funnel.\n"]
    for p in content.get("personas", []):
        actions = {a["id"]: a for a in p["actions"]}
        rows = []
        for i, b in enumerate(p["bottlenecks"], 1):
            solver = next((a for a in p["actions"] if a.get("solves_bottleneck") == i), {})
            verdict = p.get("verdicts", {}).get(str(i), {})
            rows.append({"#": i, "type": b["type"], "urgency": b["urgency"], "bottleneck": b["description"],
                         "solver": solver.get("id", "?"), "judge picked": verdict.get("resolving_action", ""),
                         "kept": "yes" if i in p.get("kept", []) else "no"})
        parts.append(f"## {p['persona_id']} ({p['difficulty']})\n\n"
                     + markdown_table(rows, ["#", "type", "urgency", "bottleneck", "solver", "judge picked", "kept"]))
        parts.append("\n" + markdown_table([{**a, "required": ", ".join(a["params_schema"]["required"]),
                                             "solves": a.get("solves_bottleneck") or ""} for a in actions.values()],
                                           ["id", "type", "description", "required", "solves"]))
    return "\n".join(parts) + "\n" + funnel_markdown(content)


def plans_markdown(content: dict[str, Any]) -> str:
    parts = ["# PROBE checklists and evidence plans\n"]
    for s in content.get("samples", []):
        step = s["checklist"]["task_selection_step"]
        parts.append(f"## {s['sample_id']}\n\nRoot cause: {s['checklist']['identification_step']['root_cause']}\n\n"
                     f"Expected action `{step['action_id']}` with {step['parameters']}\n")
        parts.append(markdown_table(s["plan"], ["document_type", "evidence_role", "sender_or_creator"]))
    return "\n".join(parts)


def documents_markdown(content: dict[str, Any]) -> str:
    """Evidence, distractor and hard-negative sets: one row per kept document, its verdicts, the funnel."""
    rows = []
    for j in content.get("documents", []):
        d = j["document"]
        rows.append({"id": d["id"], "sample": d.get("sample_id") or d["persona_id"], "origin": d["origin"],
                     "title": d["title"],
                     "review": (j.get("review") or {}).get("quality_score", ""),
                     "evidence of": ", ".join(map(str, (j.get("conveys") or {}).get("evidence_of", []))) or "none",
                     "changed": "; ".join(f"{c['what']}: {c['original']} -> {c['replacement']}"
                                          for c in d.get("changed", []))})
    text = "# PROBE documents\n\n" + markdown_table(rows, ["id", "sample", "origin", "title", "review", "evidence of",
                                                            "changed"])
    if content.get("sufficiency"):
        text += "\n## Sufficiency (a reader of the true positives alone, judged by T24)\n\n" + markdown_table(
            [{"sample": k, "score": v["score"], "reader": v["reader_bottleneck"]}
             for k, v in content["sufficiency"].items()], ["sample", "score", "reader"])
    return text + "\n" + funnel_markdown(content)


def sample_rows(content: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per sample: its size, hardening rounds and the attacks that came closest (table view, ``show``)."""
    rows = []
    for s in content.get("samples", []):
        attacks = {a["name"]: a for a in s.get("attacks", [])}
        closest = sorted(attacks.values(), key=lambda a: a["p_value"])[:2]
        rows.append({"sample": s["sample_id"], "difficulty": s["difficulty"], "type": s["bottleneck"]["type"],
                     "docs": len(s["datastore"]), "tokens": s["tokens"], "T": len(s["true_positives"]),
                     "actions": len(s["actions"]), "rounds": max(len(s.get("rounds", [])) - 1, 0),
                     "random F1": attacks.get("recency", {}).get("random", ""),
                     "closest attacks": "; ".join(f"{a['name']} p={a['p_value']:.3g}" for a in closest)})
    return rows


def attack_rows(content: dict[str, Any]) -> list[dict[str, Any]]:
    """The attack table over the kept samples: each attack's mean score beside random's."""
    return [{"attack": r["attack"], "kind": r["kind"], "score": r["score"], "random": r["random"], "ratio": r["ratio"],
             "set p": r["set_p_value"], "near random": "yes" if r["near_random"] else "NO"}
            for r in content.get("attack_table", [])]


def assembly_markdown(content: dict[str, Any]) -> str:
    tests = [{**t, "p_value": f"{t['p_value']:.4f}"} for t in content.get("two_sample_tests", [])]
    rows = sample_rows(content)
    attacks = attack_rows(content)
    return ("# PROBE samples, shortcut attacks and the hardening loop\n\n"
            + markdown_table(rows, list(rows[0]) if rows else ["sample"])
            + "\n## Attacks against random (search F1 or right-action rate, mean over the kept samples)\n\n"
            + markdown_table(attacks, list(attacks[0]) if attacks else ["attack"])
            + "\n## Two-sample tests (true positives vs distractors and hard negatives)\n\n"
            + markdown_table(tests, ["feature", "p_value", "separable", "true_positives", "distractors"])
            + "\n" + funnel_markdown(content))


def package_markdown(content: dict[str, Any]) -> str:
    stats = content.get("stats", {})
    rows = [{"statistic": k, **stats[k]} for k in ("tokens", "actions", "documents", "true_positives") if stats.get(k)]
    return (f"# PROBE export\n\n{content.get('export_dir')}\n\n" + markdown_table(rows, ["statistic", "min", "max",
                                                                                         "mean", "std"])
            + f"\nDifficulty: {stats.get('difficulty')}; bottleneck types: {stats.get('bottleneck_types')}\n")
