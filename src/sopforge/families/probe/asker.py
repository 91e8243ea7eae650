"""What every PROBE stage and judge shares: one asker per stage run that keeps every raw answer and result.

PROBE stages ask many times (per persona, per bottleneck, per document). Each ask is its own
``ask_until_valid`` conversation with the call key ``<slug>/<stage>/<item>``; the asker collects
the raw text of every attempt, the checks and the attempt count, and builds the stage's
``StageResult`` at the end. Its template identity is a hash over the stage's templates (the
executor's cache key already holds each template's hash).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from sopforge.ask import StageResult, ask_keeping_answers
from sopforge.checks import CheckResult
from sopforge.llm.types import LLMClient, sha256_json
from sopforge.prompts import PromptRegistry, RenderedPrompt, default_registry
from sopforge.settings import Settings

__all__ = ["Asker", "numbered", "with_retry_reasons"]

T = TypeVar("T", bound=BaseModel)


def numbered(items: list[str]) -> str:
    """``1. first\\n2. second`` (the bottleneck lists of T1, T14-T17), or 'none' when empty."""
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1)) or "none"


RETRY_LEAD = "A previous version of this answer was refused by verification; avoid the same problem:"


def with_retry_reasons(rendered: RenderedPrompt, reasons: str | None) -> RenderedPrompt:
    """The prompt of a new generation cycle: the reasons the last cycle was refused, as a final paragraph."""
    if not reasons:
        return rendered
    text = f"{rendered.text.rstrip()}\n\n{RETRY_LEAD} {reasons.strip()}\n"
    return rendered.model_copy(update={"text": text, "prompt_hash": hashlib.sha256(text.encode("utf-8")).hexdigest()})


class Asker:
    """Asks one stage's prompts and remembers everything the stage result must carry."""

    def __init__(self, stage: str, slug: str, template_ids: tuple[str, ...], *, llm: LLMClient, settings: Settings,
                 model: str, temperature: float, feedback: str | None = None,
                 registry: PromptRegistry | None = None):
        self.stage, self.slug, self.template_ids = stage, slug, template_ids
        self.llm, self.settings, self.model, self.temperature, self.feedback = llm, settings, model, temperature, feedback
        self.registry = registry or default_registry(settings)
        self.raw_texts: list[str] = []
        self.checks: list[CheckResult] = []
        self.attempts = 0
        self.last_raw = ""

    def ask(self, item: str, template_id: str, params: dict[str, str],
            parse_and_check: Callable[[str], tuple[T, list[CheckResult]]], *, keep_checks: bool = True,
            retry_reasons: str | None = None) -> T:
        """Render ``template_id`` and ask until the answer parses and passes its blocking checks.

        Args:
            item: The call key's item part (``p1``, ``p1-b2-tp1-c1``...): unique within the stage.
            template_id: One of the stage's templates.
            params: The template's parameters (already rendered text).
            parse_and_check: Raw answer -> (artifact, checks); raises ParseError when unreadable.
            keep_checks: Whether the answer's checks join the stage's (judges' checks are summarised instead).
            retry_reasons: Why the previous generation cycle of this item was refused (a check's or a
                judge's reasons), appended to the prompt.

        Raises:
            ValidationFailed: no attempt was accepted; carries every raw answer of the stage so far.
        """
        rendered = with_retry_reasons(self.registry.render(template_id, **params), retry_reasons)
        result = ask_keeping_answers(
            self.raw_texts, self.llm, rendered, step=item, parse_and_check=parse_and_check, stage=self.stage,
            call_key_prefix=f"{self.slug}/{self.stage}/{item}", settings=self.settings, model=self.model,
            temperature=self.temperature, feedback=self.feedback)
        self.attempts += result.attempts
        self.last_raw = result.raw_texts[-1]
        if keep_checks:
            self.checks += result.checks
        return result.artifact

    def child(self) -> "Asker":
        """An asker for one item of a ``fan_out``: same stage, model and templates, its own answers.

        Items of a fan_out may run at once, so each keeps its raw answers apart and the stage merges
        them back in item order (:meth:`absorb`): the stored answers never depend on completion order.
        """
        return Asker(self.stage, self.slug, self.template_ids, llm=self.llm, settings=self.settings, model=self.model,
                     temperature=self.temperature, feedback=self.feedback, registry=self.registry)

    def absorb(self, child: "Asker") -> None:
        """Take over a child's answers, checks and attempts (call in item order)."""
        self.raw_texts += child.raw_texts
        self.checks += child.checks
        self.attempts += child.attempts

    def result(self, artifact: T, extra_checks: list[CheckResult] | None = None) -> StageResult[T]:
        hashes = {tid: self.registry.get(tid).sha256 for tid in self.template_ids}
        return StageResult[Any](
            artifact=artifact, checks=self.checks + list(extra_checks or []), template_id=self.template_ids[0],
            template_hash=sha256_json(hashes), prompt_hash=sha256_json(hashes), model=self.model,
            attempts=self.attempts, raw_texts=self.raw_texts)
