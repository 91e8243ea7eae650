"""Re-validate an artifact a reviewer edited, with the checks its stage applies to model output.

A reviewer pastes the corrected artifact as JSON or YAML of its content (what
``sopforge show RUN --stage S --json`` prints under ``content``); the SOP may also be pasted
as plain text, since its structure (sections, steps, thresholds) is derived from the text.
Stages whose artifact is computed rather than written (dataset rows, ground truth, the
package) cannot be edited: reject them with feedback instead.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from sopforge.checks import CheckResult, blocking_failures
from sopforge.errors import UserError
from sopforge.families import StageSpec, stage as stage_spec
from sopforge.parsing import describe_validation_error, yaml_error_where
from sopforge.settings import Settings


@dataclass
class CheckedEdit:
    """An edit that passed every blocking check of its stage."""

    content: dict[str, Any]
    checks: list[CheckResult]
    diff: str


def review_text(stage: str, content: dict[str, Any]) -> str:
    """The text a reviewer edits and a diff compares: the stage's text form (the SOP's text), else indented JSON."""
    edit = stage_spec(stage).edit
    if edit is not None and edit.text_of is not None:
        return edit.text_of(content)
    return json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False)


def unified_diff(stage: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    lines = difflib.unified_diff(review_text(stage, before).splitlines(), review_text(stage, after).splitlines(),
                                 fromfile=f"{stage} (generated)", tofile=f"{stage} (edited)", lineterm="")
    return "\n".join(lines)


def _parse(spec: StageSpec, text: str, original: dict[str, Any]) -> BaseModel:
    stage, edit = spec.name, spec.edit
    if edit is not None and edit.parse_text is not None:
        try:  # the artifact as JSON of its content, or just its text form
            data = json.loads(text)
            text = data["text"] if isinstance(data, dict) and "text" in data else text
        except ValueError:
            pass
        return edit.parse_text(text, original)
    try:
        data = yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as err:
        raise UserError(f"edited {stage} is not valid JSON or YAML{yaml_error_where(err)}: paste the whole artifact "
                        f"as `sopforge show RUN --stage {stage} --json` prints its content") from None
    if not isinstance(data, dict):
        raise UserError(f"edited {stage} must be a JSON/YAML mapping of the artifact's fields, not {type(data).__name__}")
    try:
        return spec.model.model_validate(data)
    except ValidationError as err:
        raise UserError(f"edited {stage} does not fit the artifact's shape: "
                        f"{describe_validation_error(err, spec.model.__name__)}") from None


def check_edit(stage: str, text: str, original: dict[str, Any], parents: dict[str, dict[str, Any]],
               settings: Settings) -> CheckedEdit:
    """Parse and check an edited artifact against the parents the original was built from.

    Args:
        stage: The gated stage.
        text: What the reviewer pasted.
        original: Content of the version under review.
        parents: Content of that version's parent artifacts, by stage.
        settings: Sandbox and path settings (the tools checks run code in the sandbox).

    Returns:
        The edited content, its checks (warnings included) and the diff from the original.

    Raises:
        UserError: One line naming why the edit is refused (not editable, unparsable, empty,
            unchanged, or a blocking check failed).
    """
    spec = stage_spec(stage)
    if spec.edit is None:
        raise UserError(f"the {stage} artifact is computed, not written, so it cannot be edited: "
                        f"reject it with feedback, or edit an upstream stage")
    if not text.strip():
        raise UserError(f"the edited {stage} is empty: paste the corrected artifact (or choose approve/reject)")
    artifact = _parse(spec, text, original)
    up = {name: stage_spec(name).model.model_validate(content) for name, content in parents.items()}
    checks = spec.edit.check(artifact, up, settings)
    failures = blocking_failures(checks)
    if failures:
        listed = "; ".join(f"{c.name}: {c.message}" for c in failures[:3])
        more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
        raise UserError(f"edited {stage} fails {len(failures)} check(s): {listed}{more}")
    content = artifact.model_dump(mode="json")
    diff = unified_diff(stage, original, content)
    if not diff:
        raise UserError(f"the edited {stage} is identical to the version under review: approve it instead")
    return CheckedEdit(content=content, checks=checks, diff=diff)
