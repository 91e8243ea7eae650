"""The SOP text of a scenario, rendered from its tree: clean for the writers, messy for the evaluated model.

The paper's SOPs are production system prompts that grew "through step-by-step completion" and keep
their logical inconsistencies on purpose, while self-contradictions were removed so that every
instance has one answer (L77). The **messy** rendering reproduces the imperfections that leave the
answer defined: rules listed out of order and some added at the end as an addendum, conditions in
informal and varied wording, redundant restatements (a category's condition repeated in an option,
a global rule repeated inside a step, a knowledge-base pair given twice), and conflicts between a
general option and an exception resolved by a stated precedence. Every condition, threshold, code,
action and script of the tree is still stated, so the tree stays the single source of the answer.
The choices are seeded by the scenario's name: the same tree always renders the same text.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from sopforge.families.maze.models.logic import REPLY, Atom, atoms_of

if TYPE_CHECKING:
    from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, Step, _ScenarioBase

__all__ = ["condition_text", "hrs_sop_text", "lrs_sop_text"]

PRECEDENCE_RULE = ("An option that applies is set aside when an option that takes precedence over it also applies; "
                   "in every other case exactly one option applies.")

_CLEAN_OPS = {"==": "is", "!=": "is not", "<": "is less than", "<=": "is at most", ">": "is more than",
              ">=": "is at least", "in": "is one of", "not in": "is none of"}
_INFORMAL_OPS = {"<": ["is less than {v}", "is under {v}", "is below {v}"],
                 "<=": ["is at most {v}", "is {v} or less", "does not exceed {v}"],
                 ">": ["is more than {v}", "is over {v}", "exceeds {v}"],
                 ">=": ["is at least {v}", "is {v} or more", "reaches {v}"]}


def _word(value: object, rng: random.Random | None = None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return f"\u201c{value}\u201d"


def _subject(atom: Atom, rng: random.Random | None) -> str:
    if atom.fact == REPLY:
        return rng.choice(["the reply", "the caller's reply", "the user's answer"]) if rng else "the reply"
    if rng is None or rng.random() < 0.5:
        return f"`{atom.fact}`"
    return atom.fact.replace("_", " ")


def _atom_text(atom: Atom, rng: random.Random | None, unit: str = "") -> str:
    subject = _subject(atom, rng)
    values = atom.constants()
    if rng is None:
        return f"{subject} {_CLEAN_OPS[atom.op]} {', '.join(_word(v) for v in values)}"
    suffix = f" {unit}" if unit and rng.random() < 0.6 else ""
    if atom.op in _INFORMAL_OPS:
        return f"{subject} " + rng.choice(_INFORMAL_OPS[atom.op]).format(v=f"{values[0]}{suffix}")
    words = [_word(v) for v in values]
    if isinstance(values[0], bool) and atom.op in ("==", "!="):
        holds = values[0] if atom.op == "==" else not values[0]
        return rng.choice([f"{subject} is {'true' if holds else 'false'}", f"{subject}: {'yes' if holds else 'no'}"])
    if atom.op == "==":
        return rng.choice([f"{subject} is {words[0]}", f"{subject} = {words[0]}"])
    if atom.op == "!=":
        return rng.choice([f"{subject} is not {words[0]}", f"{subject} is anything but {words[0]}"])
    joined = " or ".join(words) if len(words) < 4 else ", ".join(words[:-1]) + " or " + words[-1]
    if atom.op == "in":
        return rng.choice([f"{subject} is {joined}", f"{subject} is one of {', '.join(words)}"])
    return rng.choice([f"{subject} is neither {' nor '.join(words)}" if len(words) == 2
                       else f"{subject} is none of {', '.join(words)}", f"{subject} is not {joined}"])


def condition_text(atoms: list[Atom], rng: random.Random | None = None, units: dict[str, str] | None = None) -> str:
    """A conjunction in words: the clean form (``rng`` None) or one informal form drawn with ``rng``."""
    if not atoms:
        return "always"
    parts = [_atom_text(a, rng, (units or {}).get(a.fact, "")) for a in atoms]
    joiner = " and " if rng is None else rng.choice([" and ", ", and ", "; also "])
    return joiner.join(parts)


def _tail(s: "_ScenarioBase", rng: random.Random | None) -> list[str]:
    pairs = list(s.knowledge_base)
    if rng is not None and len(pairs) > 2:  # production prompts repeat a pair now and then (redundancy)
        pairs.insert(rng.randrange(len(pairs) + 1), pairs[rng.randrange(len(pairs))])
    kb = "\n".join(f"Q: {p.q}\nA: {p.a}" for p in pairs)
    constraints = "\n".join(f"- {c}" for c in s.constraints)
    return [f"# Facts the conditions read\n{s.fact_catalogue()}", f"# Predefined Q&A knowledge base\n{kb}",
            f"# Constraints\n{constraints}"]


def _units(s: "_ScenarioBase") -> dict[str, str]:
    return {f.name: f.unit for f in s.facts if f.unit}


# ------------------------------------------------------------------------------------------ LRS

def _option_line(category, option, rng: random.Random | None, units: dict[str, str], inline_precedence: bool) -> str:

    own = atoms_of(option.when)
    if rng is not None and rng.random() < 0.2:  # the category's condition restated (redundant, still true)
        own = atoms_of(category.when) + own
    when = condition_text(own, rng, units)
    exception = (f" (an exception: it takes precedence over {', '.join(option.overrides)})"
                 if option.overrides and inline_precedence else "")
    if rng is None:
        return (f"- {option.id} {option.title}. When: {when}.{exception} Action: {option.action}. "
                f"Suggested script: \u201c{option.script}\u201d")
    return rng.choice([
        f"- {option.id} {option.title}. When: {when}.{exception} Action: {option.action}. "
        f"Suggested script: \u201c{option.script}\u201d",
        f"- {option.id} \u2013 {option.title}: if {when} \u2192 {option.action}.{exception} "
        f"Say: \u201c{option.script}\u201d",
        f"- Code {option.id} ({option.title}) is used if {when}; route it to {option.action}.{exception} "
        f"Script: \u201c{option.script}\u201d",
    ])


def lrs_sop_text(s: "LRSScenario", *, messy: bool = False) -> str:
    """The categories and options as a procedure; ``messy`` adds the paper's production imperfections."""

    rng = random.Random(f"sop:{s.name}") if messy else None
    units = _units(s)
    exceptions = [(o, other) for _, o in s.leaves() for other in o.overrides]
    if rng is None:
        intro = ("# Procedure\nRead the whole input, establish the facts listed below, then choose the single option "
                 "whose conditions all hold. An option applies only inside its category, so its category's "
                 "conditions must hold too. " + (PRECEDENCE_RULE + " " if exceptions else "")
                 + "Reply with that option's suggested script and take its action.")
    else:
        intro = ("# Procedure\nGo through the whole conversation and work out which code applies to this contact. "
                 "A code only counts inside its own category, so the category has to fit as well. Codes are not "
                 "always listed in number order, and a few were added later: they are in the addendum at the end. "
                 + (PRECEDENCE_RULE + " The exceptions are listed after the addendum. " if exceptions else "")
                 + "Answer with the code's script and route the contact as the code says.")
    parts = [intro]
    leaves = s.leaves()
    late: set[str] = set()
    if rng is not None:
        movable = [o.id for c, o in leaves if len(c.options) > 3]
        late = set(rng.sample(movable, k=min(len(movable), max(1, len(leaves) // 7))))
    inline = {o.id: rng is None or rng.random() < 0.5 for _, o in leaves}
    for c in s.categories:
        options = [o for o in c.options if o.id not in late]
        if rng is not None:
            rng.shuffle(options)
        when = condition_text(atoms_of(c.when), rng, units)
        lead = "Applies when" if rng is None else rng.choice(["Applies when", "Use this group when",
                                                              "This group is for contacts where"])
        lines = [f"## Category {c.id}. {c.title}", f"{lead}: {when}."]
        lines += [_option_line(c, o, rng, units, inline[o.id]) for o in options]
        parts.append("\n".join(lines))
    if late:
        lines = ["# Addendum (codes added after the last revision; each belongs to the category named)"]
        lines += [_option_line(c, o, rng, units, inline[o.id]).replace(f"- {o.id} ", f"- {o.id} (category {c.id}) ", 1)
                  .replace(f"- Code {o.id} ", f"- Code {o.id} (category {c.id}) ", 1)
                  .replace(f"- {o.id} \u2013", f"- {o.id} (category {c.id}) \u2013", 1)
                  for c, o in leaves if o.id in late]
        parts.append("\n".join(lines))
    if exceptions:
        lines = ["# Exceptions and precedence" if rng is None else "# Exceptions (these win over the general codes)"]
        lines += [f"- When {o.id} ({o.title}) and {other} both apply, use {o.id}." for o, other in exceptions]
        parts.append("\n".join(lines))
    if s.report:
        parts.append("# Details to report\nBesides the code, give in \"details\" the value of each of these facts as "
                     "the conversation establishes it (computed facts computed as described below): "
                     + ", ".join(s.report) + ".")
    if rng is not None:  # reminders restating a few options' conditions in other words (redundant, consistent)
        picked = rng.sample(leaves, k=min(2, len(leaves)))
        parts.append("# Reminders\n" + "\n".join(
            f"- Remember: {o.id} is only for contacts where {condition_text(s.leaf_atoms(c, o), rng, units)}."
            for c, o in picked))
    return "\n\n".join(parts + _tail(s, rng))


# ------------------------------------------------------------------------------------------ HRS

def _consequence(then: str, target: str | None, script: str | None, order: dict[str, int], here: str | None,
                 rng: random.Random | None) -> str:
    if then == "end":
        if rng is None or rng.random() < 0.5:
            return f"respond with: \u201c{script}\u201d then end the call"
        return f"say \u201c{script}\u201d and hang up"
    if then == "answer":
        if script:
            said = f"respond with: \u201c{script}\u201d"
        else:
            said = "answer from the Q&A knowledge base" if rng is None else rng.choice(
                ["answer from the Q&A knowledge base", "answer their question from the knowledge base"])
        return f"{said} and stay at Step {here}"
    back = here is not None and target in order and order[target] <= order.get(here, -1)
    if rng is None:
        return f"{'return' if back else 'proceed'} to Step {target}"
    if back:
        return rng.choice([f"return to Step {target}", f"go back to Step {target}"])
    skips = here is not None and target in order and order[target] > order.get(here, 0) + 1
    return rng.choice([f"proceed to Step {target}", f"go to Step {target}"]
                      + ([f"jump to Step {target}"] if skips else [f"move on to Step {target}"]))


def _branch_line(s: "HRSScenario", step: "Step", branch, order, rng, units) -> str:

    when = condition_text(atoms_of(branch.when), rng, units)
    then = _consequence(branch.then, branch.target, branch.script, order, step.id, rng)
    return f"- Step {branch.id} If {when}, {then}."


def hrs_sop_text(s: "HRSScenario", *, messy: bool = False) -> str:
    """The steps in the sample's layout (L346-355); ``messy`` adds the paper's production imperfections."""

    rng = random.Random(f"sop:{s.name}") if messy else None
    units = _units(s)
    order = {st.id: i for i, st in enumerate(s.steps)}
    rules_first = ("Apply the global rules to every user reply before the current step's sub-steps: they take "
                   "precedence over every step.")
    if rng is None:
        intro = ("# Procedure\nStart at Step 1. A step with a suggested script is said to the user and waits for their "
                 "reply; a step without one is applied at once to the same reply. " + rules_first)
    else:
        intro = ("# Procedure\nThe call starts at Step 1. When a step has a suggested script, say it and wait for the "
                 "caller; a step without a script is checked straight away against the same reply. Sub-steps are "
                 "not always in number order, and a few were added later (see the notes at the end). "
                 "Whatever step you are at, the global rules in the constraints section are checked first and win.")
    parts = [intro]
    all_branches = [(st, b) for st in s.steps for b in st.branches]
    late: set[str] = set()
    if rng is not None:
        movable = [b.id for st, b in all_branches if len(st.branches) > 2]
        late = set(rng.sample(movable, k=min(len(movable), max(1, len(all_branches) // 8))))
    for st in s.steps:
        lines = [f"Step {st.id}. {st.title}"]
        if st.script:
            lines.append(f"Suggested script: \u201c{st.script}\u201d" if rng is None or rng.random() < 0.7
                         else f"Say: \u201c{st.script}\u201d")
        branches = [b for b in st.branches if b.id not in late]
        if rng is not None:
            rng.shuffle(branches)
        lines += [_branch_line(s, st, b, order, rng, units) for b in branches]
        if rng is not None and s.rules and s.waits(st) and rng.random() < 0.25:
            r = rng.choice(s.rules)
            lines.append(f"(As everywhere, Rule {r.id} still applies here and comes first.)")
        parts.append("\n".join(lines))
    if late:
        parts.append("# Notes added after the last review\n" + "\n".join(
            _branch_line(s, st, b, order, rng, units).replace(f"- Step {b.id} If", f"- Step {b.id} (under Step "
                                                              f"{st.id}) If", 1)
            for st, b in all_branches if b.id in late))
    rule_lines = [f"- Rule {r.id} If {condition_text(atoms_of(r.when), rng, units)}, "
                  f"{_consequence(r.then, r.target, r.script, order, None, rng)}." for r in s.rules]
    if rng is None and s.rules:
        parts.append("# Global rules (they take precedence over every step)\n" + "\n".join(rule_lines))
    parts.append("# Reply kinds\n" + s.reply_catalogue())
    tail = _tail(s, rng)
    if rng is not None and s.rules:  # the paper's sample keeps its overriding rules among the constraints (L485)
        tail[-1] += ("\n- Global rules, checked on every reply before the current step and taking precedence over it:\n"
                     + "\n".join(f"  {line}" for line in rule_lines))
    return "\n\n".join(parts + tail)
