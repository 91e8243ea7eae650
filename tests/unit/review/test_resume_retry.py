"""Resuming a paused flow run asks again while the Prefect server answers 503 (its SQLite busy)."""

from __future__ import annotations

import httpx
import pytest
from prefect.exceptions import NotPausedError, PrefectHTTPStatusError

from sopforge.review.submit import resume_when_server_answers


def http_error(status: int) -> PrefectHTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1:4200/api/flow_runs/1/resume")
    response = httpx.Response(status, request=request)
    return PrefectHTTPStatusError.from_httpx_error(httpx.HTTPStatusError(f"{status}", request=request,
                                                                         response=response))


def resumer(*outcomes: BaseException | None):
    """A resume that raises (or, for None, succeeds) with each outcome in turn; ``calls`` counts them."""
    queue = list(outcomes)

    def resume() -> None:
        resume.calls += 1
        outcome = queue.pop(0)
        if outcome is not None:
            raise outcome

    resume.calls = 0
    return resume


def test_503s_are_asked_again_until_the_server_answers():
    resume, pauses = resumer(http_error(503), http_error(503), None), []
    resume_when_server_answers(resume, rounds=3, pause=pauses.append)
    assert resume.calls == 3 and pauses == [5.0, 10.0]


def test_the_last_503_is_raised_when_the_rounds_are_spent():
    resume = resumer(http_error(503), http_error(503))
    with pytest.raises(PrefectHTTPStatusError):
        resume_when_server_answers(resume, rounds=2, pause=lambda _: None)
    assert resume.calls == 2


def test_other_errors_are_not_asked_again():
    resume = resumer(http_error(404))
    with pytest.raises(PrefectHTTPStatusError):
        resume_when_server_answers(resume, pause=lambda _: None)
    assert resume.calls == 1


def test_not_paused_is_an_error_at_first_and_done_after_a_503():
    with pytest.raises(NotPausedError):
        resume_when_server_answers(resumer(NotPausedError("not paused")), pause=lambda _: None)
    resume = resumer(http_error(503), NotPausedError("not paused"))
    resume_when_server_answers(resume, pause=lambda _: None)  # the first round's resume went through
    assert resume.calls == 2
