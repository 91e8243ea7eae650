"""An in-process fake provider for tests and demos: no files, no network.

Give it a list of answers (consumed in order) or a function of the request. A list item may
also be an exception instance, which is raised instead of answering: that is how tests make
the gateway see a rate limit or an outage without an HTTP server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from sopforge.errors import UserError
from sopforge.llm.providers._files import estimate_tokens, prompt_text
from sopforge.llm.types import LLMRequest, LLMResponse

NAME = "scripted"

# An answer is text, or a whole LLMResponse (e.g. one carrying tool calls); provider, model and
# token counts are filled in when the response leaves them at their defaults.
Answer = str | LLMResponse
Script = Sequence[Answer | BaseException] | Callable[[LLMRequest], Answer]


class ScriptExhausted(UserError):
    """The scripted provider was asked more often than it had answers for (a test bug)."""


class ScriptedProvider:
    """Answers from a script and remembers every request it saw.

    Args:
        responses: answers in order (strings, or exceptions to raise), or a callable
            ``request -> text`` that answers any number of requests.
        name: provider name reported in responses and cache keys.
        rate_limited: whether the gateway should apply its client-side rate limit
            (off by default so tests and demos do not wait).

    Attributes:
        requests: every request passed to ``send``, in order (including ones that raised).
    """

    applies_temperature = False

    def __init__(self, responses: Script, *, name: str = NAME, rate_limited: bool = False):
        self.name = name
        self.rate_limited = rate_limited
        self.requests: list[LLMRequest] = []
        self._lock = threading.Lock()
        if callable(responses):
            self._responder: Callable[[LLMRequest], Answer] | None = responses
            self._script: list[Answer | BaseException] = []
        else:
            self._responder = None
            self._script = list(responses)
        self._scripted_total = len(self._script)

    def __repr__(self) -> str:
        return f"ScriptedProvider(name={self.name!r}, remaining={self.remaining})"

    @property
    def remaining(self) -> int | None:
        """Answers left in a list script (None for a callable script)."""
        with self._lock:
            return None if self._responder else len(self._script)

    def send(self, request: LLMRequest) -> LLMResponse:
        """Record the request and return (or raise) the next scripted item.

        Raises:
            ScriptExhausted: a list script has no answers left.
            BaseException: whatever exception the script holds at this position.
        """
        with self._lock:
            self.requests.append(request)
            if self._responder is None:
                if not self._script:
                    raise ScriptExhausted(
                        f"scripted provider has no response left for call {len(self.requests)} "
                        f"(call key {request.call_key}); it was given {self._scripted_total}"
                    )
                item = self._script.pop(0)
            else:
                item = None
        if isinstance(item, BaseException):
            raise item
        # The callable runs outside the lock so a slow responder does not serialise threads.
        text = item if item is not None else self._responder(request)  # type: ignore[misc]
        if isinstance(text, LLMResponse):
            return text.model_copy(update={
                "provider": self.name, "model": request.model,
                "input_tokens": text.input_tokens or estimate_tokens(prompt_text(request)),
                "output_tokens": text.output_tokens or estimate_tokens(text.text)})
        return LLMResponse(
            text=text,
            provider=self.name,
            model=request.model,
            input_tokens=estimate_tokens(prompt_text(request)),
            output_tokens=estimate_tokens(text),
        )
