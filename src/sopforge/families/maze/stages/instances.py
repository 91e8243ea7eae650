"""Stage 'maze_instances': sampled plans → written user inputs → independently read → verified.

For each scenario of both sets :func:`~sopforge.families.maze.stages.planning.plan_instances`
samples the plans in code (facts, path, turns, noise with its decoys, format; every answer
computed by executing the tree). Then, per plan, concurrently with the others
(:func:`sopforge.ask.fan_out`), up to ``1 + max_retries`` cycles:

1. the writer (``sop_maze/{lrs,hrs}_dialogue``) writes the conversation; code checks the turn
   structure, the fixed HRS agent lines, the calculation operands, planted numbers and the noise
   tags (a broken answer is re-asked inside the cycle);
2. an independent reader (``sop_maze/extract_facts``), given the fact catalogue and the rendered
   user input only, never the SOP, the plan or the answer, records what each user turn establishes;
3. :func:`~sopforge.families.maze.verify.instance_checks.verify_instance` compares the facts,
   re-executes the tree on the reader's final facts (uniqueness) and on what it found by each
   subtask's turn, and validates the answer against the schema.

A cycle that fails at 3 starts the next with the reader's disagreements quoted (a repair that keeps
the noise); after the last cycle, or when an answer is unreadable, the instance is dropped with its
reason. Every plan is one item of the funnel (component ``maze_instance``, type LRS or HRS). Pure:
no Prefect, no store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from sopforge.ask import StageResult, ask_keeping_answers, failed_with_answers, fan_out
from sopforge.checks import CheckResult, check
from sopforge.context.model import BusinessContext
from sopforge.errors import UserError, ValidationFailed
from sopforge.families.maze.models.dates import long_date
from sopforge.families.maze.models.execution import compile_logic
from sopforge.families.maze.models.instances import (
    Dialogue, Extraction, InstancePlan, InstanceSet, MazeInstance, parse_dialogue, parse_extraction, render_user_input,
)
from sopforge.families.maze.models.scenario import HRSScenario, Scenario, ScenarioSet
from sopforge.families.maze.options import MazeSpec
from sopforge.families.maze.stages.planning import PlanError, plan_instances
from sopforge.families.maze.verify.instance_checks import check_dialogue, verify_instance
from sopforge.funnel import Funnel
from sopforge.llm.types import LLMClient
from sopforge.parsing import one_line
from sopforge.prompts import PromptRegistry, RenderedPrompt, default_registry
from sopforge.settings import Settings

__all__ = ["COMPONENT", "REPAIR_LEAD", "STAGE", "TEMPLATE_IDS", "InstancesInputs", "extraction_prompt", "plan_all",
           "plan_text", "run"]

STAGE = "maze_instances"
COMPONENT = "maze_instance"
WRITER_TEMPLATES = {"LRS": "sop_maze/lrs_dialogue", "HRS": "sop_maze/hrs_dialogue"}
READER_TEMPLATE = "sop_maze/extract_facts"
TEMPLATE_IDS = (WRITER_TEMPLATES["LRS"], WRITER_TEMPLATES["HRS"], READER_TEMPLATE)
REPAIR_LEAD = ("An independent reader who saw only your conversation read these points differently from the plan. "
               "Write the conversation again, following the same plan. Keep every planned noise phenomenon as planned "
               "(sarcasm stays sarcastic, a reversal stays a reversal, a calculation stays operands only, background "
               "speech stays in the background): make each fact come through correctly in its own turn, without "
               "adding plain restatements. The points:")


class InstancesInputs(BaseModel):
    """What the instances stage needs: both accepted scenario sets and the theme's maze options."""

    theme_slug: str = Field(description="Slug of the theme; first part of every call key.")
    context: BusinessContext = Field(description="Accepted business context (the writer's background).")
    lrs: ScenarioSet = Field(description="Accepted LRS scenarios.")
    hrs: ScenarioSet = Field(description="Accepted HRS scenarios.")
    options: MazeSpec = Field(description="Instance counts, noise shares, repair cycles and seed.")


# ------------------------------------------------------------------------------------------ prompt text

def _value(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def plan_text(scenario: Scenario, plan: InstancePlan) -> str:
    """The per-instance part of the writer prompt: what every user turn must do."""
    noise = {}
    for n in plan.noise:
        noise.setdefault(n.user_turn, []).append(n)
        if n.decoy_turn:
            noise.setdefault(n.decoy_turn, []).append(n)
    lines = [f"Instance {plan.id}. The conversation takes place on {long_date(plan.call_date)}. It has exactly "
             f"{len(plan.turns)} user turns."]
    kb = scenario.knowledge_base
    for turn in plan.turns:
        if turn.agent_line is not None:
            lines.append(f"Agent turn {turn.index} (say exactly): \u201c{turn.agent_line}\u201d")
        parts = []
        if turn.reply:
            parts.append(f"reply kind = {turn.reply}")
        if turn.question is not None:
            parts.append(f"the user asks, in their own words, the knowledge-base question \u201c{kb[turn.question].q}\u201d")
        planted = [n for n in noise.get(turn.index, []) if n.user_turn == turn.index]
        if turn.off_topic and not any(n.phenomenon == "off_topic" for n in planted):
            parts.append("off-topic: the whole turn is about something unrelated to the request and states no fact")
        if turn.facts:
            computed = {n.fact for n in planted if n.phenomenon == "calculation"}
            parts.append("convey " + "; ".join(f"{f} (only through the operands below)" if f in computed
                                               else f"{f} = {_value(plan.facts[f])}" for f in turn.facts))
        for n in noise.get(turn.index, []):
            if n.decoy_turn == turn.index:
                parts.append(f"say, as if it were true, that {n.fact} = {_value(n.decoy)} (taken back in user turn "
                             f"{n.user_turn})")
            else:
                parts.append(f"{n.phenomenon}: {n.instruction}")
        last = " (the last turn: the conversation ends with it)" if plan.kind == "HRS" and turn.index == len(plan.turns) else ""
        lines.append(f"User turn {turn.index}{last}: " + ("; ".join(parts) or "a natural reply that states no fact"))
    if plan.kind == "LRS":
        lines.append("Each fact comes up first in its own turn, not earlier.")
    tags = ", ".join(f"{n.phenomenon} (user turn {n.user_turn})" for n in plan.noise) or "none"
    lines.append(f"Noise to tag: {tags}.")
    return "\n".join(lines)


def extraction_prompt(registry: PromptRegistry, scenario: Scenario, user_input: str) -> RenderedPrompt:
    """The reader's prompt: the fact catalogue and reply kinds, then the user input; never the SOP."""
    replies = (scenario.reply_catalogue() if isinstance(scenario, HRSScenario)
               else "(none: this input is classified as a whole, so give null as every turn's \"reply\")")
    return registry.render(READER_TEMPLATE, scenario_title=scenario.title, fact_catalogue=scenario.fact_catalogue(),
                           reply_kinds=replies, user_input=user_input)


def _with_repair(rendered: RenderedPrompt, reasons: list[str]) -> RenderedPrompt:
    # A final paragraph after the rendered prompt, as reviewer feedback is added; the prompt hash
    # stays the rendered one (it identifies the template and inputs, not the repair).
    if not reasons:
        return rendered
    listed = "\n".join(f"- {r}" for r in reasons)
    return rendered.model_copy(update={"text": f"{rendered.text.rstrip()}\n\n{REPAIR_LEAD}\n{listed}\n"})


# ------------------------------------------------------------------------------------------ the stage

@dataclass
class _Outcome:
    instance: MazeInstance | None
    cycles: int
    reason: str = ""
    raw_texts: list[str] = field(default_factory=list)
    results: list[StageResult] = field(default_factory=list)


@dataclass
class _Asker:
    """The asks of one plan (each plan has its own, so plans can run concurrently)."""

    llm: LLMClient
    settings: Settings
    model: str
    temperature: float
    slug: str
    feedback: str | None
    raw_texts: list[str] = field(default_factory=list)
    results: list[StageResult] = field(default_factory=list)

    def ask(self, item: str, rendered: RenderedPrompt, parse_and_check, *, feedback: bool = True) -> StageResult:
        result = ask_keeping_answers(self.raw_texts, self.llm, rendered, parse_and_check=parse_and_check, stage=STAGE,
                                     call_key_prefix=f"{self.slug}/{STAGE}/{item}", settings=self.settings,
                                     model=self.model, temperature=self.temperature,
                                     feedback=self.feedback if feedback else None)
        self.results.append(result)
        return result


def _cycles(scenario: Scenario, plan: InstancePlan, asker: _Asker, registry: PromptRegistry, context_text: str,
            max_retries: int) -> _Outcome:
    logic = compile_logic(scenario)
    writer = registry.render(WRITER_TEMPLATES[scenario.kind], business_context=context_text,
                             scenario_sop=scenario.sop_text(), instance_plan=plan_text(scenario, plan))
    reasons: list[str] = []
    cycles = 1 + max_retries
    for cycle in range(1, cycles + 1):
        def parse_dialogue_checked(raw: str) -> tuple[Dialogue, list[CheckResult]]:
            dialogue = parse_dialogue(raw)
            return dialogue, check_dialogue(plan, dialogue)

        try:
            dialogue: Dialogue = asker.ask(f"dialogue_{plan.id}_c{cycle}", _with_repair(writer, reasons),
                                           parse_dialogue_checked).artifact
        except ValidationFailed as exc:
            return _Outcome(None, cycle, f"writer: {one_line(str(exc), 240)}")
        user_input = render_user_input(dialogue, plan.input_format, plan.call_date)
        try:
            extraction: Extraction = asker.ask(f"extract_{plan.id}_c{cycle}", extraction_prompt(registry, scenario, user_input),
                                               lambda raw: (parse_extraction(raw), []), feedback=False).artifact
        except ValidationFailed as exc:
            return _Outcome(None, cycle, f"reader: {one_line(str(exc), 240)}")
        verification = verify_instance(scenario, logic, plan, extraction)
        if verification.passed:
            return _Outcome(MazeInstance(id=plan.id, scenario=scenario.name, kind=scenario.kind, plan=plan,
                                         dialogue=dialogue, user_input=user_input, extraction=extraction,
                                         verification=verification, cycles=cycle), cycle)
        reasons = verification.reasons()
    return _Outcome(None, cycles, f"rejected in all {cycles} cycles; last: {'; '.join(reasons)}")


def plan_all(lrs: ScenarioSet, hrs: ScenarioSet, opts: MazeSpec) -> list[tuple[Scenario, InstancePlan]]:
    """Every plan of every scenario, LRS first (ids ``L<scenario>-<n>``, ``H<scenario>-<n>``).

    Raises:
        UserError: a scenario admits fewer plans than requested (ask for fewer instances).
    """
    planned = []
    for scenarios, count in ((lrs.scenarios, opts.lrs_instances), (hrs.scenarios, opts.hrs_instances)):
        for index, scenario in enumerate(scenarios, start=1):
            try:
                plans = plan_instances(scenario, count, noise=opts.noise, max_turns=opts.max_turns, seed=opts.seed,
                                       prefix=f"{scenario.kind[0]}{index}-")
            except PlanError as exc:
                raise UserError(f"{STAGE}: {exc}; lower maze.{scenario.kind.lower()}_instances in the theme "
                                "file") from exc
            planned += [(scenario, plan) for plan in plans]
    return planned


def run(inputs: InstancesInputs, *, llm: LLMClient, settings: Settings, model: str, temperature: float,
        feedback: str | None = None, registry: PromptRegistry | None = None) -> StageResult[InstanceSet]:
    """Plan, write, read and verify the instances of every scenario.

    Returns:
        The InstanceSet with the kept instances, the funnel and every drop. ``checks`` carry
        ``maze.instances.kept`` (a warning when some were dropped); template identity and
        ``prompt_hash`` are the first writer prompt's; ``raw_texts`` hold every answer.

    Raises:
        UserError: a scenario admits fewer plans than requested (ask for fewer instances).
        ValidationFailed: every instance of a scenario was dropped (nothing to export).
    """
    registry = registry or default_registry(settings)
    opts = inputs.options
    context_text = inputs.context.to_prompt_text()
    planned = plan_all(inputs.lrs, inputs.hrs, opts)

    def build(job: tuple[Scenario, InstancePlan]) -> _Outcome:
        asker = _Asker(llm=llm, settings=settings, model=model, temperature=temperature, slug=inputs.theme_slug,
                       feedback=feedback)
        outcome = _cycles(*job, asker, registry, context_text, opts.max_retries)
        outcome.raw_texts, outcome.results = asker.raw_texts, asker.results
        return outcome

    outcomes = fan_out(build, planned, "instance")
    funnel = Funnel()
    kept: list[MazeInstance] = []
    raw_texts = [t for o in outcomes for t in o.raw_texts]
    results = [r for o in outcomes for r in o.results]
    for (scenario, plan), outcome in zip(planned, outcomes):
        funnel.item(COMPONENT, scenario.kind, plan.id, verified=outcome.instance is not None,
                    kept=outcome.instance is not None, retried=outcome.cycles > 1, reason=outcome.reason)
        if outcome.instance is not None:
            kept.append(outcome.instance)
    empty = [s.name for s in inputs.lrs.scenarios + inputs.hrs.scenarios if not any(i.scenario == s.name for i in kept)]
    artifact = InstanceSet(instances=kept, seed=opts.seed, funnel=funnel.rows(), drops=funnel.drops)
    if empty:
        reasons = "; ".join(f"{d.item}: {one_line(d.reason, 160)}" for d in funnel.drops[:4])
        raise failed_with_answers(f"{STAGE}: every instance of {', '.join(empty)} was dropped ({reasons})",
                                  [{"name": "maze.instances.kept", "message": reasons, "severity": "error",
                                    "details": {}}], raw_texts)
    asked = len(planned)
    dropped = ", ".join(f"{d.item} ({one_line(d.reason, 120)})" for d in funnel.drops)
    checks = [c for r in results for c in r.checks] + [check(
        "maze.instances.kept", len(kept) == asked, f"{len(kept)} of {asked} instances kept"
        + (f"; dropped: {dropped}" if dropped else ""), severity="warning", kept=len(kept), asked=asked)]
    first = results[0] if results else None
    return StageResult[InstanceSet](
        artifact=artifact, checks=checks, template_id=first.template_id if first else WRITER_TEMPLATES["LRS"],
        template_hash=first.template_hash if first else "-", prompt_hash=first.prompt_hash if first else "-",
        model=model, attempts=len(raw_texts), raw_texts=raw_texts)
