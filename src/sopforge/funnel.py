"""The funnel of a hardening stage: how many items were generated, verified, retried, dropped, kept.

Every distractor and manipulation is verified before it is kept (issue 5). The funnel makes the
cost of that visible per component and type, the way TOD-ProcBench reports its pipeline
(6953 partials, 2288 generated, 307 re-manipulated, 1982 verified): a researcher can see that,
say, 2 of 7 SOP variants were dropped by the judge, and why (``drops``).

Counting rules (one item = one distractor tool, field, SOP variant, dialogue or compliance pair):
- ``generated``: distinct items the model proposed (an item re-generated after a failed check
  is still one item);
- ``retried``: items that needed at least one more generation cycle;
- ``verified``: items that passed every check, in whichever cycle;
- ``dropped``: items not kept, each with a reason in ``drops``;
- ``kept``: items in the final artifact (exported).
So ``kept <= verified <= generated`` and ``generated == kept + dropped``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

__all__ = ["COUNTS", "FunnelRow", "DroppedItem", "Funnel", "funnel_table"]

COUNTS = ("generated", "verified", "retried", "dropped", "kept")


class FunnelRow(BaseModel):
    """Counts of one (component, type), e.g. ('sop_variant', 'implicit_decision_points')."""

    component: str = Field(description="distractor_tool, distractor_field, sop_variant, instruction_document, "
                                       "dialogue or compliance_pair.")
    item_type: str = Field(description="Type within the component, e.g. 'off_domain' or 'parameter_mismatch'.")
    generated: int = Field(0, ge=0, description="Distinct items proposed by the model.")
    verified: int = Field(0, ge=0, description="Items that passed every check.")
    retried: int = Field(0, ge=0, description="Items that needed at least one more generation cycle.")
    dropped: int = Field(0, ge=0, description="Items not kept (reasons in the artifact's drops).")
    kept: int = Field(0, ge=0, description="Items in the final artifact.")

    @model_validator(mode="after")
    def _consistent(self) -> "FunnelRow":
        if not (self.kept <= self.verified <= self.generated and self.generated == self.kept + self.dropped
                and self.retried <= self.generated):
            raise ValueError(f"inconsistent funnel counts for {self.component}/{self.item_type}: "
                             + ", ".join(f"{c}={getattr(self, c)}" for c in COUNTS))
        return self


class DroppedItem(BaseModel):
    """Why one generated item was not kept."""

    component: str = Field(description="Component of the item (as in FunnelRow).")
    item_type: str = Field(description="Type of the item (as in FunnelRow).")
    item: str = Field(description="What was dropped: a tool or field name, a variant type, a pair id.")
    reason: str = Field(description="One line: the check that failed, or why the item could not be built.")


class Funnel:
    """Accumulates counts while a stage verifies its items; ``rows()`` gives the table.

    Call :meth:`item` once per distinct generated item with its final fate.
    """

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], dict[str, int]] = {}
        self.drops: list[DroppedItem] = []

    def item(self, component: str, item_type: str, name: str, *, verified: bool, kept: bool,
             retried: bool = False, reason: str = "") -> None:
        """Record one generated item.

        Args:
            component, item_type: Where it is counted.
            name: The item's name (tool, field, variant type, pair id) for the drop list.
            verified: Whether it passed every check.
            kept: Whether it is in the final artifact (implies ``verified``).
            retried: Whether it needed more than one generation cycle.
            reason: Why it was dropped (required when not kept).
        """
        if kept and not verified:
            raise ValueError(f"{component}/{name}: an item that failed verification cannot be kept")
        counts = self._rows.setdefault((component, item_type), dict.fromkeys(COUNTS, 0))
        counts["generated"] += 1
        counts["verified"] += int(verified)
        counts["retried"] += int(retried)
        counts["kept"] += int(kept)
        counts["dropped"] += int(not kept)
        if not kept:
            self.drops.append(DroppedItem(component=component, item_type=item_type, item=name,
                                          reason=reason or "not kept"))

    def extend(self, other: "Funnel") -> None:
        """Add ``other``'s items after this funnel's (items verified concurrently, merged in item order)."""
        for key, counts in other._rows.items():
            mine = self._rows.setdefault(key, dict.fromkeys(COUNTS, 0))
            for name, n in counts.items():
                mine[name] += n
        self.drops += other.drops

    def rows(self) -> list[FunnelRow]:
        """One row per (component, type), in the order first recorded."""
        return [FunnelRow(component=c, item_type=t, **counts) for (c, t), counts in self._rows.items()]


def funnel_table(rows: list[FunnelRow]) -> str:
    """The funnel as an aligned text table (CLI summary, ``sopforge show``, review pages)."""
    header = ("component", "type", *COUNTS)
    body = [(r.component, r.item_type, *(str(getattr(r, c)) for c in COUNTS)) for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
             for line in [header, *body]]
    return "\n".join(lines)
