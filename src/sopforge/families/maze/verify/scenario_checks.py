"""Checks an SOP-Maze scenario must pass before any instance is sampled from it.

What the paper asks of its SOPs, made checkable (seeds/001_6dd03d47fea0db71.txt): the LRS shape
(at most 3 levels, parents with more than 10 children, about 5 parents, L145), the HRS shape
(prerequisites, jumps, loops, L147 and the sample at L346-355), indexed scripts and a schema
whose enums are exactly the SOP's indices (L93, L486), and "a single definitive answer" (L81):
here every condition is well-typed, every leaf and every step is **reachable** (some facts make
it the unique answer), and no loop lacks an exit. The failure messages name the ids involved,
because they are quoted back to the model on re-ask and shown to a reviewer.
"""

from __future__ import annotations

import re


from sopforge.checks import CheckResult, check
from sopforge.families.maze.models.execution import compile_logic
from sopforge.families.maze.models.logic import REPLY, Atom, Logic, Tri
from sopforge.families.maze.models.scenario import (
    REPORTING_TASK_TYPES, RESPONSE_MAX_CHARS, HRSScenario, LRSScenario, Scenario, atoms_of,
)
from sopforge.families.maze.verify.hrs_checks import (
    HRS_SHAPE, POINT_LIMIT, duplicates, find_cycle, hrs_checks, hrs_reachability, hrs_reachability_checks,
)

__all__ = ["HRS_SHAPE", "LRS_SHAPE", "POINT_LIMIT", "PROMPT_LIMITS", "check_scenario", "hrs_reachability",
           "mentions_business_days", "unreachable_options"]

# The paper's LRS: "at most three levels", "each parent node can have more than 10 child nodes",
# "about 5 parent nodes and 58 leaf nodes" on average (L145). We require the width, not the averages.
LRS_SHAPE = {"min_categories": 4, "min_options": 30, "wide_category": 10, "min_per_category": 3, "min_report": 2}
COMMON = {"text_chars": RESPONSE_MAX_CHARS, "min_qa": 3, "min_constraints": 3}
# Every number a check below enforces, by the template parameter that states it in the prompt that
# produces the value (``limit_<name>``): a check may not hold the model to a limit its prompt never
# said (tests/unit/families/maze/test_maze_prompt_contracts.py renders each template and looks for each).
PROMPT_LIMITS: dict[str, dict[str, int]] = {
    "LRS": {f"limit_{k}": v for k, v in {**COMMON, **LRS_SHAPE}.items()},
    "HRS": {f"limit_{k}": v for k, v in {**COMMON, **HRS_SHAPE}.items()},
}
_BUSINESS_DAYS = re.compile(r"\b(business|working|work)[ -]days?\b", re.IGNORECASE)
# A count ("10 business days"), not "the next business day" (a date).
_COUNTED_BUSINESS_DAYS = re.compile(r"\b(\d+)\s+(?:business|working)[ -]days\b", re.IGNORECASE)
_ORDER_OPS = ("<", "<=", ">", ">=", "==", "!=")


def check_scenario(scenario: Scenario) -> list[CheckResult]:
    """Every check of a scenario, LRS or HRS. Structural failures skip the reachability analysis
    (it needs well-formed conditions), so the first re-ask is about what is broken first."""
    results = _common_checks(scenario)
    results += _lrs_checks(scenario) if isinstance(scenario, LRSScenario) else hrs_checks(scenario)
    if any(r.blocking for r in results):
        return results
    if isinstance(scenario, LRSScenario):
        missing = unreachable_options(scenario)
        results.append(check(
            "maze.lrs.reachable", not missing,
            "every option is the unique answer for some facts" if not missing else
            "options that can never be the one answer (fix their conditions or their siblings'): " + "; ".join(
                f"{k}: {v}" for k, v in missing.items()),
            unreachable=sorted(missing)))
        wrong = precedence_problems(scenario)
        results.append(check("maze.lrs.precedence", not wrong, "; ".join(wrong),
                             ok=f"{sum(len(o.overrides) for _, o in scenario.leaves())} stated exception(s), each "
                                "deciding against the option it overrides for some facts", problems=wrong))
    else:
        results += hrs_reachability_checks(scenario)
    return results


# --------------------------------------------------------------------------------------- common

def _atoms_with_ids(scenario: Scenario) -> list[tuple[str, Atom]]:
    if isinstance(scenario, LRSScenario):
        return ([(c.id, a) for c in scenario.categories for a in atoms_of(c.when)]
                + [(o.id, a) for _, o in scenario.leaves() for a in atoms_of(o.when)])
    return ([(b.id, a) for s in scenario.steps for b in s.branches for a in atoms_of(b.when)]
            + [(r.id, a) for r in scenario.rules for a in atoms_of(r.when)])


def _atom_problem(scenario: Scenario, atom: Atom) -> str | None:
    if atom.fact == REPLY:
        if not isinstance(scenario, HRSScenario):
            return "only HRS scenarios have replies"
        names = {r.name for r in scenario.replies}
        if atom.op not in ("==", "!=", "in", "not in"):
            return f"a reply is compared with ==, !=, in or not in, not {atom.op}"
        unknown = [v for v in atom.constants() if v not in names]
        return f"unknown reply kind {unknown[0]!r} (known: {', '.join(sorted(names))})" if unknown else None
    fact = scenario.fact(atom.fact)
    if fact is None:
        return f"unknown fact {atom.fact!r}"
    if fact.type != "integer" and atom.op in ("<", "<=", ">", ">="):
        return f"{fact.type} fact {fact.name} cannot be compared with {atom.op}"
    # integer thresholds may lie outside the range (``x <= 400`` on 0..365 is merely always true)
    wrong = [v for v in atom.constants() if not (fact.accepts(v) or (
        fact.type == "integer" and isinstance(v, int) and not isinstance(v, bool)))]
    return f"{wrong[0]!r} is not a possible value of {fact.name} ({fact.domain_text()})" if wrong else None


def _common_checks(scenario: Scenario) -> list[CheckResult]:
    names = [f.name for f in scenario.facts]
    duplicate_facts = sorted({n for n in names if names.count(n) > 1})
    problems = [f"{node}: '{atom.text()}': {why}" for node, atom in _atoms_with_ids(scenario)
                if (why := _atom_problem(scenario, atom))]
    read = {a.fact for _, a in _atoms_with_ids(scenario)}
    computed = [f.name for f in scenario.facts if f.derivation and f.name in read]
    scripts = _scripts(scenario) + [(f"knowledge base answer {i + 1}", p.a) for i, p in enumerate(scenario.knowledge_base)]
    bad_scripts = [f"{where} ({len(text.strip())} characters)" for where, text in scripts
                   if not text.strip() or len(text) > COMMON["text_chars"]]
    from jsonschema import Draft7Validator  # loaded by the check, not by every command that loads the family

    schema_errors = [e.message for e in Draft7Validator(Draft7Validator.META_SCHEMA).iter_errors(scenario.answer_schema())]
    return [
        check("maze.facts_unique", not duplicate_facts, f"fact names must be unique: {duplicate_facts}"
              if duplicate_facts else f"{len(names)} facts", duplicates=duplicate_facts),
        check("maze.conditions_well_typed", not problems, "conditions that read no known fact or compare with an "
              "impossible value: " + "; ".join(problems) if problems else "every condition reads a known fact with "
              "a possible value", problems=problems),
        check("maze.calculation_fact", bool(computed), "no condition reads a computed fact: give at least one integer "
              "fact a derivation (interval_days, business_days, median, sum or difference) and test it in a condition, so the SOP "
              "requires a calculation" if not computed else f"computed facts read by conditions: {', '.join(computed)}",
              computed=computed),
        check("maze.facts_read", set(names) <= read, "facts no condition reads (remove them): "
              + ", ".join(sorted(set(names) - read)) if not set(names) <= read else "every fact is read",
              severity="warning", unread=sorted(set(names) - read)),
        check("maze.scripts_fit", not bad_scripts, f"scripts and knowledge-base answers must be 1 to "
              f"{COMMON['text_chars']} characters (they are the reference response): " + ", ".join(bad_scripts)
              if bad_scripts else f"every script and knowledge-base answer fits in {COMMON['text_chars']} characters",
              too_long=bad_scripts),
        _at_least("maze.knowledge_base", len(scenario.knowledge_base), COMMON["min_qa"], "Q/A pairs in the knowledge base"),
        _at_least("maze.constraints", len(scenario.constraints), COMMON["min_constraints"], "global constraints"),
        _business_days(scenario),
        check("maze.answer_schema", not schema_errors, "the answer schema is not valid draft-07: "
              + "; ".join(schema_errors) if schema_errors else "the answer schema is valid draft-07"),
    ]


def mentions_business_days(text: str) -> bool:
    """Whether ``text`` speaks of business (working) days."""
    return bool(_BUSINESS_DAYS.search(text))


def _business_days(scenario: Scenario) -> CheckResult:
    """Business days in the words need the business-day derivation in the structure (issue 19's contract).

    A fact described in business days must count them. And a period the procedure *decides on* must be counted
    the way its words count it: an option or branch whose title or script says "N business days" while its own
    condition compares a calendar-day fact with N (``days_since_request > 10`` under "after 10 business days")
    holds two different rules. A count no condition beside it compares ("our partner quotes within 3 working
    days", a promise to the caller) is no such period: every independent answerer's HRS scenario had one, and
    the check used to refuse them all.
    """
    texts = [scenario.objective, *scenario.constraints, *(p.q + " " + p.a for p in scenario.knowledge_base),
             *(text for _, text in _scripts(scenario))]
    wrong = [f.name for f in scenario.facts if mentions_business_days(f.description) and f.derivation != "business_days"]
    counts = {int(m.group(1)) for t in texts for m in _COUNTED_BUSINESS_DAYS.finditer(t)}
    calendar = {f.name for f in scenario.facts if f.type == "integer" and f.derivation != "business_days"
                and (f.derivation == "interval_days" or "day" in f.unit.lower())}
    mixed = []
    for words, atoms in _decisions(scenario):
        said = {int(m.group(1)): m.group(0) for m in _COUNTED_BUSINESS_DAYS.finditer(" ".join(words))}
        mixed += [(said[n], a.fact, n) for a in atoms if a.fact in calendar and a.op in _ORDER_OPS
                  and isinstance(a.value, int) and not isinstance(a.value, bool)
                  for n in (a.value, a.value - 1) if n in said]
    mixed = sorted(set(mixed))
    problems = [f"facts described in business days but derived otherwise: {', '.join(wrong)} (use \"derivation\": "
                "\"business_days\")"] if wrong else []
    if mixed:
        problems.append("the text counts in business days a period the procedure compares in calendar days: "
                        + "; ".join(f'"{phrase}" beside {fact} (calendar days) compared with {n}' for phrase, fact, n in mixed)
                        + ": derive those facts with \"business_days\", or say calendar days in the text")
    in_text = bool(counts) or any(mentions_business_days(f.description) for f in scenario.facts)
    return check("maze.business_days", not problems, "; ".join(problems),
                 ok="business days, where the procedure decides on them, are counted by a business_days fact"
                 if in_text else "the scenario counts calendar days only", facts=wrong + [f for _, f, _ in mixed])


def _decisions(scenario: Scenario) -> list[tuple[list[str], list[Atom]]]:
    """Each place the tree decides, as (the words said there, the conditions it decides on)."""
    if isinstance(scenario, LRSScenario):
        return [([c.title, o.title, o.script], scenario.leaf_atoms(c, o)) for c in scenario.categories for o in c.options]
    return ([([s.title, s.script or "", b.script or ""], atoms_of(b.when)) for s in scenario.steps for b in s.branches]
            + [([r.script or ""], atoms_of(r.when)) for r in scenario.rules])


def _at_least(name: str, found: int, needed: int, what: str) -> CheckResult:
    return check(name, found >= needed, f"{found} {what}" if found >= needed else
                 f"give at least {needed} {what} (found {found})", found=found)


def _scripts(scenario: Scenario) -> list[tuple[str, str]]:
    if isinstance(scenario, LRSScenario):
        return [(f"option {o.id}", o.script) for _, o in scenario.leaves()]
    found = [(f"Step {s.id}", s.script) for s in scenario.steps if s.script is not None]
    found += [(f"Step {b.id}", b.script) for s in scenario.steps for b in s.branches if b.script is not None]
    return found + [(f"Rule {r.id}", r.script) for r in scenario.rules if r.script is not None]


# ------------------------------------------------------------------------------------------ LRS

def _lrs_checks(s: LRSScenario) -> list[CheckResult]:
    ids = [c.id for c in s.categories] + [o.id for _, o in s.leaves()]
    misplaced = [o.id for c, o in s.leaves() if not o.id.startswith(f"{c.id}.")]
    sizes = {c.id: len(c.options) for c in s.categories}
    leaves = sum(sizes.values())
    shape = []
    if len(s.categories) < LRS_SHAPE["min_categories"]:
        shape.append(f"{len(s.categories)} categories (at least {LRS_SHAPE['min_categories']})")
    if leaves < LRS_SHAPE["min_options"]:
        shape.append(f"{leaves} options in all (at least {LRS_SHAPE['min_options']})")
    if not any(n > LRS_SHAPE["wide_category"] for n in sizes.values()):
        shape.append(f"no category has more than {LRS_SHAPE['wide_category']} options")
    small = [c for c, n in sizes.items() if n < LRS_SHAPE["min_per_category"]]
    if small:
        shape.append(f"categories with fewer than {LRS_SHAPE['min_per_category']} options: {', '.join(small)}")
    bad_actions = [f"{o.id}: {o.action!r}" for _, o in s.leaves() if o.action not in s.actions]
    unused = sorted(set(s.actions) - {o.action for _, o in s.leaves()})
    return _report_checks(s) + [
        check("maze.lrs.ids", not duplicates(ids) and not misplaced, "ids must be unique and each option id must "
              f"start with its category id and a dot: duplicates {duplicates(ids)}, misplaced {misplaced}"
              if duplicates(ids) or misplaced else f"{len(ids)} unique ids", duplicates=duplicates(ids),
              misplaced=misplaced),
        check("maze.lrs.shape", not shape, "not an LRS (wide) tree: " + "; ".join(shape) if shape else
              f"{len(s.categories)} categories, {leaves} options, widest {max(sizes.values(), default=0)}",
              categories=len(s.categories), options=leaves, widest=max(sizes.values(), default=0)),
        check("maze.lrs.actions", not bad_actions and len(set(s.actions)) == len(s.actions) and bool(s.actions),
              "options must use one of the listed actions, listed once: " + ", ".join(bad_actions)
              if bad_actions or not s.actions or len(set(s.actions)) != len(s.actions) else
              f"{len(s.actions)} actions", bad=bad_actions),
        check("maze.lrs.actions_used", not unused, f"actions no option takes: {unused}",
              ok=f"each of the {len(set(s.actions))} actions is taken by some option", severity="warning"),
    ]


def _report_checks(s: LRSScenario) -> list[CheckResult]:
    unknown = [f for f in s.report if s.fact(f) is None]
    needed = LRS_SHAPE["min_report"] if s.task_type in REPORTING_TASK_TYPES else 0
    problems = [f"unknown facts in report: {', '.join(unknown)}"] if unknown else []
    if len(s.report) < needed:
        problems.append(f"a {s.task_type} scenario reports at least {needed} facts in \"report\" (found {len(s.report)})")
    if s.task_type == "scheduling" and not any((f := s.fact(n)) and f.derivation for n in s.report):
        problems.append("a scheduling scenario reports at least one computed fact")
    return [check("maze.lrs.report", not problems, "; ".join(problems),
                  ok=f"reports {len(s.report)} facts" if s.report else "reports no facts (the code is the answer)")]


def precedence_problems(s: LRSScenario, logic: Logic | None = None) -> list[str]:
    """Why the stated exceptions do not work: none stated, an unknown code, a cycle, or an exception that can
    never meet (and so never decide against) the option it overrides."""
    logic = logic or compile_logic(s)
    pairs = [(o.id, other) for _, o in s.leaves() for other in o.overrides]
    if not pairs:
        return ["no option states an exception (\"overrides\"): add at least one option that takes precedence over "
                "a general option when both hold"]
    problems = [f"{a} overrides unknown or its own code {b!r}" for a, b in pairs if s.option(b) is None or a == b]
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        graph.setdefault(a, set()).add(b)
    cycle = find_cycle(graph)
    if cycle:
        problems.append(f"exceptions override each other in a circle: {' -> '.join(cycle)}")
    if problems:
        return problems
    leaves = {o.id: s.leaf_atoms(c, o) for c, o in s.leaves()}
    for a, b in pairs:
        beaten = set(s.option(a)[1].overrides)  # type: ignore[index]
        competitors = [atoms for i, atoms in leaves.items() if i != a and i not in beaten]
        if logic.solve_unique(leaves[a] + leaves[b], competitors) is None:
            problems.append(f"{a} and {b} can never both hold with {a} the answer, so the precedence decides nothing")
    return problems


def unreachable_options(scenario: LRSScenario, logic: Logic | None = None) -> dict[str, str]:
    """Option id -> why no facts make it the one answer (exact: see :meth:`Logic.solve_unique`)."""
    logic = logic or compile_logic(scenario)
    leaves = [(o.id, scenario.leaf_atoms(c, o)) for c, o in scenario.leaves()]
    beats = scenario.overrides_map()
    missing = {}
    for node_id, atoms in leaves:
        others = [a for i, a in leaves if i != node_id and i not in beats.get(node_id, ())]
        if logic.solve_unique(atoms, others) is not None:
            continue
        if logic.solve_unique(atoms, []) is None:
            missing[node_id] = "its conditions contradict each other"
            continue
        region = {f: logic.satisfying(atoms, f, logic.full(f)) for f in {a.fact for a in atoms}}
        covering = [i for i, a in leaves if i != node_id and logic.truth(a, region) is Tri.TRUE]
        missing[node_id] = ("whenever it holds, so does " + ", ".join(covering) if covering
                            else "it always overlaps a sibling")
    return missing


