"""The file-exchange and replay providers: the offline and air-gapped paths."""

from __future__ import annotations

import threading
import time

import pytest
import yaml

from sopforge.errors import ResponsePending, UserError
from sopforge.llm import ExchangeProvider, Gateway, ReplayProvider, ScriptedProvider, ScriptExhausted

pytestmark = pytest.mark.timeout(30)

STEM = "pharmacy_refills__context__main__a1"


def front_matter(path):
    text = path.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_exchange_writes_request_then_returns_the_written_response(tmp_path, make_request):
    folder = tmp_path / "exchange"
    provider = ExchangeProvider(folder)
    request = make_request(template_id="teller/context", template_hash="abc")

    with pytest.raises(ResponsePending) as info:
        provider.send(request)

    response_file = folder / f"{STEM}.response.md"
    request_file = folder / f"{STEM}.request.md"
    assert str(response_file) in str(info.value) and "\n" not in str(info.value)
    assert info.value.request_path == str(request_file)
    meta = front_matter(request_file)
    assert meta["call_key"] == "pharmacy_refills/context/main/a1"
    assert meta["prompt_sha256"] == request.prompt_hash()
    assert {"stage", "attempt", "template_id", "template_hash", "model", "temperature", "max_tokens",
            "written_at"} <= set(meta)
    body = request_file.read_text()
    assert "## system\n\nYou write SOPs." in body and "## user\n\nName three refill steps." in body
    assert [p.name for p in folder.iterdir()] == [request_file.name]  # no temp files left behind

    response_file.write_text("---\nmodel: claude-opus-4-1\nanswered_by: alice\n---\n\n<context>done</context>\n")
    response = provider.send(request)

    assert response.text == "<context>done</context>"
    assert response.provider == "exchange" and response.model == "claude-opus-4-1"
    assert response.output_tokens == len(response.text) // 4


def test_exchange_response_without_front_matter_is_returned_whole(tmp_path, make_request):
    provider = ExchangeProvider(tmp_path)
    request = make_request()
    with pytest.raises(ResponsePending):
        provider.send(request)
    (tmp_path / f"{STEM}.response.md").write_text("plain answer\n---\nwith a rule\n")
    assert provider.send(request).text == "plain answer\n---\nwith a rule"


def test_exchange_polls_until_the_response_appears(tmp_path, make_request):
    provider = ExchangeProvider(tmp_path, wait_seconds=5, poll_interval=0.02)

    def answer_later():
        time.sleep(0.15)
        (tmp_path / f"{STEM}.response.md").write_text("written while waiting")

    writer = threading.Thread(target=answer_later)
    writer.start()
    response = provider.send(make_request())
    writer.join()
    assert response.text == "written while waiting"


def test_exchange_sets_aside_an_answer_to_a_changed_prompt_and_asks_the_new_one(tmp_path, make_request):
    provider = ExchangeProvider(tmp_path)
    with pytest.raises(ResponsePending):
        provider.send(make_request("old prompt"))
    (tmp_path / f"{STEM}.response.md").write_text("answer to the old prompt")

    with pytest.raises(ResponsePending) as info:  # a rerun with feedback asks the stage again
        provider.send(make_request("new prompt"))

    assert f"{STEM}.superseded-1.md" in str(info.value)
    assert (tmp_path / f"{STEM}.superseded-1.md").read_text() == "answer to the old prompt"
    assert not (tmp_path / f"{STEM}.response.md").exists()
    assert front_matter(tmp_path / f"{STEM}.request.md")["prompt_sha256"] == make_request("new prompt").prompt_hash()
    (tmp_path / f"{STEM}.response.md").write_text("answer to the new prompt")
    assert provider.send(make_request("new prompt")).text == "answer to the new prompt"


def test_exchange_keeps_every_superseded_answer(tmp_path, make_request):
    provider = ExchangeProvider(tmp_path)
    for n, prompt in enumerate(["first", "second", "third"]):
        with pytest.raises(ResponsePending):
            provider.send(make_request(prompt))
        (tmp_path / f"{STEM}.response.md").write_text(f"answer {n}")
    with pytest.raises(ResponsePending):
        provider.send(make_request("fourth"))
    kept = sorted(p.name for p in tmp_path.glob(f"{STEM}.superseded-*.md"))
    assert kept == [f"{STEM}.superseded-{n}.md" for n in (1, 2, 3)]
    assert [(tmp_path / name).read_text() for name in kept] == ["answer 0", "answer 1", "answer 2"]


def test_exchange_accepts_a_preseeded_response_and_completes_the_pair(tmp_path, make_request):
    (tmp_path / f"{STEM}.response.md").write_text("seeded by hand")
    request = make_request()

    assert ExchangeProvider(tmp_path).send(request).text == "seeded by hand"
    assert ReplayProvider(tmp_path).send(request).text == "seeded by hand"


def test_exchange_folder_replays_offline(tmp_path, make_request, settings, ledger):
    request = make_request()
    with pytest.raises(ResponsePending):
        ExchangeProvider(tmp_path).send(request)
    (tmp_path / f"{STEM}.response.md").write_text("recorded answer")

    gateway = Gateway(ReplayProvider(tmp_path), ledger=ledger, settings=settings)
    response = gateway.complete(request)

    assert (response.text, response.provider, response.model) == ("recorded answer", "replay", "recorded")
    assert ledger.records[0].provider == "replay"


def test_replay_missing_recording_names_the_call_key(tmp_path, make_request):
    with pytest.raises(UserError) as info:
        ReplayProvider(tmp_path).send(make_request(call_key="loans/sop/main/a2"))
    message = str(info.value)
    assert "loans/sop/main/a2" in message and str(tmp_path) in message and "--provider exchange" in message


def test_replay_stale_recording_names_the_call_key(tmp_path, make_request):
    with pytest.raises(ResponsePending):
        ExchangeProvider(tmp_path).send(make_request("the prompt we recorded"))
    (tmp_path / f"{STEM}.response.md").write_text("old answer")

    with pytest.raises(UserError) as info:
        ReplayProvider(tmp_path).send(make_request("a prompt edited since"))
    assert "recording is stale" in str(info.value) and "pharmacy_refills/context/main/a1" in str(info.value)


def test_replay_user_errors_are_not_recorded_as_calls(tmp_path, make_request, settings, ledger):
    gateway = Gateway(ReplayProvider(tmp_path), ledger=ledger, settings=settings)
    with pytest.raises(UserError):
        gateway.complete(make_request())
    assert ledger.records == []


def test_scripted_provider_records_requests_and_says_when_it_runs_out(make_request):
    provider = ScriptedProvider(["one"])
    assert provider.send(make_request("first")).text == "one"

    with pytest.raises(ScriptExhausted, match="no response left for call 2"):
        provider.send(make_request("second"))
    assert [r.messages[0].content for r in provider.requests] == ["first", "second"]


def test_scripted_provider_answers_with_a_function(make_request):
    provider = ScriptedProvider(lambda request: f"echo: {request.stage}")
    assert provider.send(make_request(call_key="t/schema/main/a1")).text == "echo: schema"
    assert provider.remaining is None


def test_answers_of_a_failed_stage_are_set_aside_so_the_next_run_asks_again(tmp_path):
    """A rerun after a stage failed its checks must not read the same refused answers again (issue 19)."""
    from sopforge.errors import ResponsePending
    from sopforge.llm.providers.exchange import ExchangeProvider
    from sopforge.llm.types import LLMRequest, Message

    provider = ExchangeProvider(tmp_path)
    request = LLMRequest(messages=[Message(role="user", content="Write rows.")], model="m", call_key="t/dataset/b1/a1",
                         stage="dataset")
    with pytest.raises(ResponsePending):
        provider.send(request)
    (tmp_path / "t__dataset__b1__a1.response.md").write_text("rows v1")
    assert provider.send(request).text == "rows v1"
    assert provider.retire(["t/dataset/b1/a1", "t/dataset/b1/a1", "never/asked/a1"]) == 1
    assert (tmp_path / "t__dataset__b1__a1.rejected-1.md").read_text() == "rows v1"
    with pytest.raises(ResponsePending):  # the prompt is pending again
        provider.send(request)
    (tmp_path / "t__dataset__b1__a1.response.md").write_text("rows v2")
    assert provider.send(request).text == "rows v2"
    provider.retire(["t/dataset/b1/a1"])
    assert (tmp_path / "t__dataset__b1__a1.rejected-2.md").exists()
