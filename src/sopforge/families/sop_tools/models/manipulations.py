"""What the ``manipulations`` stage produces: verified SOP variants and a TOD-ProcBench compliance set.

Agents are given a variant SOP; the ground truth of every task still comes from the base SOP's
reference procedure (TELLER S10: only Stage-2 agents see the abstracted SOP). Compliance items
come in balanced pairs: every violating response has a compliant twin with the same dialogue
prefix and policy (TOD-ProcBench S7).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sopforge.families.sop_tools.models.compliance import ComplianceItem, Dialogue, InstructionDocument
from sopforge.funnel import DroppedItem, FunnelRow
from sopforge.families.sop_tools.models.sop_variants import SOPVariant

__all__ = ["ManipulationSet"]


class ManipulationSet(BaseModel):
    """Every kept variant, the instruction document, the dialogues and the compliance pairs."""

    seed: int = Field(description="Seed of the dialogue sampling and the manipulation operators.")
    variants: list[SOPVariant] = Field(default_factory=list, description="Kept SOP variants, one per type at most.")
    instructions: InstructionDocument | None = Field(
        None, description="The f1 instruction document with its f2/f3 forms (None when no dialogues were asked).")
    dialogues: list[Dialogue] = Field(default_factory=list, description="Kept dialogues, one per sampled task.")
    compliance: list[ComplianceItem] = Field(default_factory=list,
                                             description="Balanced compliant/violating items, twins adjacent.")
    funnel: list[FunnelRow] = Field(default_factory=list, description="Counts per component and type.")
    drops: list[DroppedItem] = Field(default_factory=list, description="Why each dropped item was dropped.")
