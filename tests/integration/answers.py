"""Answer LLM requests by stage with the recorded example responses (consistent with each other)."""

from __future__ import annotations

from pathlib import Path

RECORDINGS = Path(__file__).resolve().parents[2] / "examples" / "recordings" / "pharmacy_refills"
THEME = ("Retail pharmacy prescription refill requests: deciding whether a patient's refill can be "
         "dispensed, must be referred to the prescriber, or must be denied")


def recorded_answer(stage: str, item: str = "main") -> str:
    text = (RECORDINGS / f"pharmacy_refills__{stage}__{item}__a1.response.md").read_text()
    if text.startswith("---\n"):
        text = text.split("\n---\n", 1)[1]
    return text


def stage_of(prompt: str) -> str:
    """Which stage's template produced ``prompt`` (later prompts quote earlier artifacts, so the
    most specific marker is tested first)."""
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


def prompt_text(body: dict, protocol: str) -> str:
    return "\n".join(m["content"] if isinstance(m["content"], str) else str(m["content"]) for m in body["messages"])


def by_stage(overrides: dict[str, str] | None = None):
    """FakeLLMServer responder answering each stage with its recorded answer (or an override)."""
    overrides = overrides or {}

    def respond(body: dict, protocol: str) -> str:
        prompt = prompt_text(body, protocol)
        stage = stage_of(prompt)
        if stage in overrides:
            return overrides[stage]
        if stage == "dataset":
            return recorded_answer(stage, "batch1" if "None yet: this is the first batch" in prompt else "batch2")
        if stage.startswith("tools/"):
            return recorded_answer("tools", stage.split("/")[1])
        return recorded_answer(stage)

    return respond
