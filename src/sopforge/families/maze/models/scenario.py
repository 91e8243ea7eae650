"""SOP-Maze scenarios as structured SOP trees: LRS (wide) and HRS (deep), their answer schema and SOP text.

SOP-Maze (seeds/001_6dd03d47fea0db71.txt) sorts business SOPs into two kinds (§3, L143-147):

* **LRS**, "Lateral Root System": wide and shallow, at most three levels from root to leaf,
  parents with more than ten children (about 5 parents and 58 leaves on average, L145). Here:
  the root, a few *categories*, and under each many *options*; the task is choosing exactly the
  one option whose condition the conversation satisfies.
* **HRS**, "Heart Root System": deep, with prerequisites, jumps and loops between steps (the
  sample at L346-355). Here: numbered *steps* whose *branches* ("Step 2.3 If ..., proceed to
  Step 6") test the user's current reply and the case facts, plus *global rules* that take
  precedence (the sample's constraints send sensitive content to one ending, L485).

Both carry indexed scripts ("Suggested script", L346), a knowledge base of Q/A pairs (L356-484),
global constraints (L485) and a draft-07 answer schema with a step enum, a free-text response
and an action enum, ``additionalProperties: false`` (L486). The model answers with one JSON
object in ``<scenario>`` tags (docs/families/maze.md); the text the evaluated model reads is
rendered from the structure here, so it can never contradict the conditions that compute the
reference answers.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sopforge.families.maze.models.logic import REPLY, Atom, Fact, parse_atom
from sopforge.parsing import ParseError, describe_validation_error, extract_json, extract_tag

__all__ = [
    "ANSWER_TAG", "EXCLUSION_KEYS", "HRS_ACTIONS", "RESPONSE_MAX_CHARS", "Branch", "Category", "HRSScenario",
    "LRSScenario", "Option", "QA", "Reply", "Rule", "Scenario", "Step", "atoms_of", "parse_scenario",
]

ANSWER_TAG = "scenario"
RESPONSE_MAX_CHARS = 300  # the paper caps replies at 100 Chinese characters (L485); 300 fits English scripts
EXCLUSION_KEYS = ["response"]  # free text is schema-checked but never compared (L486, "no_required_eval_acc_keys")
HRS_ACTIONS = ["moveon", "hangup"]  # the paper's action enum (L486)


@lru_cache(maxsize=8192)
def _atom(text: str) -> Atom:
    return parse_atom(text)


def atoms_of(when: list[str]) -> list[Atom]:
    """The parsed atoms of a condition (a list of atom texts, all of which must hold)."""
    return [_atom(t) for t in when]


def _canonical(when: list[str]) -> list[str]:
    return [parse_atom(t).text() for t in when]


class QA(BaseModel):
    """One pair of the predefined Q&A knowledge base."""

    model_config = ConfigDict(extra="forbid")

    q: str = Field(description="The question as a caller asks it.")
    a: str = Field(description="The answer the agent gives.")


class _Node(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("when", check_fields=False)
    @classmethod
    def _parse_when(cls, value: list[str]) -> list[str]:
        return _canonical(value)


class _ScenarioBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="snake_case scenario name (folder name of its export).")
    title: str = Field(description="One line naming the scenario.")
    objective: str = Field(description="Background, role and task goal: part 1 of the four-part prompt (L56-58).")
    facts: list[Fact] = Field(description="Facts the user input conveys and the conditions read.")
    knowledge_base: list[QA] = Field(description="Predefined Q&A knowledge base (L356).")
    constraints: list[str] = Field(description="Global constraints (tone, privacy, length...) (L485).")

    def fact(self, name: str) -> Fact | None:
        return next((f for f in self.facts if f.name == name), None)

    def fact_catalogue(self) -> str:
        """One line per fact: name, allowed values, derivation and meaning (prompts, the SOP glossary)."""
        lines = []
        for f in self.facts:
            derived = f" (computed: {f.derivation.replace('_', ' ')})" if f.derivation else ""
            lines.append(f"- {f.name}: {f.domain_text()}{derived}. {f.description}")
        return "\n".join(lines)

    def _tail_sections(self) -> list[str]:
        kb = "\n".join(f"Q: {p.q}\nA: {p.a}" for p in self.knowledge_base)
        constraints = "\n".join(f"- {c}" for c in self.constraints)
        return [f"# Facts the conditions read\n{self.fact_catalogue()}", f"# Predefined Q&A knowledge base\n{kb}",
                f"# Constraints\n{constraints}"]

    def answer_schema(self) -> dict[str, Any]:
        """The draft-07 JSON Schema of one answer (L486)."""
        properties = self._schema_properties()
        return {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": properties,
                "required": list(properties), "additionalProperties": False}

    @staticmethod
    def _response_property() -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "maxLength": RESPONSE_MAX_CHARS,
                "description": "the reply to the user, following the SOP's script"}

    def _schema_properties(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


# ------------------------------------------------------------------------------------------ LRS

class Option(_Node):
    """A leaf of an LRS tree: one code to choose, with its routing action and its script."""

    id: str = Field(description="Option code, '<category id>.<nn>', e.g. '2.07'.")
    title: str = Field(description="Short name of the option.")
    when: list[str] = Field(description="Atoms that must all hold (besides the category's).")
    action: str = Field(description="Routing action, one of the scenario's actions.")
    script: str = Field(description="Suggested script: the message for the user (indexed by the option code).")


class Category(_Node):
    """A parent of an LRS tree: a group of options with a shared condition."""

    id: str = Field(description="Category number, e.g. '2'.")
    title: str = Field(description="Short name of the category.")
    when: list[str] = Field(description="Atoms every option of the category also requires.")
    options: list[Option] = Field(description="The category's options (the leaves).")


class LRSScenario(_ScenarioBase):
    """A wide SOP: categories of many options; the answer is the one option whose condition holds."""

    kind: Literal["LRS"] = Field("LRS", description="Scenario kind.")
    actions: list[str] = Field(description="Routing actions an option can take (the action enum).")
    categories: list[Category] = Field(description="Categories in SOP order.")

    def leaves(self) -> list[tuple[Category, Option]]:
        return [(c, o) for c in self.categories for o in c.options]

    def leaf_atoms(self, category: Category, option: Option) -> list[Atom]:
        return atoms_of(category.when) + atoms_of(option.when)

    def all_atoms(self) -> list[Atom]:
        return [a for c, o in self.leaves() for a in self.leaf_atoms(c, o)]

    def option(self, option_id: str) -> tuple[Category, Option] | None:
        return next(((c, o) for c, o in self.leaves() if o.id == option_id), None)

    def _schema_properties(self) -> dict[str, Any]:
        return {
            "category": {"type": "string", "enum": [c.id for c in self.categories],
                         "description": "the category number of the chosen option"},
            "step": {"type": "string", "enum": [o.id for _, o in self.leaves()],
                     "description": "the code of the one option whose condition holds"},
            "response": self._response_property(),
            "action": {"type": "string", "enum": list(self.actions), "description": "the option's routing action"},
        }

    def sop_text(self) -> str:
        """Part 2 of the four-part prompt: the categories and options as a numbered procedure."""
        parts = ["# Procedure\nRead the whole input, establish the facts listed below, then choose the single "
                 "option whose conditions all hold. An option applies only inside its category, so its category's "
                 "conditions must hold too. Reply with that option's suggested script and take its action."]
        for c in self.categories:
            lines = [f"## Category {c.id}. {c.title}", f"Applies when: {_condition_text(atoms_of(c.when))}."]
            for o in c.options:
                lines.append(f"- {o.id} {o.title}. When: {_condition_text(atoms_of(o.when))}. "
                             f"Action: {o.action}. Suggested script: \u201c{o.script}\u201d")
            parts.append("\n".join(lines))
        return "\n\n".join(parts + self._tail_sections())


# ------------------------------------------------------------------------------------------ HRS

class Reply(BaseModel):
    """A kind of user reply the HRS conditions test (``reply == <name>``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="snake_case reply kind.")
    description: str = Field(description="What replies of this kind say.")
    examples: list[str] = Field(default_factory=list, description="Typical phrasings (L346: 'e.g. Yes, What's up').")


class Branch(_Node):
    """A sub-step ``Step N.M``: a condition and what happens when it holds."""

    id: str = Field(description="Sub-step number, e.g. '2.3'.")
    when: list[str] = Field(description="Atoms that must all hold (reply and/or case facts).")
    then: Literal["goto", "end", "answer"] = Field(description=(
        "goto: proceed/return to the target step; end: say the script and end the call; answer: reply "
        "(the script, else the knowledge-base answer to the user's question) and stay at this step."))
    target: str | None = Field(None, description="goto: the step to go to.")
    script: str | None = Field(None, description="end (required) / answer (optional): what the agent says.")


class Step(BaseModel):
    """``Step N``: an optional suggested script and the sub-steps evaluated in this step."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Step number, e.g. '3'.")
    title: str = Field(description="What the step does.")
    script: str | None = Field(None, description=(
        "Suggested script. A step with a script is spoken on arrival and waits for the user's next reply; a "
        "step without one is evaluated at once with the same reply (question handling, checks on facts)."))
    branches: list[Branch] = Field(description="Sub-steps in order.")


class Rule(_Node):
    """A global rule, checked on every user reply before the current step's sub-steps."""

    id: str = Field(description="Rule id, e.g. 'R1'.")
    when: list[str] = Field(description="Atoms that must all hold (normally on the reply).")
    then: Literal["goto", "end"] = Field(description="goto a step, or say the script and end the call.")
    target: str | None = Field(None, description="goto: the step to go to.")
    script: str | None = Field(None, description="end: what the agent says.")


class HRSScenario(_ScenarioBase):
    """A deep SOP: steps with prerequisites, jumps and loops, answered with the final step reached."""

    kind: Literal["HRS"] = Field("HRS", description="Scenario kind.")
    replies: list[Reply] = Field(description="Reply kinds the conditions test.")
    steps: list[Step] = Field(description="Steps in SOP order; the first one starts the conversation.")
    rules: list[Rule] = Field(default_factory=list, description="Global rules that take precedence over any step.")

    def step(self, step_id: str) -> Step | None:
        return next((s for s in self.steps if s.id == step_id), None)

    def all_atoms(self) -> list[Atom]:
        return ([a for s in self.steps for b in s.branches for a in atoms_of(b.when)]
                + [a for r in self.rules for a in atoms_of(r.when)])

    def waits(self, step: Step) -> bool:
        """Whether the agent stops at ``step`` for the user's next reply (it has a script)."""
        return bool(step.script)

    def answer_ids(self) -> list[str]:
        """Every index an answer may name: steps, sub-steps and rules (the schema's step enum)."""
        return [i for s in self.steps for i in [s.id, *(b.id for b in s.branches)]] + [r.id for r in self.rules]

    def _schema_properties(self) -> dict[str, Any]:
        return {
            "step": {"type": "string", "enum": self.answer_ids(),
                     "description": "the final step reached after the last user turn"},
            "response": self._response_property(),
            "action": {"type": "string", "enum": list(HRS_ACTIONS),
                       "description": "moveon (continue the conversation) or hangup (end the call)"},
        }

    def reply_catalogue(self) -> str:
        """One line per reply kind (prompts and the SOP)."""
        lines = []
        for r in self.replies:
            examples = f" (e.g. {', '.join(repr(e) for e in r.examples)})" if r.examples else ""
            lines.append(f"- {r.name}: {r.description}{examples}")
        return "\n".join(lines)

    def sop_text(self) -> str:
        """Part 2 of the four-part prompt, in the sample's layout: Step N, suggested script, Step N.M."""
        parts = ["# Procedure\nStart at Step 1. A step with a suggested script is said to the user and waits for "
                 "their reply; a step without one is applied at once to the same reply. Apply the global rules to "
                 "every user reply before the current step's sub-steps."]
        order = {s.id: i for i, s in enumerate(self.steps)}
        for s in self.steps:
            lines = [f"Step {s.id}. {s.title}"]
            if s.script:
                lines.append(f"Suggested script: \u201c{s.script}\u201d")
            for b in s.branches:
                lines.append(f"- Step {b.id} If {_condition_text(atoms_of(b.when))}, "
                             f"{_consequence(b.then, b.target, b.script, order, s.id)}.")
            parts.append("\n".join(lines))
        if self.rules:
            parts.append("# Global rules (they take precedence over every step)\n" + "\n".join(
                f"- Rule {r.id} If {_condition_text(atoms_of(r.when))}, "
                f"{_consequence(r.then, r.target, r.script, order, None)}." for r in self.rules))
        parts.append("# Reply kinds\n" + self.reply_catalogue())
        return "\n\n".join(parts + self._tail_sections())


Scenario = Union[LRSScenario, HRSScenario]


# --------------------------------------------------------------------------------------- rendering

_OP_WORDS = {"==": "is", "!=": "is not", "<": "is less than", "<=": "is at most", ">": "is more than",
             ">=": "is at least", "in": "is one of", "not in": "is none of"}


def _condition_text(atoms: list[Atom]) -> str:
    if not atoms:
        return "always"
    words = []
    for a in atoms:
        subject = "the reply" if a.fact == REPLY else f"`{a.fact}`"
        value = ", ".join(_word(v) for v in a.constants())
        words.append(f"{subject} {_OP_WORDS[a.op]} {value}")
    return " and ".join(words)


def _word(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else f"\u201c{value}\u201d"


def _consequence(then: str, target: str | None, script: str | None, order: dict[str, int], here: str | None) -> str:
    if then == "end":
        return f"respond with: \u201c{script}\u201d then end the call"
    if then == "answer":
        said = f"respond with: \u201c{script}\u201d" if script else "answer from the Q&A knowledge base"
        return f"{said} and stay at Step {here}"
    back = here is not None and target in order and order[target] <= order.get(here, -1)
    return f"{'return' if back else 'proceed'} to Step {target}"


# ----------------------------------------------------------------------------------------- parsing

def parse_scenario(raw_text: str, kind: Literal["LRS", "HRS"]) -> Scenario:
    """Read a ``<scenario>`` JSON answer into the model of ``kind``.

    Raises:
        ParseError: no tag, invalid JSON, not an object, or a field of the wrong shape (a
            condition that is not ``<fact> <op> <value>`` included); the message names where.
    """
    data = extract_json(extract_tag(raw_text, ANSWER_TAG))
    if not isinstance(data, dict):
        raise ParseError(f"<{ANSWER_TAG}> must hold one JSON object")
    data = {**data, "kind": kind}
    model = LRSScenario if kind == "LRS" else HRSScenario
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ParseError(describe_validation_error(exc, f"<{ANSWER_TAG}>")) from exc
