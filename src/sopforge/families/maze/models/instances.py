"""SOP-Maze instances: the sampled plan, the written user input, the independent reading, the verdict.

An instance is built in this order: code samples the **facts** and the **path** through the tree
(:class:`InstancePlan`, seeded), an LLM writes the **dialogue** that conveys exactly those facts,
turn by turn, with the planned noise (:class:`Dialogue`), a second, independent LLM reads only the
rendered user input and records what each user turn establishes (:class:`Extraction`), and code
decides (:class:`Verification`). Every answer is computed by executing the tree, never written by
a model: the final one (``plan.target``), the answer after each user turn (``plan.subtasks``, the
paper's input-target pairs along the dialogue, Appendix B.2) and the answer a reader fooled by each
noise phenomenon would compute (``NoisePlan.misread``).

Answer formats (docs/families/maze.md): ``<dialogue>`` holds ``{"turns": [{"speaker": "agent" |
"user", "text": ...}], "noise": [{"phenomenon": ..., "turn": <1-based index into turns>, "note":
...}]}``; ``<extraction>`` holds ``{"turns": [{"reply": <kind or null>, "facts": {<name>: value}}]}``,
one entry per user turn with the facts that turn states or corrects.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sopforge.families.maze.models.dates import long_date
from sopforge.families.maze.models.logic import FactValue
from sopforge.funnel import DroppedItem, FunnelRow
from sopforge.parsing import ParseError, describe_validation_error, extract_json, extract_tag

__all__ = [
    "DIALOGUE_TAG", "EXTRACTION_TAG", "INPUT_FORMATS", "PHENOMENA", "Dialogue", "DialogueTurn", "Extraction",
    "InstancePlan", "InstanceSet", "MazeInstance", "NoisePlan", "NoiseTag", "Phenomenon", "Subtask", "TurnReading",
    "UserTurnPlan", "Verification", "long_date", "parse_dialogue", "parse_extraction", "render_user_input",
]

DIALOGUE_TAG, EXTRACTION_TAG = "dialogue", "extraction"
# The noise phenomena of SOP-Maze §6.2-6.3 (L151-161): conversational fragility and calculation errors.
Phenomenon = Literal["intent_reversal", "sarcasm", "disfluency", "off_topic", "calculation"]
PHENOMENA: tuple[str, ...] = ("intent_reversal", "sarcasm", "disfluency", "off_topic", "calculation")
# How the user input is laid out; the paper's inputs mix speaker tags, timestamped turns and JSON lines (L161).
InputFormat = Literal["speaker_tags", "timestamped", "json_lines"]
INPUT_FORMATS: tuple[str, ...] = ("speaker_tags", "timestamped", "json_lines")


class NoisePlan(BaseModel):
    """One noise phenomenon the writer must put into the user input, and where."""

    model_config = ConfigDict(extra="forbid")

    phenomenon: Phenomenon = Field(description="Which phenomenon.")
    user_turn: int = Field(ge=1, description="The user turn (1-based, counting user turns only) that carries it.")
    fact: str | None = Field(None, description="The fact it concerns (None: the turn's reply kind, HRS).")
    decoy: FactValue | None = Field(None, description=(
        "What a reader fooled by the noise takes: the value or reply kind first said and then reversed, the literal "
        "reading of sarcasm, the background or off-topic speech taken as the user's, the naive calculation."))
    decoy_turn: int | None = Field(None, description="Reversal across turns: the earlier user turn stating the decoy.")
    operands: list[str] = Field(default_factory=list,
                                description="Calculation: the dates or numbers the dialogue states instead of the value.")
    instruction: str = Field(description="What the writer is asked to do, in one sentence.")
    misread: dict[str, Any] | None = Field(None, description=(
        "The answer the tree gives when the decoy is taken instead of the truth (None: no single answer then)."))
    changes_answer: bool = Field(False, description="misread is a single answer that differs from the true one.")


class UserTurnPlan(BaseModel):
    """What one user turn must do."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=1, description="1-based user turn number.")
    agent_line: str | None = Field(None, description="HRS: the exact agent line said just before this user turn.")
    reply: str | None = Field(None, description="HRS: the reply kind this turn must express.")
    question: int | None = Field(None, description="HRS: index of the knowledge-base question the user asks.")
    facts: list[str] = Field(default_factory=list, description="Facts this turn must convey.")
    off_topic: bool = Field(False, description="LRS: an off-topic turn that conveys no fact.")


class Subtask(BaseModel):
    """One input-target pair along the dialogue: the answer the SOP gives after user turn ``turn``."""

    model_config = ConfigDict(extra="forbid")

    turn: int = Field(ge=1, description="User turns in the prefix (the input ends with this user turn).")
    target: dict[str, Any] = Field(description="The answer after that turn, computed by executing the tree.")
    facts: dict[str, FactValue] = Field(description="The facts stated by then (a reversed fact at its value then).")
    replies: list[str] = Field(default_factory=list, description="HRS: the reply kind of each user turn so far.")
    final: bool = Field(description="The last user turn: the instance's own target.")


class InstancePlan(BaseModel):
    """Everything code decided before any model wrote a word (seeded, reproducible)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Instance id, e.g. 'L1-3' (third instance of the first LRS scenario).")
    scenario: str = Field("", description="Scenario name.")
    kind: Literal["LRS", "HRS"] = Field(description="Scenario kind.")
    facts: dict[str, FactValue] = Field(description="The facts the user input states (the others stay unstated).")
    turns: list[UserTurnPlan] = Field(description="User turns in order.")
    noise: list[NoisePlan] = Field(default_factory=list, description="Noise phenomena to include.")
    path: list[str] = Field(description="Indices taken through the tree (option; or sub-steps/rules per turn).")
    path_kind: str = Field(description="LRS: the category chosen; HRS: end, advance or answer (what the last turn does).")
    features: list[str] = Field(default_factory=list,
                                description="HRS path features: loop, jump, rule (a global rule fired), check (a prerequisite).")
    target: dict[str, Any] = Field(description="Reference answer, computed by executing the tree on the facts.")
    subtasks: list[Subtask] = Field(default_factory=list, description=(
        "The answer after every user turn where the SOP gives one (HRS: every turn; LRS: every turn whose facts "
        "settle one option), the last one the target."))
    input_format: InputFormat = Field(description="How the user input is laid out.")
    call_date: str = Field(description="ISO date of the conversation (dates in calculations count from it).")

    def phenomena(self) -> list[str]:
        return [n.phenomenon for n in self.noise]

    def state_after(self, turn: int) -> dict[str, FactValue]:
        """The facts stated by the end of user turn ``turn``, a reversed fact at its decoy until reversed."""
        state: dict[str, FactValue] = {}
        decoys = {n.decoy_turn: n for n in self.noise if n.decoy_turn is not None and n.fact}
        for t in self.turns[:turn]:
            if t.index in decoys:
                state[decoys[t.index].fact] = decoys[t.index].decoy  # type: ignore[index, assignment]
            for fact in t.facts:
                state[fact] = self.facts[fact]
        return state


class DialogueTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    speaker: Literal["agent", "user"] = Field(description="Who speaks.")
    text: str = Field(min_length=1, description="What they say.")


class NoiseTag(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phenomenon: Phenomenon = Field(description="The phenomenon put into the dialogue.")
    turn: int = Field(ge=1, description="1-based index into turns (agent and user turns together).")
    note: str = Field("", description="How it was realised.")


class Dialogue(BaseModel):
    """The conversation the writer produced, with its noise tags."""

    model_config = ConfigDict(extra="forbid")

    turns: list[DialogueTurn] = Field(min_length=1, description="Turns in order.")
    noise: list[NoiseTag] = Field(default_factory=list, description="Where each planned phenomenon was put.")

    def user_turns(self) -> list[tuple[int, DialogueTurn]]:
        """(1-based position in ``turns``, turn) of every user turn."""
        return [(i, t) for i, t in enumerate(self.turns, start=1) if t.speaker == "user"]

    def prefix(self, user_turns: int) -> "Dialogue":
        """The turns up to and including user turn ``user_turns`` (a subtask's input)."""
        ends = [i for i, _ in self.user_turns()]
        last = ends[min(user_turns, len(ends)) - 1] if ends else len(self.turns)
        return Dialogue(turns=self.turns[:last], noise=[n for n in self.noise if n.turn <= last])

    def up_to_first_user_turn(self) -> "Dialogue":
        """The turns up to and including the first user turn (the first-turn-only shortcut reads this)."""
        return self.prefix(1)

    def last_user_turn(self) -> "Dialogue":
        """The last user turn alone, without anything said before it (the last-turn-only shortcut reads this)."""
        users = self.user_turns()
        return Dialogue(turns=[users[-1][1]] if users else list(self.turns[-1:]), noise=[])


class TurnReading(BaseModel):
    """What one user turn establishes, as the reader understood it."""

    model_config = ConfigDict(extra="forbid")

    reply: str | None = Field(None, description="HRS: the kind of this user reply (null for LRS).")
    facts: dict[str, FactValue | None] = Field(default_factory=dict, description=(
        "The facts this turn states, or corrects, with their value as of this turn (null entries are ignored)."))


class Extraction(BaseModel):
    """What an independent reader found in the user input alone, user turn by user turn."""

    model_config = ConfigDict(extra="forbid")

    turns: list[TurnReading] = Field(default_factory=list, description="One reading per user turn, in order.")

    def state_after(self, turn: int) -> dict[str, FactValue]:
        """The facts as established by the end of user turn ``turn`` (later corrections replace values)."""
        state: dict[str, FactValue] = {}
        for reading in self.turns[:turn]:
            state.update({k: v for k, v in reading.facts.items() if v is not None})
        return state

    @property
    def facts(self) -> dict[str, FactValue]:
        """The facts as established by the end of the input."""
        return self.state_after(len(self.turns))

    @property
    def replies(self) -> list[str]:
        return [(r.reply or "") for r in self.turns]


class Verification(BaseModel):
    """The three checks of issue 14 item 3 on one instance."""

    model_config = ConfigDict(extra="forbid")

    extraction_matches: bool = Field(description="The reader extracted every stated fact (and reply) as sampled.")
    mismatches: list[str] = Field(default_factory=list, description="What the reader read differently.")
    unique: bool = Field(description="Executing the tree on the reader's facts gives exactly the reference answer, "
                                     "whatever the unstated facts are.")
    uniqueness: str = Field("", description="Why not, when not unique.")
    schema_valid: bool = Field(description="The reference answer validates against the scenario's schema.")
    schema_errors: list[str] = Field(default_factory=list, description="Schema violations of the reference answer.")
    subtasks_match: bool = Field(True, description=(
        "After every user turn that has a subtask, the tree executed on what the reader found by then gives exactly "
        "that subtask's answer, and every planned reversal is read as first said, then revoked."))
    subtask_problems: list[str] = Field(default_factory=list, description="Where the turn-by-turn reading disagrees.")

    @property
    def passed(self) -> bool:
        return self.extraction_matches and self.unique and self.schema_valid and self.subtasks_match

    def reasons(self) -> list[str]:
        reasons = [f"extraction: {m}" for m in self.mismatches]
        if not self.unique:
            reasons.append(f"not unique: {self.uniqueness}")
        reasons += [f"turn by turn: {p}" for p in self.subtask_problems]
        reasons += [f"answer outside the schema: {e}" for e in self.schema_errors]
        return reasons


class MazeInstance(BaseModel):
    """One verified instance: plan, user input, independent reading and verdict."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Instance id.")
    scenario: str = Field(description="Scenario name.")
    kind: Literal["LRS", "HRS"] = Field(description="Scenario kind.")
    plan: InstancePlan = Field(description="The sampled plan, with the computed reference answer.")
    dialogue: Dialogue = Field(description="The written conversation.")
    user_input: str = Field(description="Part 3 of the four-part prompt: the conversation in its input format.")
    extraction: Extraction = Field(description="The independent reader's facts.")
    verification: Verification = Field(description="The verdict.")
    cycles: int = Field(1, ge=1, description="Writing cycles used (a repair is a second cycle).")

    @property
    def target(self) -> dict[str, Any]:
        return self.plan.target

    def subtask_input(self, turn: int) -> str:
        """The user input of the subtask after user turn ``turn`` (the full input for the last one)."""
        return render_user_input(self.dialogue.prefix(turn), self.plan.input_format, self.plan.call_date)


class InstanceSet(BaseModel):
    """The maze_instances artifact: the kept instances of both scenarios, the funnel and every drop."""

    model_config = ConfigDict(extra="forbid")

    instances: list[MazeInstance] = Field(description="Kept (verified) instances, LRS first.")
    seed: int = Field(description="Seed of every sampling choice.")
    funnel: list[FunnelRow] = Field(default_factory=list, description="Counts per scenario kind.")
    drops: list[DroppedItem] = Field(default_factory=list, description="Every dropped instance with its reason.")

    def of_kind(self, kind: str) -> list[MazeInstance]:
        return [i for i in self.instances if i.kind == kind]


# ------------------------------------------------------------------------------------------ parsing

def _validated(model: type[BaseModel], data: Any, tag: str) -> Any:
    if not isinstance(data, dict):
        raise ParseError(f"<{tag}> must hold one JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ParseError(describe_validation_error(exc, f"<{tag}>")) from exc


def parse_dialogue(raw_text: str) -> Dialogue:
    """Read ``<dialogue>``.

    Raises:
        ParseError: missing tag, invalid JSON, an unknown speaker or phenomenon, an empty turn.
    """
    return _validated(Dialogue, extract_json(extract_tag(raw_text, DIALOGUE_TAG)), DIALOGUE_TAG)


def parse_extraction(raw_text: str) -> Extraction:
    """Read ``<extraction>``.

    Raises:
        ParseError: missing tag, invalid JSON, facts not an object of scalars, replies not a list of strings.
    """
    return _validated(Extraction, extract_json(extract_tag(raw_text, EXTRACTION_TAG)), EXTRACTION_TAG)


# ------------------------------------------------------------------------------------------ rendering

_LABELS = {"speaker_tags": {"agent": "ASSISTANT", "user": "USER"},
           "timestamped": {"agent": "Agent", "user": "Customer"},
           "json_lines": {"agent": "assistant", "user": "user"}}


def render_user_input(dialogue: Dialogue, input_format: str, call_date: str, *, start: str = "10:02:11") -> str:
    """Part 3 of the four-part prompt: the dialogue laid out in ``input_format``.

    Timestamps (``timestamped``) start at ``start`` on ``call_date`` and advance by a fixed,
    length-dependent amount per turn, so the same dialogue always renders the same text.
    """
    labels = _LABELS[input_format]
    if input_format == "json_lines":
        return "\n".join(json.dumps({"role": labels[t.speaker], "message": t.text, "type": "TEXT"}, ensure_ascii=False)
                         for t in dialogue.turns)
    if input_format == "speaker_tags":
        return "\n".join(f"{labels[t.speaker]}: {t.text}" for t in dialogue.turns)
    clock = datetime.fromisoformat(f"{call_date}T{start}")
    lines = []
    for t in dialogue.turns:
        lines.append(f"{labels[t.speaker]} ({clock:%Y-%m-%d %H:%M:%S}): {t.text}")
        clock += timedelta(seconds=4 + len(t.text) // 12)
    return "\n".join(lines)
