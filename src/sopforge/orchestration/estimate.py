"""What a run is likely to cost, before anything is paid (``--max-cost`` and the progress line).

For each LLM stage of the plan: the calls it makes on first try (``StageSpec.expected_calls``,
from the theme: rows, variant types, dialogues...), times the tokens of one call. Those come from
this home's own history when it has any (the mean prompt and answer of the stage's earlier calls:
the best predictor of the same templates on similar inputs), else from the stage's templates: their
text plus what each parent artifact typically adds to a prompt, and a typical answer. Priced with
the stage's model (batch price with ``batch: true``). Re-asks, retries and dropped items that are
regenerated cost more: the hard cap (``sopforge.llm.budget``) is what protects the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sopforge.llm.factory import default_model
from sopforge.llm.limits import estimate_cost, match_price
from sopforge.prompts import PromptRegistry
from sopforge.settings import Settings
from sopforge.store import Store
from sopforge.theme import ThemeSpec

__all__ = ["RunEstimate", "StageEstimate", "estimate_run"]

# Without history: what one parent artifact adds to a prompt, and a typical answer, in tokens
# (the example domain's prompts quote 1-3k tokens per artifact; its answers run 0.5-4k tokens).
PARENT_TOKENS = 1500
ANSWER_TOKENS = 2000
BILLED = ("anthropic", "openai")


@dataclass
class StageEstimate:
    stage: str
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float
    priced: bool = True
    from_history: bool = False


@dataclass
class RunEstimate:
    stages: list[StageEstimate] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.stages)

    @property
    def usd(self) -> float:
        return sum(s.usd for s in self.stages)

    @property
    def billed(self) -> bool:
        return any(s.priced for s in self.stages)

    def line(self, max_cost: float | None) -> str:
        """One line for the terminal."""
        tokens_in = sum(s.input_tokens for s in self.stages)
        tokens_out = sum(s.output_tokens for s in self.stages)
        text = (f"estimate: about ${self.usd:.2f} for {self.calls} LLM calls (~{tokens_in:,} tokens in, "
                f"~{tokens_out:,} out; re-asks and retries cost more)")
        if max_cost is not None:
            verdict = "within" if self.usd <= max_cost else "OVER: the run will likely stop at"
            text += f"; {verdict} --max-cost ${max_cost:.2f}"
        return text


def estimate_run(spec: ThemeSpec, settings: Settings, registry: PromptRegistry, store: Store | None = None) -> RunEstimate:
    """The expected calls, tokens and cost of every LLM stage of ``spec``."""
    history = store.call_history() if store is not None else {}
    estimate = RunEstimate()
    for stage in spec.plan().stages:
        if not stage.uses_llm:
            continue
        calls = stage.expected_calls(spec) if stage.expected_calls else len(stage.template_ids)
        past = history.get(stage.name)
        if past:
            tokens_in, tokens_out = past
        else:
            template = max((len(registry.get(t).source) // 4 for t in stage.template_ids), default=0)
            tokens_in, tokens_out = template + PARENT_TOKENS * len(stage.parents), ANSWER_TOKENS
        cfg = spec.for_stage(stage.name)
        model = cfg.model or default_model(cfg.provider)
        billed = cfg.provider in BILLED
        usd = calls * estimate_cost(model, tokens_in, tokens_out, settings.prices, batch=spec.batch) if billed else 0.0
        estimate.stages.append(StageEstimate(stage.name, calls, calls * tokens_in, calls * tokens_out, usd,
                                             priced=billed and match_price(model, settings.prices) is not None,
                                             from_history=bool(past)))
    return estimate
