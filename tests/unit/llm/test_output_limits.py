"""Answers longer than one call can hold (issue 19): budgets per stage and model, and cut-off answers
continued through the real SDKs (the test server cuts an answer at max_tokens, as the real APIs do)."""

from __future__ import annotations

import pytest

from sopforge.ask import CONTINUE_MESSAGE, ask_until_valid
from sopforge.checks import check
from sopforge.llm.gateway import Gateway
from sopforge.llm.output_limits import STAGE_TOKENS, max_tokens_for, model_output_limit
from sopforge.llm.testserver import reply
from sopforge.parsing import extract_tag
from sopforge.prompts import RenderedPrompt
from sopforge.settings import Settings

pytestmark = pytest.mark.timeout(60)
MODELS = {"anthropic": "claude-3-5-haiku-20241022", "openai": "gpt-4-turbo"}  # 8,192 and 4,096 tokens out


def test_budgets_follow_the_stage_and_never_pass_the_models_limit():
    assert model_output_limit("claude-sonnet-4-5-20250929") == 64_000
    assert model_output_limit("claude-opus-4-1") == 32_000 and model_output_limit("gpt-4o-mini") == 16_384
    assert model_output_limit("Qwen/Qwen3-8B") is None
    assert max_tokens_for("tools", "claude-sonnet-4-5") == STAGE_TOKENS["tools"] > 14_400  # the longest tools.py fits
    assert max_tokens_for("tools", "gpt-4o") == 16_384  # bounded by the model
    assert max_tokens_for("tools", "claude-3-5-haiku-20241022") == 8_192
    assert max_tokens_for("tools", "claude-sonnet-4-5", cap=2000) == 2000  # SOPFORGE_MAX_TOKENS
    assert max_tokens_for("probe_world", None) == 8_192


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_an_answer_cut_off_at_the_limit_is_continued_and_joined(protocol, server, http_provider, tmp_path):
    """A 40,000-character tools.py-sized answer to a model whose limit is 8,192 tokens: the server cuts it,
    the stage asks to continue, and the joined parts parse. Before, the cut answer was a parse error."""
    body = "\n".join(f"line {i:05d} " + "x" * 40 for i in range(800))  # ~41,000 characters
    answer = f"<n>{body}</n>"
    limit = max_tokens_for("tools", MODELS[protocol]) * 4
    parts = range(0, len(answer), limit)
    server.enqueue(*(reply(answer[start:]) for start in parts))  # a real model continues with the rest
    settings = Settings(home=tmp_path / "home", max_attempts=1)
    gateway = Gateway(http_provider(protocol), ledger=None, settings=settings, run_id="r")
    prompt = RenderedPrompt(text="Write the module inside <n></n>.", template_id="t/x", template_hash="t" * 64,
                            prompt_hash="p" * 64)
    result = ask_until_valid(gateway, prompt, parse_and_check=lambda raw: (extract_tag(raw, "n"), [
        check("n.whole", extract_tag(raw, "n") == body, "the module is incomplete")]), stage="tools",
        call_key_prefix="t/tools/code", settings=settings, model=MODELS[protocol], temperature=0.1)
    assert result.artifact == body and result.attempts == 1
    sent = [r.json for r in server.requests]
    assert len(sent) == len(parts) >= 2
    assert {r.get("max_tokens") or r.get("max_completion_tokens") for r in sent} == {limit // 4}
    last = sent[1]["messages"][-1]
    text = last["content"] if isinstance(last["content"], str) else last["content"][-1]["text"]
    assert text == CONTINUE_MESSAGE
