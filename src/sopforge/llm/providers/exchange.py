"""File-exchange provider: a human (or another tool) answers prompts through a folder.

For air-gapped or manual runs, and for recording example responses: each prompt is written
to ``<stem>.request.md`` and the run stops with ``ResponsePending`` until someone writes
``<stem>.response.md`` next to it; re-running then picks the answer up. An answer whose prompt has
changed since (``rerun --from`` with feedback, an edited template) is set aside as
``<stem>.superseded-<n>.md`` and the new prompt is asked, so a rerun never stops on old answers. The folder format is
described in ``sopforge.llm.providers._files``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sopforge.errors import ResponsePending
from sopforge.llm.providers._files import (
    RESPONSE_SUFFIX,
    atomic_write,
    estimate_tokens,
    parse_tool_calls,
    prompt_text,
    read_response,
    recorded_prompt_hash,
    render_request,
    request_path,
    response_path,
)
from sopforge.llm.types import LLMRequest, LLMResponse

NAME = "exchange"


class ExchangeProvider:
    """Serves answers written by hand into ``folder``.

    Args:
        folder: where request and response files live (created on first write).
        wait_seconds: how long ``send`` polls for a missing response before raising
            ``ResponsePending`` (0 = write the request and stop at once).
        poll_interval: seconds between checks while waiting.
    """

    name = NAME
    rate_limited = False  # no remote quota to protect
    applies_temperature = False  # recorded for the human's information only

    def __init__(self, folder: Path, wait_seconds: float = 0, poll_interval: float = 0.5, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.folder = Path(folder)
        self.wait_seconds = wait_seconds
        self.poll_interval = poll_interval
        self._sleep = sleep
        self._clock = clock

    def __repr__(self) -> str:
        return f"ExchangeProvider(folder={str(self.folder)!r}, wait_seconds={self.wait_seconds})"

    def send(self, request: LLMRequest) -> LLMResponse:
        """Return the written answer, or write the request and wait for one.

        Args:
            request: the call; its ``call_key`` names the files.

        Returns:
            The response file's text (front matter stripped).

        Raises:
            ResponsePending: no response file appeared within ``wait_seconds``.
        """
        req_file = request_path(self.folder, request.call_key)
        resp_file = response_path(self.folder, request.call_key)
        superseded = None
        if resp_file.exists():
            if recorded_prompt_hash(req_file) in (None, request.prompt_hash()):
                return self._answer(request, req_file, resp_file)
            # The prompt changed (a rerun with feedback, a stage sampled afresh, an edited template): the
            # answer belongs to the old prompt. It is kept beside it, and the new prompt is asked.
            superseded = self._set_aside(resp_file, "superseded")
        if recorded_prompt_hash(req_file) != request.prompt_hash():
            # Rewrite only when the prompt differs, so ``written_at`` tells the human when
            # this prompt was first asked rather than when the run was last retried.
            atomic_write(req_file, render_request(request))
        deadline = self._clock() + self.wait_seconds
        while self._clock() < deadline:
            self._sleep(min(self.poll_interval, max(0.0, deadline - self._clock())))
            if resp_file.exists():
                return self._answer(request, req_file, resp_file)
        earlier = f"; the answer to its earlier prompt is kept as {superseded.name}" if superseded else ""
        raise ResponsePending(
            f"waiting for a response to {request.call_key}: write {resp_file} "
            f"(the prompt is in {req_file.name}) and run again{earlier}",
            request_path=str(req_file),
        )

    def retire(self, call_keys: list[str]) -> int:
        """Set aside the answers of calls whose stage failed its checks (``<stem>.rejected-<n>.md``), so the
        next run asks those prompts afresh instead of failing again on the same answers.

        Returns:
            How many answer files were set aside.
        """
        moved = 0
        for key in dict.fromkeys(call_keys):
            answer = response_path(self.folder, key)
            if answer.exists():
                self._set_aside(answer, "rejected")
                moved += 1
        return moved

    def _set_aside(self, answer: Path, why: str) -> Path:
        """Rename an answer to ``<stem>.<why>-<n>.md`` (the first free n): kept, never served again."""
        stem = answer.name[: -len(RESPONSE_SUFFIX)]
        n = 1
        while (self.folder / f"{stem}.{why}-{n}.md").exists():
            n += 1
        kept = self.folder / f"{stem}.{why}-{n}.md"
        answer.rename(kept)
        return kept

    def _answer(self, request: LLMRequest, req_file: Path, resp_file: Path) -> LLMResponse:
        if recorded_prompt_hash(req_file) is None:
            # The answer was written without asking first (e.g. pre-seeded by hand): keep the
            # pair complete so the folder can later be replayed and checked.
            atomic_write(req_file, render_request(request))
        meta, text = read_response(resp_file)
        answer, calls = parse_tool_calls(text, request.call_key) if request.tools is not None else (text, [])
        return LLMResponse(
            text=answer,
            provider=NAME,
            model=str(meta.get("model") or request.model),
            input_tokens=estimate_tokens(prompt_text(request)),
            output_tokens=estimate_tokens(text),
            tool_calls=calls,
        )
