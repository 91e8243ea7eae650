"""Stage 'manipulations' (compliance part): SOP → instruction document → dialogues → compliance pairs.

TOD-ProcBench (tod_procbench.md S1, S3, S7) in four LLM steps with code in between:

1. the instruction document (f1 What_to_do + What_to_say) from the SOP and business context;
   f2/f3 come from deterministic code (``sopforge.families.sop_tools.models.instructions``);
2. a short dialogue per sampled ground-truth task whose final agent turn is the compliant
   response, naming the statement ids it carries out;
3. per dialogue and operator: the section is extracted in code (innermost If block around the
   followed actions), the operator is applied in code to the full document restricted to the
   section and proven to change exactly its target, the model rewrites the compliant response
   minimally to follow the manipulated section, and a verifier model confirms the rewrite no
   longer entails the original; a style check in code rejects rewrites given away by casing or
   length. Failed cycles re-manipulate with the next seed, up to ``1 + max_retries`` cycles;
4. the kept rewrites and their compliant twins form the balanced compliance set.

Pure: no Prefect, no store. The instruction document failing every attempt fails the stage;
a dialogue or pair that fails is dropped and counted in the funnel with its reason.
"""

from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from sopforge.errors import ValidationFailed
from sopforge.llm.types import LLMClient
from sopforge.prompts import PromptRegistry, default_registry
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.compliance import (
    ComplianceItem, Dialogue, InstructionDocument, document_id, parse_dialogue, parse_entailment,
    parse_instruction_document, parse_rewrite,
)
from sopforge.context.model import BusinessContext
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.funnel import Funnel
from sopforge.families.sop_tools.models.ground_truth import GroundTruth, Task
from sopforge.families.sop_tools.models.instruction_manipulations import (
    CaseValues, ManipulationType, NotApplicable, manipulate,
)
from sopforge.families.sop_tools.models.instructions import (
    Condition, InstructionTree, enclosing_block, render_block, render_f1, render_f1_with_ids, subtree_ids,
)
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.settings import Settings
from sopforge.ask import ask_keeping_answers, fan_out
from sopforge.families.sop_tools.verify.compliance_checks import (
    balance_check, check_dialogue, check_instruction_document, length_parity_check, manipulation_problem,
    style_problems,
)

__all__ = ["STAGE", "TEMPLATE_IDS", "KINDS", "ComplianceInputs", "ComplianceResult", "make_compliance",
           "sample_tasks", "extract_section", "task_label", "safe_id"]

STAGE = "manipulations"
TEMPLATE_IDS = ("tod_procbench/instruction_document", "tod_procbench/dialogue", "tod_procbench/violating_rewrite",
                "tod_procbench/entailment_verifier")
KINDS: tuple[ManipulationType, ...] = ("parameter_mismatch", "single_condition_replacement",
                                       "multi_condition_replacement")


class ComplianceInputs(BaseModel):
    """What the compliance part of the manipulations stage needs."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context.")
    data_schema: DataSchema = Field(validation_alias=AliasChoices("schema", "data_schema"),
                                    description="Accepted data schema (supplies the decision labels).")
    sop: SOPDocument = Field(description="Accepted base SOP.")
    ground_truth: GroundTruth = Field(description="Computed ground truth; dialogues play out its tasks.")
    n_dialogues: int = Field(2, ge=0, description="Tasks to write a dialogue for.")
    max_retries: int = Field(2, ge=0, description="Extra manipulation cycles per pair after the first.")
    seed: int = Field(0, description="Seeds task sampling and the manipulations.")


@dataclass
class ComplianceResult:
    """The instruction document, the kept dialogues and the balanced compliance set.

    ``attempts`` is the instruction document's attempt count (the stage's main artifact);
    ``raw_texts`` holds every model answer of the stage, kept or not, in call order.
    """

    document: InstructionDocument | None
    dialogues: list[Dialogue] = field(default_factory=list)
    items: list[ComplianceItem] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    raw_texts: list[str] = field(default_factory=list)
    attempts: int = 0


def safe_id(task_id: str) -> str:
    """A task id usable in call keys and file names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", task_id).strip("-") or "task"


def task_label(task: Task, decision_field: str) -> str:
    """The task's expected outcome label, spelled as in the schema (booleans as true/false)."""
    value = task.expected_outputs.get(decision_field)
    return str(value).lower() if isinstance(value, bool) else str(value)


def sample_tasks(tasks: list[Task], decision_field: str, n: int, seed: int) -> list[Task]:
    """Pick ``n`` tasks, seeded, one per outcome label in turn so that outcomes are covered first."""
    rng = random.Random(f"{seed}:dialogues")
    by_label: dict[str, list[Task]] = {}
    for task in tasks:
        by_label.setdefault(task_label(task, decision_field), []).append(task)
    labels = sorted(by_label)
    rng.shuffle(labels)
    for group in by_label.values():
        rng.shuffle(group)
    picked: list[Task] = []
    while len(picked) < n and any(by_label.values()):
        for label in labels:
            if by_label[label] and len(picked) < n:
                picked.append(by_label[label].pop())
    return picked


def extract_section(tree: InstructionTree, followed: list[str]) -> Condition | None:
    """The section a response relates to: the innermost If block around every followed action (S7.1)."""
    return enclosing_block(tree, followed)


def _find_block(tree: InstructionTree, block_id: str) -> Condition:
    def walk(items: list) -> Condition | None:
        for item in items:
            if isinstance(item, Condition):
                if item.id == block_id:
                    return item
                if found := walk(item.items):
                    return found
        return None

    block = walk(tree.items)
    if block is None:
        raise KeyError(block_id)
    return block


def _decision_labels(schema: DataSchema) -> list[str]:
    return [label for f in schema.decisions for label in f.labels()]


def _case_text(task: Task) -> str:
    lines = ["Given by the customer or on the request:"]
    lines += [f"  {k}: {v}" for k, v in task.inputs.items()]
    lines += ["In the records the agent looks up:"]
    lines += [f"  {k}: {v}" for k, v in task.hidden.items() if v is not None]  # a conditional field without a value
    return "\n".join(lines)


def _diff(before: str, after: str) -> str:
    return "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), "original", "manipulated",
                                          lineterm="", n=1))


class _Text(BaseModel):
    """A rewrite, wrapped so ask_until_valid gets a model."""

    text: str


class _Verdict(BaseModel):
    """The entailment verifier's answer."""

    entails: bool
    reason: str

    @classmethod
    def of(cls, parsed: tuple[bool, str]) -> _Verdict:
        return cls(entails=parsed[0], reason=parsed[1])


class _Asker:
    """Shared keyword arguments of every ask in this stage, and the raw answers of all of them."""

    def __init__(self, llm: LLMClient, settings: Settings, model: str, temperature: float,
                 registry: PromptRegistry, feedback: str | None) -> None:
        self.llm, self.settings, self.model, self.temperature = llm, settings, model, temperature
        self.registry, self.feedback = registry, feedback
        self.raw_texts: list[str] = []

    def fork(self) -> _Asker:
        """The same settings with its own raw answers: one per item asked concurrently."""
        return _Asker(self.llm, self.settings, self.model, self.temperature, self.registry, self.feedback)

    def ask(self, template_id: str, key: str, parse_and_check, **params: Any):
        rendered = self.registry.render(template_id, **params)
        return ask_keeping_answers(self.raw_texts, self.llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                                   call_key_prefix=key, settings=self.settings, model=self.model,
                                   temperature=self.temperature, feedback=self.feedback)


def make_compliance(inputs: ComplianceInputs, *, llm: LLMClient, settings: Settings, model: str,
                    temperature: float, registry: PromptRegistry | None = None, funnel: Funnel,
                    feedback: str | None = None) -> ComplianceResult:
    """Build the instruction document, dialogues and the balanced compliance set.

    Args:
        inputs: Accepted context, schema, SOP and ground truth, plus sampling and retry settings.
        llm: The LLM client (normally the Gateway).
        settings: Runtime settings (attempt budget per ask, prompts folder).
        model: Model to ask.
        temperature: Sampling temperature.
        registry: Prompt registry; defaults to the project's ``prompts/``.
        funnel: Receives one item per document, dialogue and (dialogue, operator) pair.
        feedback: Reviewer feedback on a rejected previous version, appended to every prompt.

    Returns:
        The result; ``items`` holds twins only (compliant count == violating count).

    Raises:
        ValidationFailed: The instruction document was not accepted within ``settings.max_attempts``.
    """
    asker = _Asker(llm, settings, model, temperature, registry or default_registry(settings), feedback)
    labels = _decision_labels(inputs.data_schema)
    document, doc_checks, attempts = _instruction_document(asker, inputs, labels, funnel)
    result = ComplianceResult(document=document, checks=list(doc_checks), attempts=attempts)
    decision_field = inputs.data_schema.decisions[0].name if inputs.data_schema.decisions else ""
    tasks = sample_tasks(inputs.ground_truth.tasks, decision_field, inputs.n_dialogues, inputs.seed)

    def dialogue_and_pairs(task: Task) -> tuple[Dialogue | None, list[ComplianceItem], _Asker, Funnel]:
        # Each task's dialogue, then its three operators at once; answers and funnel entries are the
        # item's own and merged below in task order, so the artifact never depends on timing.
        mine, counted = asker.fork(), Funnel()
        dialogue = _dialogue(mine, inputs, document, task, labels, task_label(task, decision_field), counted)
        if dialogue is None:
            return None, [], mine, counted
        pairs = fan_out(lambda kind: _pair_alone(mine, inputs, document, dialogue, kind), KINDS, "operator")
        items = []
        for twins, pair_asker, pair_funnel in pairs:
            items += twins
            mine.raw_texts += pair_asker.raw_texts
            counted.extend(pair_funnel)
        return dialogue, items, mine, counted

    for dialogue, items, mine, counted in fan_out(dialogue_and_pairs, tasks, "dialogue"):
        asker.raw_texts += mine.raw_texts
        funnel.extend(counted)
        if dialogue is not None:
            result.dialogues.append(dialogue)
            result.items += items
    result.raw_texts = asker.raw_texts
    result.checks += [balance_check(result.items), length_parity_check(result.items),
                      check("compliance.pairs_kept", bool(result.items) or not inputs.n_dialogues,
                            f"no compliance pair was kept from {len(result.dialogues)} dialogue(s); see the funnel",
                            ok=f"{len(result.items) // 2} compliance pair(s) kept from {len(result.dialogues)} dialogue(s)",
                            severity="warning", pairs=len(result.items) // 2)]
    return result


def _instruction_document(asker: _Asker, inputs: ComplianceInputs, labels: list[str],
                          funnel: Funnel) -> tuple[InstructionDocument, list[CheckResult], int]:
    intent = inputs.context.task.sop_title
    outcomes = "\n".join(f"{f.name}: {' | '.join(f.labels())}" for f in inputs.data_schema.decisions)

    def parse_and_check(raw: str) -> tuple[InstructionDocument, list[CheckResult]]:
        doc = parse_instruction_document(raw, intent=intent)
        return doc, check_instruction_document(doc.tree, labels)

    try:
        accepted = asker.ask(TEMPLATE_IDS[0], f"{inputs.theme_slug}/{STAGE}/instructions", parse_and_check,
                             intent=intent, business_context=inputs.context.to_prompt_text(),
                             sop=inputs.sop.to_prompt_text(), decision_outcomes=outcomes)
    except ValidationFailed as exc:
        funnel.item("instruction_document", "f1", intent, verified=False, kept=False,
                    retried=len(getattr(exc, "raw_texts", [])) > 1, reason=str(exc))
        raise
    funnel.item("instruction_document", "f1", intent, verified=True, kept=True, retried=accepted.attempts > 1)
    return accepted.artifact, accepted.checks, accepted.attempts


def _dialogue(asker: _Asker, inputs: ComplianceInputs, document: InstructionDocument, task: Task,
              labels: list[str], expected: str, funnel: Funnel) -> Dialogue | None:
    outcome = "; ".join(f"{k} = {v}" for k, v in task.expected_outputs.items())

    def parse_and_check(raw: str) -> tuple[Dialogue, list[CheckResult]]:
        dialogue = parse_dialogue(raw, task_id=task.task_id)
        return dialogue, check_dialogue(dialogue, document.tree, labels, expected)

    try:
        accepted = asker.ask(TEMPLATE_IDS[1], f"{inputs.theme_slug}/{STAGE}/dialogue_{safe_id(task.task_id)}",
                             parse_and_check, intent=document.intent,
                             instructions_with_ids=render_f1_with_ids(document.tree),
                             what_to_say=document.what_to_say, case=_case_text(task), expected_outcome=outcome)
    except ValidationFailed as exc:
        funnel.item("dialogue", "dialogue", task.task_id, verified=False, kept=False,
                    retried=len(getattr(exc, "raw_texts", [])) > 1, reason=str(exc))
        return None
    dialogue, retried = accepted.artifact, accepted.attempts > 1
    section = extract_section(document.tree, dialogue.followed)
    if section is None:
        funnel.item("dialogue", "dialogue", task.task_id, verified=True, kept=False, retried=retried,
                    reason=f"excluded: the followed actions {', '.join(dialogue.followed)} share no enclosing "
                           "If block (TOD-ProcBench drops responses without a section)")
        return None
    funnel.item("dialogue", "dialogue", task.task_id, verified=True, kept=True, retried=retried)
    return dialogue.model_copy(update={"section_id": section.id, "section_f1": render_block(section)})


def case_values(sop: SOPDocument, task: Task | None) -> CaseValues:
    """The task's value of each quantity the SOP compares with a number, keyed by (comparator, number)."""
    if task is None:
        return {}
    values = {**task.inputs, **task.hidden, **task.expected_outputs}
    known: CaseValues = {}
    for threshold in sop.thresholds:
        statement = threshold.statement()
        value = values.get(statement[0]) if statement else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            known[(statement[1], statement[2])] = float(value)
    return known


def _pair_alone(asker: _Asker, inputs: ComplianceInputs, document: InstructionDocument, dialogue: Dialogue,
                kind: ManipulationType) -> tuple[list[ComplianceItem], _Asker, Funnel]:
    """:func:`_pair` with its own asker and funnel, for running the operators concurrently."""
    mine, counted = asker.fork(), Funnel()
    return _pair(mine, inputs, document, dialogue, kind, counted), mine, counted


def _pair(asker: _Asker, inputs: ComplianceInputs, document: InstructionDocument, dialogue: Dialogue,
          kind: ManipulationType, funnel: Funnel) -> list[ComplianceItem]:
    """Up to ``1 + max_retries`` manipulation cycles for one (dialogue, operator); [] or the two twins."""
    pair_id = f"{dialogue.task_id}:{kind}"
    tree, section_id = document.tree, dialogue.section_id or ""
    within = subtree_ids(_find_block(tree, section_id))
    conversation = "\n".join(t.line() for t in dialogue.prefix)
    key = f"{inputs.theme_slug}/{STAGE}/{{step}}_{safe_id(dialogue.task_id)}_{kind}_c{{cycle}}"
    cycles = 1 + inputs.max_retries
    note, reason = "", ""

    def drop(why: str, cycle: int, verified: bool = False) -> list[ComplianceItem]:
        funnel.item("compliance_pair", kind, pair_id, verified=verified, kept=False, retried=cycle > 1, reason=why)
        return []

    known = case_values(inputs.sop, next((t for t in inputs.ground_truth.tasks if t.task_id == dialogue.task_id), None))
    for cycle in range(1, cycles + 1):
        seed = inputs.seed + cycle - 1
        try:
            manipulation = manipulate(tree, kind, seed, within=within, case_values=known)
        except NotApplicable as exc:
            return drop(f"ineligible: {exc} in section {section_id}", cycle)
        if problem := manipulation_problem(tree, manipulation, within):
            return drop(f"manipulation rejected: {problem}", cycle)
        manipulated_section = render_block(_find_block(manipulation.tree, section_id))
        try:
            # The whole documents, not only the section: the right rewrite can depend on an Else
            # branch outside the changed section (what happens once the changed step no longer applies).
            rewrite = asker.ask(TEMPLATE_IDS[2], key.format(step="rewrite", cycle=cycle),
                                lambda raw: (_Text(text=parse_rewrite(raw)), []),
                                conversation=conversation, original_document=render_f1_with_ids(tree),
                                manipulated_document=render_f1_with_ids(manipulation.tree), section_id=section_id,
                                changed_id=manipulation.target_id, original_instruction=dialogue.section_f1,
                                manipulated_instruction=manipulated_section,
                                compliant_response=dialogue.response, retry_note=note).artifact.text
            verdict = asker.ask(TEMPLATE_IDS[3], key.format(step="entail", cycle=cycle),
                                lambda raw: (_Verdict.of(parse_entailment(raw)), []),
                                original_instruction=dialogue.section_f1, compliant_response=dialogue.response,
                                candidate_response=rewrite).artifact
        except ValidationFailed as exc:
            return drop(f"unparsable answer, pair dropped: {exc}", cycle)
        problems = style_problems(dialogue.response, rewrite)
        if verdict.entails:
            reason = f"the rewrite still entails the compliant response ({verdict.reason})"
        elif problems:
            reason = "style check: " + "; ".join(problems)
        else:
            return _twins(inputs, document, dialogue, kind, manipulation, manipulated_section, rewrite,
                          cycle, funnel)
        note = f"Your previous rewrite was rejected: {reason}. The instruction has been changed again; revise anew."
    return drop(f"after {cycles} cycle(s): {reason}", cycles)


def _twins(inputs: ComplianceInputs, document: InstructionDocument, dialogue: Dialogue, kind: ManipulationType,
           manipulation, manipulated_section: str, rewrite: str, cycle: int, funnel: Funnel) -> list[ComplianceItem]:
    pair_id = f"{dialogue.task_id}:{kind}"
    funnel.item("compliance_pair", kind, pair_id, verified=True, kept=True, retried=cycle > 1)
    shared = dict(pair_id=pair_id, task_id=dialogue.task_id, document_id=document_id(inputs.theme_slug),
                  section_id=dialogue.section_id, prefix=dialogue.prefix, policy=dialogue.section_f1,
                  manipulation_type=kind, changed_ids=[manipulation.target_id],
                  manipulated_policy=manipulated_section, manipulated_document=render_f1(manipulation.tree),
                  diff=_diff(dialogue.section_f1 or "", manipulated_section), retries=cycle - 1,
                  seed=manipulation.seed)
    return [ComplianceItem(label="compliant", response=dialogue.response, **shared),
            ComplianceItem(label="violating", response=rewrite, **shared)]
