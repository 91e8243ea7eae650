"""Checks of an HRS (deep) scenario: wiring, shape, exits, silent loops and reachability (L147, L346-355).

Split from :mod:`.scenario_checks`, which runs them; the failure messages name the steps and
sub-steps involved, because they are quoted back to the model on re-ask and shown to a reviewer.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable

from sopforge.checks import CheckResult, check
from sopforge.families.maze.models.execution import Turn, compile_logic, hrs_turn
from sopforge.families.maze.models.logic import REPLY, Logic
from sopforge.families.maze.models.scenario import HRSScenario, atoms_of

__all__ = ["HRS_SHAPE", "POINT_LIMIT", "duplicates", "find_cycle", "hrs_checks", "hrs_reachability",
           "hrs_reachability_checks"]

# HRS: deep enough to need state tracking (L147): steps, a prerequisite check, a jump, a loop, an ending.
HRS_SHAPE = {"min_steps": 6, "min_depth": 4, "min_replies": 3}
POINT_LIMIT = 4096  # case-fact combinations enumerated exactly by the HRS reachability analysis


def duplicates(ids: Iterable[str]) -> list[str]:
    ids = list(ids)
    return sorted({i for i in ids if ids.count(i) > 1})


def _edges(s: HRSScenario) -> list[tuple[str, str, str]]:
    """(from step, node id, to step) for every goto of a sub-step; rules leave every waiting step."""
    edges = [(st.id, b.id, b.target) for st in s.steps for b in st.branches if b.then == "goto" and b.target]
    edges += [(st.id, r.id, r.target) for r in s.rules if r.then == "goto" and r.target
              for st in s.steps if s.waits(st)]
    return edges  # type: ignore[return-value]


def hrs_checks(s: HRSScenario) -> list[CheckResult]:
    step_ids = [st.id for st in s.steps]
    ids = s.answer_ids()
    misplaced = [b.id for st in s.steps for b in st.branches if not b.id.startswith(f"{st.id}.")]
    wiring = []
    for node_id, then, target, script in ([(b.id, b.then, b.target, b.script) for st in s.steps for b in st.branches]
                                          + [(r.id, r.then, r.target, r.script) for r in s.rules]):
        if then == "goto" and target not in step_ids:
            wiring.append(f"{node_id} goes to unknown step {target!r}")
        if then == "end" and not (script or "").strip():
            wiring.append(f"{node_id} ends the call without a script")
        if then != "goto" and target:
            wiring.append(f"{node_id} names a target but does not go there")
    empty = [st.id for st in s.steps if not st.branches]
    wiring += [f"Step {i} has no sub-steps" for i in empty]
    deaf = [st.id for st in s.steps if s.waits(st) and not any(a.fact == REPLY for b in st.branches
                                                                for a in atoms_of(b.when))]
    deaf_rules = [r.id for r in s.rules if not any(a.fact == REPLY for a in atoms_of(r.when))]
    results = [
        check("maze.hrs.ids", not duplicates(ids) and not misplaced, "ids must be unique and each sub-step id must "
              f"start with its step id and a dot: duplicates {duplicates(ids)}, misplaced {misplaced}"
              if duplicates(ids) or misplaced else f"{len(ids)} unique ids", duplicates=duplicates(ids)),
        check("maze.hrs.wiring", not wiring, "; ".join(wiring) if wiring else "every goto names a step, every "
              "ending has a script", problems=wiring),
        check("maze.hrs.start", bool(s.steps) and s.waits(s.steps[0]),
              "the call starts at the first step, which has a script" if s.steps and s.waits(s.steps[0]) else
              f"the first step ({step_ids[0] if step_ids else 'none'}) starts the call and needs a suggested script"),
        check("maze.hrs.replies_read", not deaf and not deaf_rules, "a step with a script waits for the user, so one "
              f"of its sub-steps must test the reply (steps {deaf}); every global rule must test the reply too "
              f"(rules {deaf_rules})" if deaf or deaf_rules else "every waiting step and rule tests the reply",
              steps=deaf, rules=deaf_rules),
    ]
    if any(r.blocking for r in results):
        return results
    return results + [_hrs_shape(s), _exits(s), _silent_loops(s)]


def _hrs_shape(s: HRSScenario) -> CheckResult:
    order = {st.id: i for i, st in enumerate(s.steps)}
    checks_on_facts = [st.id for st in s.steps if not s.waits(st)
                       and not any(a.fact == REPLY for b in st.branches for a in atoms_of(b.when))]
    gotos = [(st.id, b.target) for st in s.steps for b in st.branches if b.then == "goto"]
    jumps = [f"{a}->{b}" for a, b in gotos if order[b] > order[a] + 1]
    loops = [f"{a}->{b}" for a, b in gotos if order[b] <= order[a]]
    loops += [b.id for st in s.steps for b in st.branches if b.then == "answer"]
    ends = [b.id for st in s.steps for b in st.branches if b.then == "end"] + [r.id for r in s.rules if r.then == "end"]
    depth = _depth(s)
    missing = []
    if len(s.steps) < HRS_SHAPE["min_steps"]:
        missing.append(f"{len(s.steps)} steps (at least {HRS_SHAPE['min_steps']})")
    if depth < HRS_SHAPE["min_depth"]:
        missing.append(f"the longest route visits {depth} steps (at least {HRS_SHAPE['min_depth']})")
    if len(s.replies) < HRS_SHAPE["min_replies"]:
        missing.append(f"{len(s.replies)} reply kinds (at least {HRS_SHAPE['min_replies']})")
    for what, found in (("prerequisite step (no script, checks case facts only)", checks_on_facts),
                        ("jump (a goto that skips at least one step)", jumps),
                        ("loop (a return to an earlier or the same step, or an answer that stays)", loops),
                        ("ending", ends), ("global rule", s.rules)):
        if not found:
            missing.append(f"no {what}")
    return check("maze.hrs.shape", not missing, "not an HRS (deep) procedure: " + "; ".join(missing) if missing else
                 f"{len(s.steps)} steps, depth {depth}, {len(checks_on_facts)} checks, {len(jumps)} jumps, "
                 f"{len(loops)} loops, {len(ends)} endings", depth=depth, checks=checks_on_facts, jumps=jumps,
                 loops=loops)


def _depth(s: HRSScenario) -> int:
    """Steps on the longest route without repeats from the first step (the tree's depth)."""
    nxt: dict[str, set[str]] = {}
    for a, _, b in _edges(s):
        nxt.setdefault(a, set()).add(b)
    best = 0

    def walk(node: str, seen: tuple[str, ...]) -> None:
        nonlocal best
        best = max(best, len(seen))
        for child in sorted(nxt.get(node, ())):
            if child not in seen and len(seen) < 40:
                walk(child, seen + (child,))

    if s.steps:
        walk(s.steps[0].id, (s.steps[0].id,))
    return best


def _exits(s: HRSScenario) -> CheckResult:
    """Every step can reach an ending; otherwise the steps that cannot form a cycle without exit."""
    ending = {st.id for st in s.steps if any(b.then == "end" for b in st.branches)}
    if any(r.then == "end" for r in s.rules):
        ending |= {st.id for st in s.steps if s.waits(st)}
    reaches = set(ending)
    edges = _edges(s)
    changed = True
    while changed:
        changed = False
        for a, _, b in edges:
            if b in reaches and a not in reaches:
                reaches.add(a)
                changed = True
    trapped = [st.id for st in s.steps if st.id not in reaches]
    return check("maze.hrs.exits", not trapped, f"steps {', '.join(trapped)} can never reach an ending: a cycle without "
                 "exit; give one of them a sub-step that ends the call or leads to a step that does" if trapped else
                 "every step can reach an ending", trapped=trapped)


def _silent_loops(s: HRSScenario) -> CheckResult:
    """Gotos into steps without a script are followed at once; a cycle of them never waits for the user."""
    silent = {st.id for st in s.steps if not s.waits(st)}
    graph: dict[str, set[str]] = {}
    for a, _, b in _edges(s):
        if b in silent:
            graph.setdefault(a, set()).add(b)
    cycle = find_cycle(graph)
    return check("maze.hrs.no_silent_loop", not cycle, f"steps {' -> '.join(cycle)} form a loop that never waits for "
                 "the user (none of them has a script): the call would loop forever" if cycle else
                 "every loop waits for the user", cycle=cycle)


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for child in sorted(graph.get(node, ())):
            if state.get(child) == 1:
                return path[path.index(child):] + [child]
            if child not in state and (found := visit(child)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def hrs_reachability(s: HRSScenario, logic: Logic | None = None, *, limit: int = POINT_LIMIT) -> dict[str, object]:
    """Which steps, sub-steps and rules some conversation reaches, and which turns leave no unique answer.

    For every combination of case-fact cells (all of them when there are at most ``limit``,
    else ``limit`` drawn with a fixed seed) the call is explored from Step 1 with every reply
    kind at every waiting step. Returns ``reached`` (ids), ``exact`` (whether every combination
    was tried), ``points`` and up to five ``conflicts`` (turns where several conditions hold).
    """
    logic = logic or compile_logic(s)
    facts = sorted({a.fact for a in s.all_atoms() if a.fact != REPLY})
    sizes = [len(logic.cells[f]) for f in facts]
    total = 1
    for n in sizes:
        total *= n
    if total <= limit:
        combos: Iterable[tuple[int, ...]] = itertools.product(*(range(n) for n in sizes))
    else:
        rng = random.Random(0)
        combos = [tuple(rng.randrange(n) for n in sizes) for _ in range(limit)]
    reached: set[str] = set()
    conflicts: list[str] = []
    replies = [r.name for r in s.replies]
    for combo in combos:
        region = {f: frozenset({c}) for f, c in zip(facts, combo)}
        seen, queue = {s.steps[0].id}, [s.steps[0].id]
        reached.add(s.steps[0].id)
        while queue:
            step = s.step(queue.pop())
            for reply in replies:
                out = hrs_turn(s, logic, step, region, Turn(reply))  # type: ignore[arg-type]
                reached.update(out.visited)
                reached.update(t.node for t in out.taken)
                if out.answer and s.step(out.answer["step"]):
                    reached.add(out.answer["step"])
                if out.error and "several conditions hold" in out.error and len(conflicts) < 5:
                    conflicts.append(f"{out.error} with reply {reply}")
                if out.waiting_at and out.waiting_at not in seen:
                    seen.add(out.waiting_at)
                    queue.append(out.waiting_at)
    return {"reached": reached, "exact": total <= limit, "points": min(total, limit), "conflicts": conflicts}


def hrs_reachability_checks(s: HRSScenario) -> list[CheckResult]:
    found = hrs_reachability(s)
    reached: set[str] = found["reached"]  # type: ignore[assignment]
    how = (f"all {found['points']} combinations of case facts" if found["exact"]
           else f"{found['points']} sampled combinations of case facts")
    missing = [i for i in s.answer_ids() if i not in reached]
    steps = [i for i in missing if s.step(i)]
    nodes = [i for i in missing if not s.step(i)]
    conflicts: list[str] = found["conflicts"]  # type: ignore[assignment]
    return [
        check("maze.hrs.reachable", not missing, "never reached from Step 1 by any conversation ("
              f"{how}, every reply at every step): steps {steps}, sub-steps and rules {nodes}; fix their conditions "
              "or the gotos leading to them" if missing else f"every step, sub-step and rule is reached ({how})",
              steps=steps, nodes=nodes, exact=found["exact"]),
        check("maze.hrs.deterministic", not conflicts, "replies for which several sub-steps hold at once (the "
              "answer would not be unique; instances avoid them, but the SOP contradicts itself): "
              + "; ".join(conflicts) if conflicts else "no reply makes two sub-steps hold at once",
              severity="warning", conflicts=conflicts),
    ]
