"""Answer LLM requests by stage with the recorded example responses (consistent with each other)."""

from __future__ import annotations

import functools
from pathlib import Path

from sopforge.llm.providers._files import read_response, split_front_matter

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "examples" / "recordings" / "pharmacy_refills"
# The SOP-Maze (maze_*) family's recordings are counted apart: calls of a run that builds that family.
MAZE_CALLS = len(list(RECORDINGS.glob("*__maze_*.response.md")))
# Every LLM call of the example run of the sop_tools family (and the shared context), re-asks
# included (<key>__a2 answers the second ask): the recordings are its answers.
# (The recorded agent's evaluation, *__eval_*, is no call of a generation.)
RECORDED_CALLS = len(list(RECORDINGS.glob("*.response.md"))) - MAZE_CALLS - len(list(RECORDINGS.glob("*__eval_*.response.md")))
# The chain up to the reference stage, in the stages it asks: the independent answerer's first
# dataset batch was asked again once.
CHAIN_STAGES = ["context", "schema", "sop", "api_graph", "dataset", "dataset", "dataset", "tools", "tools", "tools",
                "reference"]
CHAIN_CALLS = len(CHAIN_STAGES)
THEME = ("Retail pharmacy prescription refill requests: deciding whether a patient's refill can be "
         "dispensed, must be referred to the prescriber, or must be denied")


def recorded_answer(stage: str, item: str = "main", attempt: int = 1) -> str:
    """The recorded answer to ``attempt`` of this call (its first answer when it was not asked again)."""
    path = RECORDINGS / f"pharmacy_refills__{stage}__{item}__a{attempt}.response.md"
    if not path.exists():
        path = path.with_name(f"pharmacy_refills__{stage}__{item}__a1.response.md")
    return read_response(path)[1]


# The hardening stages ask many prompts per stage (one per variant type, task, manipulation);
# their markers come first because their prompts quote earlier artifacts.
HARDENING_MARKERS = (
    ("<entails>", "manipulations/entail"),
    ("<manipulated_instruction>", "manipulations/rewrite"),
    ("<followed>", "manipulations/dialogue"),
    ("<verdict>", "manipulations/judge"),
    ("<edits>", "manipulations/variant"),
    ("<What_to_do>", "manipulations/instructions"),
    ("<distractor_toolspecs>", "distractors/tools"),
    ("<distractor_fields>", "distractors/fields"),
)


# PROBE prompts (prompts/probe/*.j2) ask per persona, sample and document: answered by prompt.
PROBE_MARKERS = ("<personas>", "<persona>", "<world_model>", "You are judging whether an AI agent correctly identified",
                 "You are an expert evaluator of the parameters", "You are an adversary auditing")
# SOP-Maze prompts (prompts/sop_maze): they quote the business context, so they are tested first.
MAZE_MARKERS = (
    ("<extraction>", "maze/reader"),        # maze_instances' reader and maze_baselines' first-turn reader
    ("<instance_plan>", "maze/dialogue"),
    ("design one WIDE scenario", "maze_lrs"),
    ("design one DEEP scenario", "maze_hrs"),
)


def stage_of(prompt: str) -> str:
    """Which stage's template produced ``prompt`` (later prompts quote earlier artifacts, so the
    most specific marker is tested first)."""
    if any(marker in prompt for marker in PROBE_MARKERS):
        return "probe/any"
    for marker, stage in MAZE_MARKERS + HARDENING_MARKERS:
        if marker in prompt:
            return stage
    if "<procedure_plan>" in prompt:
        return "reference"
    if "Write the complete module inside <code>" in prompt:
        return "tools/code"
    if "<sop_tool_analysis>" in prompt:
        return "tools/toolspecs"
    if "<sop_breakdown>" in prompt:
        return "tools/api_docs"
    if "<existing_rows>" in prompt:
        return "dataset"
    if "<api_dependency_graph>" in prompt:
        return "api_graph"
    if "<sample_schema>" in prompt:
        return "sop"
    if "<Existing_fields>" in prompt:
        return "schema"
    if "<business_theme>" in prompt:
        return "context"
    raise AssertionError(f"cannot tell the stage of prompt: {prompt[:200]!r}")


@functools.cache
def _recorded_by_prompt() -> dict[tuple[str, int], str]:
    """(first user message, attempt) of every recorded request -> its recorded answer."""
    answers = {}
    for request in RECORDINGS.glob("*.request.md"):
        response = request.with_name(request.name.replace(".request.md", ".response.md"))
        if response.exists():
            _, body = split_front_matter(request.read_text(encoding="utf-8"))
            first = body.split("## user\n", 1)[-1].split("\n## assistant\n", 1)[0].strip()
            answers[(first, body.count("\n## user\n"))] = read_response(response)[1]
    return answers


def recorded_for_prompt(body: dict) -> str:
    """The recorded answer to this conversation's prompt and attempt (hardening stages ask one
    prompt per item, so the stage alone does not say which answer).

    A test that edits an upstream artifact (a reviewer's SOP edit) changes a few lines of every
    later prompt; the recording whose prompt shares the most lines answers then.
    """
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[0]["content"]
    first = (content if isinstance(content, str) else "".join(part.get("text", "") for part in content)).strip()
    recorded = _recorded_by_prompt()
    if (first, len(users)) in recorded:
        return recorded[(first, len(users))]
    lines = set(first.splitlines())
    candidates = [(len(lines & set(prompt.splitlines())) / len(lines | set(prompt.splitlines())), prompt)
                  for prompt, attempt in recorded if attempt == len(users)]
    score, closest = max(candidates, default=(0.0, ""))
    if score < 0.9:
        raise AssertionError(f"no recorded answer for this prompt (re-record the example): {first[:200]!r}")
    return recorded[(closest, len(users))]


def prompt_text(body: dict, protocol: str) -> str:
    return "\n".join(m["content"] if isinstance(m["content"], str) else str(m["content"]) for m in body["messages"])


def by_stage(overrides: dict[str, str] | None = None):
    """FakeLLMServer responder answering each stage with its recorded answer (or an override)."""
    overrides = overrides or {}

    def respond(body: dict, protocol: str) -> str:
        prompt = prompt_text(body, protocol)
        stage = stage_of(prompt)
        attempt = sum(m["role"] == "user" for m in body["messages"])  # a re-ask adds the reason as a user turn
        if stage in overrides:
            return overrides[stage]
        if stage == "dataset":
            batch = "batch1" if "None yet: this is the first batch" in prompt else "batch2"
            return recorded_answer(stage, batch, attempt)
        if stage.startswith("tools/"):
            return recorded_answer("tools", stage.split("/")[1], attempt)
        if "/" in stage or stage.startswith("maze_"):  # several items per stage: answered by their prompt
            return recorded_for_prompt(body)
        return recorded_answer(stage, attempt=attempt)

    return respond
