"""The form a paused flow run shows in the Prefect UI, and the one headless reviews submit.

Prefect generates the UI's Resume form from this model's JSON schema, so field titles and
descriptions are what the reviewer reads.
"""

from __future__ import annotations

from typing import Literal

from prefect.input import RunInput
from pydantic import Field

Decision = Literal["approve", "reject", "edit"]


class ReviewDecision(RunInput):
    """A reviewer's decision on the artifact a gate paused for."""

    decision: Decision = Field(
        "approve", title="Decision",
        description="approve: continue with this artifact. reject: regenerate the stage with your feedback. "
                    "edit: use your corrected artifact below.")
    feedback: str = Field(
        "", title="Feedback (reject)",
        description="What is wrong and what to change; added to the stage's prompt when it is regenerated.")
    edited_artifact: str = Field(
        "", title="Edited artifact (edit)",
        description="The corrected artifact: JSON or YAML of its content (the SOP may be plain text). "
                    "It is re-validated with the stage's checks before it is used.")
    reviewer: str = Field("", title="Reviewer", description="Your name or handle, stored with the decision.")
