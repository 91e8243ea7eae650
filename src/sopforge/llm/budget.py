"""A hard spending cap for one run (``--max-cost USD``), shared by every stage of the process.

Before a billed call is sent, the gateway reserves its worst case: the prompt's tokens at the
input price plus the whole completion budget (``max_tokens``) at the output price. If the
reservation does not fit in what is left, the call is not sent and :class:`BudgetExceeded` stops the
run; finished stages stay in the store and ``sopforge rerun`` continues from there. When the answer
arrives the reservation is replaced by the call's real cost. Reserving before sending is what makes
the cap hard even with many calls in flight at once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sopforge.errors import BudgetExceeded

__all__ = ["Budget", "budget_for"]


@dataclass
class _Reservation:
    usd: float


class Budget:
    """What a run may still spend.

    Args:
        cap_usd: the cap.
        spent_usd: what the run already spent (a resumed flow run starts from its ledger).
        run_id: named in the message that stops the run.
    """

    def __init__(self, cap_usd: float, spent_usd: float = 0.0, run_id: str | None = None):
        self.cap_usd = cap_usd
        self.spent_usd = spent_usd
        self.run_id = run_id
        self.calls = 0
        self._reserved = 0.0
        self._lock = threading.Lock()

    @property
    def committed_usd(self) -> float:
        """Spent plus reserved for calls in flight."""
        with self._lock:
            return self.spent_usd + self._reserved

    def reserve(self, worst_case_usd: float, what: str) -> _Reservation:
        """Hold ``worst_case_usd`` for one call, or stop the run.

        Raises:
            BudgetExceeded: the call could take the run past its cap.
        """
        with self._lock:
            if self.spent_usd + self._reserved + worst_case_usd > self.cap_usd:
                rerun = f"`sopforge rerun {self.run_id} --max-cost N`" if self.run_id else "a higher --max-cost"
                raise BudgetExceeded(
                    f"budget: stopped before {what} (up to ${worst_case_usd:.4f}): ${self.spent_usd:.4f} spent on "
                    f"{self.calls} call(s) of the --max-cost ${self.cap_usd:.2f} cap; finished stages are kept, "
                    f"continue with {rerun}")
            self._reserved += worst_case_usd
            return _Reservation(worst_case_usd)

    def settle(self, reservation: _Reservation, actual_usd: float) -> None:
        """Replace a reservation by what the call really cost (0 when nothing was billed)."""
        with self._lock:
            self._reserved -= reservation.usd
            self.spent_usd += actual_usd
            self.calls += 1 if actual_usd else 0


_BUDGETS: dict[str, Budget] = {}
_BUDGETS_LOCK = threading.Lock()


def budget_for(run_id: str, cap_usd: float, spent_usd: float = 0.0) -> Budget:
    """The one budget of ``run_id`` in this process (stages running at once share it)."""
    with _BUDGETS_LOCK:
        budget = _BUDGETS.get(run_id)
        if budget is None or budget.cap_usd != cap_usd:
            budget = _BUDGETS[run_id] = Budget(cap_usd, spent_usd, run_id)
        return budget
