"""The ask-parse-check loop every LLM stage shares.

A stage renders its prompt, asks the model, parses and checks the answer, and on failure
asks again in the same conversation with the errors quoted, up to ``settings.max_attempts``
times (DESIGN, "LLM gateway": a malformed response is re-asked with the error included).
The raw text of every attempt is kept, on success and on failure, because a reviewer
debugging a bad run needs to see what the model actually said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, ValidationError

from sopforge.errors import ValidationFailed
from sopforge.llm.output_limits import cut_off, max_tokens_for
from sopforge.llm.types import LLMClient, LLMRequest, Message
from sopforge.parsing import ParseError, describe_validation_error, one_line
from sopforge.prompts import RenderedPrompt
from sopforge.checks import CheckResult, apply_waivers, as_report, blocking_failures
from sopforge.settings import Settings

__all__ = ["Mapper", "StageResult", "ask_keeping_answers", "ask_until_valid", "complete_whole", "failed_with_answers",
           "fan_out", "reask_message", "sequential_map", "using_mapper", "with_feedback"]

T = TypeVar("T", bound=BaseModel)
Item = TypeVar("Item")
R = TypeVar("R")

FEEDBACK_LEAD = "Reviewer feedback on the previous version, address it:"
REASK_LEAD = "Your answer could not be accepted:"
REASK_TAIL = "Reply again with the complete answer in the same format."
CONTINUE_MESSAGE = ("Your answer was cut off at the output limit. Continue exactly where it stopped, with the very "
                    "next characters: do not repeat anything already written and do not start over.")
#: Continuations of one answer cut off at the output limit (each a call of its own).
MAX_CONTINUATIONS = 4


# --- independent calls inside a stage ------------------------------------------------------------
#
# A stage is pure (no Prefect), yet its independent asks (one per SOP variant type, dialogue,
# compliance operator...) should run at the same time. So the stage only says *what* is
# independent, with ``fan_out(fn, items)``; *how* it runs is the orchestration's choice, installed
# for the duration of ``run()`` with ``using_mapper``: the flow submits each item as a Prefect task
# run (sopforge.orchestration.concurrency), a unit test gets the plain sequential map below.
# Results always come back in item order, so what a stage builds from them does not depend on
# which call finished first.

Mapper = Callable[[Callable[[Any], Any], Sequence[Any], str], list[Any]]
"""``mapper(fn, items, label) -> [fn(item) for item in items]``, in item order, possibly concurrently;
``label`` names the items (Prefect task run names). It raises the first failure in item order."""


def sequential_map(fn: Callable[[Any], Any], items: Sequence[Any], label: str = "item") -> list[Any]:
    """The default mapper: one item after another (unit tests, scripts, the replay of a single call)."""
    return [fn(item) for item in items]


_MAPPER: ContextVar[Mapper] = ContextVar("sopforge_mapper", default=sequential_map)


@contextmanager
def using_mapper(mapper: Mapper) -> Iterator[None]:
    """Run the stage code inside the block with ``mapper`` behind :func:`fan_out`."""
    token = _MAPPER.set(mapper)
    try:
        yield
    finally:
        _MAPPER.reset(token)


def fan_out(fn: Callable[[Item], R], items: Iterable[Item], label: str = "item") -> list[R]:
    """``[fn(item) for item in items]``, with the items running concurrently where the orchestration
    allows it.

    ``fn`` must not depend on another item's result, and must keep its side effects to itself
    (return what it produced: raw answers, funnel entries) so the caller can merge them in item
    order. The results are in item order whatever the completion order.

    Args:
        fn: Work on one item (usually one or more LLM asks and their checks).
        items: The independent items.
        label: What an item is (``"variant"``, ``"dialogue"``): names the Prefect task runs.

    Raises:
        The first exception in item order (a concurrent mapper lets the items already running finish).
    """
    return _MAPPER.get()(fn, list(items), label)


class StageResult(BaseModel, Generic[T]):
    """An accepted artifact with the provenance the store records alongside it."""

    artifact: T = Field(description="The parsed artifact that passed every blocking check.")
    checks: list[CheckResult] = Field(description="Results of the accepted attempt, warnings included.")
    template_id: str = Field(description="Prompt template id, e.g. 'teller/context'.")
    template_hash: str = Field(description="sha256 of the template source.")
    prompt_hash: str = Field(description="sha256 of the rendered prompt (before re-asks and feedback).")
    model: str = Field(description="Model the request named.")
    attempts: int = Field(description="Attempts used, 1 when the first answer was accepted.")
    raw_texts: list[str] = Field(description="Raw model answer of every attempt, in order; the last was accepted.")


def with_feedback(text: str, feedback: str | None) -> str:
    """Append a reviewer's feedback to a rendered prompt as a final paragraph.

    Args:
        text: The rendered prompt.
        feedback: Free text from a human reviewer, or None.

    Returns:
        The prompt unchanged when there is no (non-blank) feedback.
    """
    if feedback is None or not feedback.strip():
        return text
    return f"{text.rstrip()}\n\n{FEEDBACK_LEAD} {feedback.strip()}"


def reask_message(errors: list[str]) -> str:
    """The user turn that quotes why the previous answer was refused.

    Args:
        errors: One line per problem.

    Returns:
        The message text.
    """
    listed = "\n".join(f"- {e}" for e in errors)
    return f"{REASK_LEAD}\n{listed}\n{REASK_TAIL}"


def ask_until_valid(
    llm: LLMClient,
    rendered: RenderedPrompt,
    *,
    parse_and_check: Callable[[str], tuple[T, list[CheckResult]]],
    stage: str,
    call_key_prefix: str,
    settings: Settings,
    model: str,
    temperature: float,
    feedback: str | None = None,
) -> StageResult[T]:
    """Ask the model until its answer parses and passes every blocking check.

    Args:
        llm: Any LLMClient (normally the Gateway).
        rendered: The rendered stage prompt; sent as the first user message.
        parse_and_check: Turns raw text into (artifact, checks); raises ParseError or a
            pydantic ValidationError when the text cannot be read.
        stage: Stage name recorded on each request, e.g. ``"sop"``.
        call_key_prefix: ``"<theme_slug>/<stage>/<item>"``; attempt n uses ``"<prefix>/a<n>"``.
        settings: Supplies ``max_attempts`` and the ``max_tokens`` cap (the budget is the stage's, see
            ``sopforge.llm.output_limits``).
        model: Model name sent with the request.
        temperature: Sampling temperature.
        feedback: Reviewer feedback to address, appended to the prompt.

    Returns:
        The accepted artifact with its checks, template identity and every raw answer.

    Raises:
        ValidationFailed: No attempt was accepted; ``report`` lists the last attempt's
            failures and ``raw_texts`` holds every answer.
        ProviderError, ResponsePending: Raised by ``llm`` and passed through unchanged.
    """
    messages = [Message(role="user", content=with_feedback(rendered.text, feedback), cache_prefix=rendered.cache_prefix)]
    raw_texts: list[str] = []
    report: list[dict[str, Any]] = []
    for attempt in range(1, settings.max_attempts + 1):
        request = LLMRequest(
            messages=list(messages), model=model, temperature=temperature,
            max_tokens=max_tokens_for(stage, model, settings.max_tokens),
            call_key=f"{call_key_prefix}/a{attempt}", stage=stage, attempt=attempt,
            template_id=rendered.template_id, template_hash=rendered.template_hash,
        )
        raw = complete_whole(llm, request)
        raw_texts.append(raw)
        try:
            artifact, checks = parse_and_check(raw)
        except ParseError as exc:
            report = [{"name": f"{stage}.parse", "message": str(exc), "severity": "error", "details": {}}]
        except ValidationError as exc:
            # Models that validate in parse_and_check should wrap this as ParseError; a raw
            # ValidationError is still the answer's fault, so it is re-asked, not raised.
            report = [{"name": f"{stage}.model", "message": describe_validation_error(exc, stage),
                       "severity": "error", "details": {}}]
        else:
            checks = apply_waivers(checks, settings.waivers)
            report = as_report(blocking_failures(checks))
            if not report:
                return StageResult[Any](
                    artifact=artifact, checks=checks, template_id=rendered.template_id,
                    template_hash=rendered.template_hash, prompt_hash=rendered.prompt_hash,
                    model=model, attempts=attempt, raw_texts=raw_texts,
                )
        if attempt < settings.max_attempts:
            messages += [Message(role="assistant", content=raw),
                         Message(role="user", content=reask_message([f"{r['name']}: {r['message']}" for r in report]))]
    raise _validation_failed(stage, report, raw_texts)


def complete_whole(llm: LLMClient, request: LLMRequest) -> str:
    """The whole answer to ``request``: an answer cut off at the output limit is continued, in the same
    conversation, up to MAX_CONTINUATIONS times, and the parts are joined (call keys ``…/a1/c2``, ``…/c3``).

    An answer still cut off after the last continuation is returned as it is: parsing it fails, and the
    re-ask says so.
    """
    response = llm.complete(request)
    parts = [response.text]
    for number in range(2, MAX_CONTINUATIONS + 2):
        if not cut_off(response):
            break
        so_far = "".join(parts)
        follow = request.model_copy(update={
            "messages": [*request.messages, Message(role="assistant", content=so_far),
                         Message(role="user", content=CONTINUE_MESSAGE)],
            "call_key": f"{request.call_key}/c{number}"})
        response = llm.complete(follow)
        parts.append(response.text)
    return "".join(parts)


def ask_keeping_answers(raw_texts: list[str], llm: LLMClient, rendered: RenderedPrompt, *, step: str | None = None,
                        **kwargs: Any) -> StageResult:
    """:func:`ask_until_valid` for stages that ask several times: every raw answer, accepted or
    not, is appended to ``raw_texts``, so the stage can keep all of them whatever happens next.

    Args:
        raw_texts: The stage's list of raw answers so far (extended in place).
        llm, rendered: As for :func:`ask_until_valid`.
        step: When given, a failure is re-raised as ``"<stage>: <step> step: …"`` carrying all of
            ``raw_texts``; otherwise the ValidationFailed passes through unchanged.
        **kwargs: The keyword arguments of :func:`ask_until_valid` (``stage`` included).
    """
    try:
        result = ask_until_valid(llm, rendered, **kwargs)
    except ValidationFailed as exc:
        raw_texts.extend(getattr(exc, "raw_texts", []))
        if step is None:
            raise
        stage = kwargs["stage"]
        raise failed_with_answers(f"{stage}: {step} step: {str(exc).removeprefix(stage + ': ')}", exc.report,
                                  raw_texts) from exc
    raw_texts.extend(result.raw_texts)
    return result


def failed_with_answers(message: str, report: list[dict[str, Any]], raw_texts: list[str]) -> ValidationFailed:
    """A ValidationFailed that carries every raw answer so far (multi-ask stages re-raise with it)."""
    err = ValidationFailed(message, report=report)
    # errors.py is a fixed interface; the raw answers ride along as an attribute so callers
    # (store, CLI) can keep them even when the stage produced no artifact.
    err.raw_texts = list(raw_texts)  # type: ignore[attr-defined]
    return err


def _validation_failed(stage: str, report: list[dict[str, Any]], raw_texts: list[str]) -> ValidationFailed:
    names = ", ".join(r["name"] for r in report)
    noun = "check" if len(report) == 1 else "checks"
    reasons = "; ".join(one_line(r["message"], 300) for r in report)
    attempts = len(raw_texts)
    return failed_with_answers(
        f"{stage}: {noun} {names} failed after {attempts} attempt{'s' if attempts != 1 else ''}: {reasons}",
        report, raw_texts)
