"""How long an answer may be: per-model output limits, per-stage budgets, and answers cut off.

Every request once asked for 8192 tokens, while an ordinary domain's API graph, toolspecs and
``tools.py`` answers run 25–40k characters (issue 19): a real model would have been cut off
mid-answer and the parse error re-asked, forever. Now

* each stage asks for a completion budget sized from the answers measured for it
  (``benchmarks/answer_sizes.py`` prints the measured sizes beside these budgets), never more than
  the model's own output limit (the providers' published maxima below; ``SOPFORGE_MAX_TOKENS``
  caps every call when set);
* an answer the provider cut off at that budget (Anthropic ``stop_reason: max_tokens``, OpenAI
  ``finish_reason: length``) is not parsed as it is: :func:`sopforge.ask.ask_until_valid` asks the
  model to continue where it stopped and joins the parts, so a long answer is split into as many
  calls as it needs instead of failing.
"""

from __future__ import annotations

from sopforge.llm.types import LLMResponse

__all__ = ["DEFAULT_STAGE_TOKENS", "MODEL_OUTPUT_LIMITS", "STAGE_TOKENS", "cut_off", "max_tokens_for",
           "model_output_limit"]

#: Longest completion each model family returns, in tokens, as the providers publish them (2025–26).
#: Matched by prefix, longest first; a model not listed is limited only by the stage budget.
MODEL_OUTPUT_LIMITS: dict[str, int] = {
    "claude-opus-4-5": 64_000, "claude-opus-4-1": 32_000, "claude-opus-4": 32_000,
    "claude-sonnet-4": 64_000, "claude-haiku-4": 64_000, "claude-3-7-sonnet": 64_000,
    "claude-3-5-sonnet": 8_192, "claude-3-5-haiku": 8_192, "claude-3": 4_096,
    "gpt-5": 128_000, "gpt-4.1": 32_768, "gpt-4o": 16_384, "gpt-4-turbo": 4_096,
    "o1": 100_000, "o3": 100_000, "o4": 100_000,
}

#: Completion budget per stage, in tokens: about twice the longest answer measured for the stage
#: (benchmarks/answer_sizes.py), so an ordinary answer fits in one call and a long one continues.
#: Measured on the independent answerers' recordings (2026-11): tools 14.4k tokens, api_graph 10.9k,
#: sop 9.7k, maze_lrs 9.4k, maze_hrs 5.6k, dataset batch 5.3k, reference 4.9k, context 4.4k; every other
#: stage under 2k.
STAGE_TOKENS: dict[str, int] = {
    "context": 12_288, "schema": 8_192, "sop": 20_480, "api_graph": 24_576, "dataset": 16_384,
    "tools": 32_768, "reference": 16_384, "distractors": 16_384, "manipulations": 12_288,
    "maze_lrs": 20_480, "maze_hrs": 20_480,
}
DEFAULT_STAGE_TOKENS = 8_192


def model_output_limit(model: str | None) -> int | None:
    """The model's published output limit in tokens, or None when the model is not listed."""
    if not model:
        return None
    name = model.lower().rsplit("/", 1)[-1]
    for prefix in sorted(MODEL_OUTPUT_LIMITS, key=len, reverse=True):
        if name.startswith(prefix):
            return MODEL_OUTPUT_LIMITS[prefix]
    return None


def max_tokens_for(stage: str, model: str | None, cap: int | None = None) -> int:
    """The completion budget of one call of ``stage`` to ``model``.

    Args:
        stage: The stage name (unlisted stages get DEFAULT_STAGE_TOKENS).
        model: The model asked; its published output limit bounds the budget.
        cap: ``SOPFORGE_MAX_TOKENS`` when set: an upper bound for every call.
    """
    budget = STAGE_TOKENS.get(stage, DEFAULT_STAGE_TOKENS)
    for bound in (model_output_limit(model), cap):
        if bound:
            budget = min(budget, bound)
    return budget


def cut_off(response: LLMResponse) -> bool:
    """Whether the provider stopped the answer at the completion budget (so it is unfinished)."""
    raw = response.raw if isinstance(response.raw, dict) else {}
    if raw.get("stop_reason") == "max_tokens":
        return True
    choices = raw.get("choices")
    return bool(isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and choices[0].get("finish_reason") == "length")
