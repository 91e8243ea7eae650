"""The form a paused flow run shows in the Prefect UI, and the one headless reviews submit.

Prefect generates the UI's Resume form from this model's JSON schema: the field names become
the labels (Decision, Feedback, Edited Artifact, Reviewer) and the descriptions say when each
one applies.
"""

from __future__ import annotations

from typing import Literal

from prefect.input import RunInput
from pydantic import Field

Decision = Literal["approve", "reject", "edit", "waive"]


class ReviewDecision(RunInput):
    """A reviewer's decision on the artifact a gate paused for."""

    decision: Decision = Field(
        "approve", description="approve: continue with this artifact. reject: regenerate the stage with your feedback. "
                    "edit: use your corrected artifact below. waive: overrule failed checks that are wrong for this "
                    "domain (name them in Waive, give the reason in Feedback); they are recorded and exported.")
    feedback: str = Field(
        "", description="What is wrong and what to change; added to the stage's prompt when it is regenerated.")
    edited_artifact: str = Field(
        "", description="The corrected artifact: JSON or YAML of its content (the SOP may be plain text). "
                    "It is re-validated with the stage's checks before it is used.")
    waive: str = Field("", description="For waive: the failed checks to overrule, comma-separated (empty: every "
                                       "failed check of this artifact).")
    reviewer: str = Field("", description="Your name or handle, stored with the decision.")
