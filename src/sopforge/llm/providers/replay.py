"""Replay provider: serves recorded responses so examples and tests run offline.

Recordings are exchange folders (see ``sopforge.llm.providers._files``): a call is matched by
its call key, and the request file's ``prompt_sha256`` must equal the current prompt's hash so
a changed template can never silently reuse an answer to a different question.
"""

from __future__ import annotations

from pathlib import Path

from sopforge.errors import UserError
from sopforge.llm.providers._files import (
    estimate_tokens,
    parse_tool_calls,
    prompt_text,
    read_response,
    recorded_prompt_hash,
    request_path,
    response_path,
)
from sopforge.llm.types import LLMRequest, LLMResponse

NAME = "replay"
MODEL = "recorded"


class ReplayProvider:
    """Answers from a folder of recorded request/response pairs.

    Args:
        folder: the recordings folder (an exchange folder from an earlier run).
    """

    name = NAME
    rate_limited = False
    applies_temperature = False

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def __repr__(self) -> str:
        return f"ReplayProvider(folder={str(self.folder)!r})"

    def send(self, request: LLMRequest) -> LLMResponse:
        """Return the recorded answer for ``request.call_key``.

        Raises:
            UserError: no recording for the call key, or the recording's prompt hash differs
                from the current prompt (the recording is stale).
        """
        resp_file = response_path(self.folder, request.call_key)
        req_file = request_path(self.folder, request.call_key)
        if not resp_file.exists():
            raise UserError(
                f"no recorded response for call key {request.call_key} in {self.folder}: "
                f"record it with --provider exchange"
            )
        recorded = recorded_prompt_hash(req_file)
        if recorded is None:
            raise UserError(
                f"recording for {request.call_key} cannot be checked: {req_file.name} is missing or has no "
                f"prompt_sha256; re-record it with --provider exchange"
            )
        if recorded != request.prompt_hash():
            raise UserError(
                f"recording is stale: the prompt for {request.call_key} changed; re-record it "
                f"(delete {resp_file.name} and run with --provider exchange)"
            )
        _, text = read_response(resp_file)
        answer, calls = parse_tool_calls(text, request.call_key) if request.tools is not None else (text, [])
        return LLMResponse(
            text=answer,
            provider=NAME,
            model=MODEL,
            input_tokens=estimate_tokens(prompt_text(request)),
            output_tokens=estimate_tokens(text),
            tool_calls=calls,
        )
