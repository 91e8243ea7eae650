"""Keep the ``runs`` row in step with the flow run that executes it."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from sopforge.errors import NeedsReview, SopforgeError
from sopforge.settings import load_settings
from sopforge.store import Store
from sopforge.store.owner import Heartbeat


def current_flow_run_id() -> str | None:
    try:
        from prefect.runtime import flow_run

        return str(flow_run.id) if flow_run.id else None
    except Exception:  # outside a flow run there is simply no id to record
        return None


def stop_signal(err: BaseException) -> str | None:
    """``SIGINT`` or ``SIGTERM`` when ``err`` is how this process learnt it must stop, else None.

    Ctrl-C raises ``KeyboardInterrupt``; inside a flow run Prefect turns SIGTERM into its
    ``TerminationSignal`` (``sopforge generate`` raises :class:`Terminated` outside one).
    """
    if isinstance(err, Terminated) or err.__class__.__name__ == "TerminationSignal":
        return "SIGTERM"
    return "SIGINT" if isinstance(err, KeyboardInterrupt) else None


class Terminated(BaseException):
    """SIGTERM outside a flow run (``sopforge generate``'s handler raises it, as Ctrl-C raises KeyboardInterrupt)."""


def interruption(run_id: str, signal_name: str) -> str:
    """The stored error of a run stopped by a signal: what happened and the command that resumes it."""
    return f"interrupted by {signal_name}: resume it with `sopforge rerun {run_id}`"


@contextmanager
def run_lifecycle(run_id: str, home: str | None) -> Iterator[None]:
    """Mark the run running and owned by this process (with a heartbeat while it runs), then
    succeeded, needs_review (a gate stopped it), interrupted (SIGINT, SIGTERM) or failed, with the
    one-line reason. A process killed before it can record the end leaves an owner that readers
    find gone: ``interrupted`` too."""
    store = Store(load_settings(home=home).db_path)
    store.verify()  # a flow run started from a work pool checks the file as `sopforge generate` does
    store.claim_run(run_id, flow_run_id=current_flow_run_id())
    try:
        with Heartbeat(lambda: store.heartbeat(run_id)):
            yield
    except NeedsReview as stop:
        store.set_run_status(run_id, "needs_review", error=str(stop))
        raise
    except BaseException as err:
        signal_name = stop_signal(err)
        if signal_name is not None:  # stopped, not failed: nothing went wrong with the run itself
            store.record_interruption(run_id, interruption(run_id, signal_name))
            raise
        line = str(err) if isinstance(err, SopforgeError) else f"{err.__class__.__name__}: {err}"
        store.set_run_status(run_id, "failed", error=line)
        raise
    store.set_run_status(run_id, "succeeded")
