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
reference answers. The SOP text itself (clean for writers, messy for the evaluated model, as the
paper keeps production SOPs' imperfections, L77) is rendered in :mod:`.sop_text`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sopforge.families.maze.models.dates import HOLIDAY
from sopforge.families.maze.models.logic import Atom, Fact, atoms_of, parse_atom
from sopforge.parsing import ParseError, describe_validation_error, extract_json, extract_tag

__all__ = [
    "ANSWER_TAG", "EXCLUSION_KEYS", "HRS_ACTIONS", "HRS_TASK_TYPES", "LRS_TASK_TYPES", "REPORTING_TASK_TYPES",
    "RESPONSE_MAX_CHARS", "Branch", "Category", "HRSScenario", "LRSScenario", "Option", "QA", "Reply", "Rule",
    "Scenario", "ScenarioSet", "Step", "atoms_of", "fact_schema", "parse_scenario",
]

ANSWER_TAG = "scenario"
RESPONSE_MAX_CHARS = 300  # the paper caps replies at 100 Chinese characters (L485); 300 fits English scripts
EXCLUSION_KEYS = ["response"]  # free text is schema-checked but never compared (L486, "no_required_eval_acc_keys")
HRS_ACTIONS = ["moveon", "hangup"]  # the paper's action enum (L486)

# The paper's LRS scenarios (L341, Table 5) are not all decision tables: they extract core
# information (L1, L10), recognise intents with parameters (L6, L12), analyse emotion (L9),
# choose schedules from medians over dates (L7) and detect risk types (L2). Each LRS scenario is
# given one of these task types; the structure stays a wide tree, the answer gains the reported
# facts where the type extracts something.
LRS_TASK_TYPES: dict[str, str] = {
    "disposition": "code every contact with exactly one disposition from a long list, each with its routing action "
                   "(the paper's complaint analysis and flow-line tracking, L11 and L3)",
    "intent_recognition": "recognise what the customer ultimately wants among many intents and extract the parameters "
                          "that intent needs (the paper's intention recognition with function-call parameters, L6 and "
                          "L12)",
    "information_extraction": "extract the core facts of a request into fixed fields and file it under one code (the "
                              "paper's core information extraction, L1 and L10)",
    "emotion_analysis": "judge the customer's emotional state and escalation risk from the whole conversation, "
                        "sarcasm and reversals included, and choose the handling code (the paper's user emotion "
                        "analysis, L9)",
    "scheduling": "choose a schedule, slot or timing code from dates, durations and quantities computed from the "
                  "conversation (the paper's optimal delivery schedule with its median rule, L7)",
    "risk_detection": "decide which risk type, if any, the conversation shows and how it is escalated (the paper's "
                      "risky content detection, L2)",
}
REPORTING_TASK_TYPES = ("intent_recognition", "information_extraction", "scheduling")  # the answer reports facts
# HRS scenarios of the paper (L341, Table 4) are calls of a few kinds: inbound service lines (H5),
# outbound follow-ups and sales calls (H1, H4, H6, H9), bookings (H2, H7, H8), clarifications (H3, H10).
HRS_TASK_TYPES: dict[str, str] = {
    "inbound_service_line": "an automated inbound phone or chat line that takes a customer's request through its "
                            "checks (the paper's food delivery customer service, H5)",
    "outbound_follow_up": "an outbound call to a customer who may refuse, be sarcastic, ask questions or change their "
                          "mind (the paper's customer evaluation follow-up and business development calls, H1, H4, H9)",
    "booking_intake": "a call that books, reschedules or cancels an appointment, pickup or delivery, with prerequisite "
                      "checks on dates and eligibility (the paper's in-person appointment and reservation lines, H2, "
                      "H7, H8)",
    "order_clarification": "a call that clarifies an unusual or incomplete order or request before it can go ahead "
                           "(the paper's bulk order clarification and room availability checks, H3, H10)",
}


@lru_cache(maxsize=8192)
def _atom(text: str) -> Atom:
    return parse_atom(text)


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
    holidays: list[str] = Field(default_factory=list, description=(
        "Holidays (MM-DD, every year) that business_days facts skip besides weekends; empty: weekends only."))
    task_type: str = Field("", description="The kind of task code assigned this scenario (LRS_TASK_TYPES or "
                                           "HRS_TASK_TYPES); set by the stage, not by the model.")

    @field_validator("holidays")
    @classmethod
    def _holidays(cls, value: list[str]) -> list[str]:
        bad = [h for h in value if not HOLIDAY.match(h)]
        if bad:
            raise ValueError(f"holiday {bad[0]!r} must be written MM-DD, e.g. 12-25")
        return sorted(set(value))

    def fact(self, name: str) -> Fact | None:
        return next((f for f in self.facts if f.name == name), None)

    def derivation_text(self, fact: Fact) -> str:
        """How a computed fact is computed, in the words the SOP, the writer and the reader all use."""
        if fact.derivation == "interval_days":
            return ("calendar days from the first date to the second: the days after the first date up to and "
                    "including the second (from March 1 to March 4 is 3 days)")
        if fact.derivation == "business_days":
            skipped = f" and these holidays (month-day, every year): {', '.join(self.holidays)}" if self.holidays \
                else " (no holidays are skipped)"
            return ("business days from the first date to the second: the weekdays (Monday to Friday) after the first "
                    f"date up to and including the second, skipping weekends{skipped}")
        return {"median": "the median of the numbers given (the middle one once sorted; with an even count, the "
                          "lower of the two middle ones)",
                "sum": "the sum of the numbers given", "difference": "the larger number minus the smaller one"}.get(
            fact.derivation or "", "")

    def fact_catalogue(self) -> str:
        """One line per fact: name, allowed values, derivation and meaning (prompts, the SOP glossary)."""
        lines = []
        for f in self.facts:
            derived = f" (computed: {self.derivation_text(f)})" if f.derivation else ""
            lines.append(f"- {f.name}: {f.domain_text()}{derived}. {f.description}")
        return "\n".join(lines)

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
    overrides: list[str] = Field(default_factory=list, description=(
        "Option codes this option takes precedence over when both hold: a stated exception to a general rule."))


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
    report: list[str] = Field(default_factory=list, description=(
        "Facts whose values the answer must also state (\"details\"): what extraction, intent and scheduling "
        "tasks extract."))

    def leaves(self) -> list[tuple[Category, Option]]:
        return [(c, o) for c in self.categories for o in c.options]

    def leaf_atoms(self, category: Category, option: Option) -> list[Atom]:
        return atoms_of(category.when) + atoms_of(option.when)

    def all_atoms(self) -> list[Atom]:
        return [a for c, o in self.leaves() for a in self.leaf_atoms(c, o)]

    def option(self, option_id: str) -> tuple[Category, Option] | None:
        return next(((c, o) for c, o in self.leaves() if o.id == option_id), None)

    def overrides_map(self) -> dict[str, frozenset[str]]:
        """Option id -> the option ids it takes precedence over."""
        return {o.id: frozenset(o.overrides) for _, o in self.leaves() if o.overrides}

    def _schema_properties(self) -> dict[str, Any]:
        properties: dict[str, Any] = {
            "category": {"type": "string", "enum": [c.id for c in self.categories],
                         "description": "the category number of the chosen option"},
            "step": {"type": "string", "enum": [o.id for _, o in self.leaves()],
                     "description": "the code of the one option that applies"},
        }
        if self.report:
            facts = [f for name in self.report if (f := self.fact(name)) is not None]
            properties["details"] = {
                "type": "object", "properties": {f.name: fact_schema(f) for f in facts},
                "required": [f.name for f in facts], "additionalProperties": False,
                "description": "the value of each listed fact as the conversation establishes it"}
        properties["response"] = self._response_property()
        properties["action"] = {"type": "string", "enum": list(self.actions), "description": "the option's routing action"}
        return properties

    def sop_text(self, *, messy: bool = False) -> str:
        """Part 2 of the four-part prompt (see :mod:`.sop_text`)."""
        from sopforge.families.maze.models.sop_text import lrs_sop_text

        return lrs_sop_text(self, messy=messy)


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

    def sop_text(self, *, messy: bool = False) -> str:
        """Part 2 of the four-part prompt, in the sample's layout (see :mod:`.sop_text`)."""
        from sopforge.families.maze.models.sop_text import hrs_sop_text

        return hrs_sop_text(self, messy=messy)


Scenario = Union[LRSScenario, HRSScenario]


def fact_schema(fact: Fact) -> dict[str, Any]:
    """The JSON Schema of one fact's value (a reported detail)."""
    if fact.type == "enum":
        return {"type": "string", "enum": list(fact.values)}
    if fact.type == "boolean":
        return {"type": "boolean"}
    return {"type": "integer", "minimum": fact.minimum, "maximum": fact.maximum}


class ScenarioSet(BaseModel):
    """The artifact of a scenario stage: every scenario of one kind, in the order they were asked."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["LRS", "HRS"] = Field(description="Scenario kind.")
    scenarios: list[Annotated[Union[LRSScenario, HRSScenario], Field(discriminator="kind")]] = Field(
        min_length=1, description="The scenarios, each checked on its own.")

    def names(self) -> list[str]:
        return [s.name for s in self.scenarios]


# ----------------------------------------------------------------------------------------- parsing

def parse_scenario(raw_text: str, kind: Literal["LRS", "HRS"], task_type: str = "") -> Scenario:
    """Read a ``<scenario>`` JSON answer into the model of ``kind``.

    Raises:
        ParseError: no tag, invalid JSON, not an object, or a field of the wrong shape (a
            condition that is not ``<fact> <op> <value>`` included); the message names where.
    """
    data = extract_json(extract_tag(raw_text, ANSWER_TAG))
    if not isinstance(data, dict):
        raise ParseError(f"<{ANSWER_TAG}> must hold one JSON object")
    data = {**data, "kind": kind, "task_type": task_type}
    model = LRSScenario if kind == "LRS" else HRSScenario
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ParseError(describe_validation_error(exc, f"<{ANSWER_TAG}>")) from exc
