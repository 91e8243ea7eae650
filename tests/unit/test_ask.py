"""The shared ask → parse → check → re-ask loop, driven by the scripted provider through the Gateway."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sopforge.errors import ProviderError, ValidationFailed
from sopforge.parsing import ParseError, extract_tag
from sopforge.prompts import RenderedPrompt
from sopforge.checks import CheckResult, check
from sopforge.ask import StageResult, ask_until_valid

PROMPT = RenderedPrompt(text="Say a number inside <n></n>.", template_id="test/number",
                        template_hash="t" * 64, prompt_hash="p" * 64)


class Number(BaseModel):
    value: int


def parse_and_check(raw: str) -> tuple[Number, list[CheckResult]]:
    """<n>…</n> must hold an int; odd numbers are refused; numbers above 100 only warn."""
    n = Number.model_validate({"value": extract_tag(raw, "n")})
    return n, [
        check("num.even", n.value % 2 == 0, f"{n.value} is odd; give an even number"),
        check("num.small", n.value <= 100, f"{n.value} is large", severity="warning"),
    ]


def ask(llm, settings, **kw):
    return ask_until_valid(llm, PROMPT, parse_and_check=parse_and_check, stage="num",
                           call_key_prefix="demo/num/main", settings=settings, model="fake-1",
                           temperature=0.3, **kw)


def test_first_good_answer_is_accepted(scripted, settings):
    llm, provider = scripted(["<n>4</n>"])
    result = ask(llm, settings)
    assert isinstance(result, StageResult)
    assert result.artifact == Number(value=4)
    assert (result.attempts, result.raw_texts, result.model) == (1, ["<n>4</n>"], "fake-1")
    assert (result.template_id, result.template_hash, result.prompt_hash) == ("test/number", "t" * 64, "p" * 64)
    [request] = provider.requests
    assert request.call_key == "demo/num/main/a1" and request.attempt == 1 and request.stage == "num"
    assert (request.model, request.temperature, request.max_tokens) == ("fake-1", 0.3, 8192)  # the default stage budget
    assert (request.template_id, request.template_hash) == ("test/number", "t" * 64)
    assert [m.model_dump() for m in request.messages] == [{"role": "user", "content": PROMPT.text}]


def test_parse_error_is_re_asked_with_the_error_quoted(scripted, settings):
    llm, provider = scripted(["I think 4.", "<n>4</n>"])
    result = ask(llm, settings)
    assert result.attempts == 2
    assert result.raw_texts == ["I think 4.", "<n>4</n>"]
    second = provider.requests[1]
    assert second.call_key == "demo/num/main/a2" and second.attempt == 2
    roles = [m.role for m in second.messages]
    assert roles == ["user", "assistant", "user"]
    assert second.messages[1].content == "I think 4."
    assert second.messages[2].content == (
        "Your answer could not be accepted:\n"
        "- num.parse: missing <n>…</n> block\n"
        "Reply again with the complete answer in the same format.")


def test_blocking_check_is_re_asked_and_warnings_do_not_block(scripted, settings):
    llm, provider = scripted(["<n>3</n>", "<n>400</n>"])
    result = ask(llm, settings)
    assert result.artifact.value == 400 and result.attempts == 2
    assert "- num.even: 3 is odd; give an even number" in provider.requests[1].messages[2].content
    warning = next(c for c in result.checks if c.name == "num.small")
    assert not warning.passed and warning.severity == "warning"


def test_pydantic_validation_error_is_re_asked(scripted, settings):
    llm, provider = scripted(["<n>four</n>", "<n>4</n>"])
    assert ask(llm, settings).attempts == 2
    reask = provider.requests[1].messages[2].content
    assert "- num.model: num: value: Input should be a valid integer" in reask


def test_re_asks_accumulate_the_conversation(scripted, settings):
    llm, provider = scripted(["<n>1</n>", "<n>3</n>", "<n>2</n>"])
    assert ask(llm, settings).attempts == 3
    third = provider.requests[2]
    assert [m.role for m in third.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert [third.messages[1].content, third.messages[3].content] == ["<n>1</n>", "<n>3</n>"]


def test_always_bad_raises_validation_failed_with_report_and_raw_texts(scripted, settings):
    llm, provider = scripted(["<n>1</n>", "<n>3</n>", "<n>5</n>"])
    with pytest.raises(ValidationFailed) as exc:
        ask(llm, settings)
    err = exc.value
    assert str(err) == "num: check num.even failed after 3 attempts: 5 is odd; give an even number"
    assert err.report == [{"name": "num.even", "message": "5 is odd; give an even number",
                           "severity": "error", "details": {}}]
    assert err.raw_texts == ["<n>1</n>", "<n>3</n>", "<n>5</n>"]
    assert len(provider.requests) == settings.max_attempts == 3


def test_last_attempt_parse_error_is_reported(scripted, settings):
    llm, _ = scripted(["<n>1</n>", "<n>3</n>", "nothing"])
    with pytest.raises(ValidationFailed, match=r"num: check num\.parse failed after 3 attempts: missing <n>"):
        ask(llm, settings)


def test_max_attempts_one_means_no_re_ask(scripted, settings):
    settings.max_attempts = 1
    llm, provider = scripted(["<n>1</n>"])
    with pytest.raises(ValidationFailed, match="after 1 attempt:") as exc:
        ask(llm, settings)
    assert len(provider.requests) == 1 and exc.value.raw_texts == ["<n>1</n>"]


def test_feedback_is_the_final_paragraph_of_the_prompt(scripted, settings):
    llm, provider = scripted(["<n>2</n>"])
    ask(llm, settings, feedback="  Use a number above ten.  ")
    content = provider.requests[0].messages[0].content
    assert content.startswith(PROMPT.text)
    assert content.endswith("\n\nReviewer feedback on the previous version, address it: Use a number above ten.")


def test_blank_feedback_is_ignored(scripted, settings):
    llm, provider = scripted(["<n>2</n>"])
    ask(llm, settings, feedback="   ")
    assert provider.requests[0].messages[0].content == PROMPT.text


def test_provider_errors_pass_through_unchanged(scripted, settings):
    llm, _ = scripted([ProviderError("bad request", retryable=False, status=400)])
    with pytest.raises(ProviderError, match="bad request"):
        ask(llm, settings)


def test_parse_error_from_parse_and_check_is_not_swallowed_as_success(scripted, settings):
    def always_fails(raw: str):
        raise ParseError("nope")

    llm, _ = scripted(["a", "b", "c"])
    with pytest.raises(ValidationFailed) as exc:
        ask_until_valid(llm, PROMPT, parse_and_check=always_fails, stage="x", call_key_prefix="d/x/main",
                        settings=settings, model="m", temperature=0.0)
    assert exc.value.report[0]["name"] == "x.parse"
