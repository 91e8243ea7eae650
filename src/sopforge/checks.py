"""Result of one validation check, as stored in the ``validations`` table."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class CheckResult(BaseModel):
    name: str = Field(description="Stable check id, e.g. 'schema.partitions_non_empty'.")
    passed: bool = Field(description="Whether the artifact satisfies the check.")
    severity: Literal["error", "warning"] = Field("error", description="Errors block downstream stages; warnings are reported.")
    message: str = Field("", description="One line a reviewer (or the model, on re-ask) can act on.")
    details: dict[str, Any] = Field(default_factory=dict, description="Machine-readable specifics (offending names, counts).")

    @property
    def waived(self) -> str | None:
        """Why a person overruled this failed check (theme file ``waive:``, ``--waive`` or a review), or None."""
        return self.details.get("waived")

    @property
    def blocking(self) -> bool:
        return not self.passed and self.severity == "error" and self.waived is None


def check(name: str, passed: bool, message: str, *, ok: str | None = None,
          severity: Literal["error", "warning"] = "error", **details: Any) -> CheckResult:
    """Build a CheckResult whose message matches its verdict.

    Args:
        name: Stable check id.
        passed: The verdict.
        message: What is wrong and how to fix it (the re-ask quotes it to the model). It is kept on
            success too, so it must read true either way, unless ``ok`` is given.
        ok: What holds when the check passed; give it whenever ``message`` only makes sense as a
            failure, so a reviewer never reads failure text on a passing check.
        severity: ``error`` blocks downstream stages; ``warning`` is reported.
        **details: Machine-readable specifics.
    """
    text = ok if passed and ok is not None else message
    return CheckResult(name=name, passed=passed, severity=severity, message=text, details=details)


def blocking_failures(checks: list[CheckResult]) -> list[CheckResult]:
    return [c for c in checks if c.blocking]


def as_report(checks: list[CheckResult]) -> list[dict[str, Any]]:
    """Checks as the ``report`` of a ``ValidationFailed`` (what ``validations`` and ``ways_out`` read)."""
    return [{"name": c.name, "message": c.message, "severity": c.severity, "details": c.details} for c in checks]


def apply_waivers(checks: list[CheckResult], waivers: dict[str, str]) -> list[CheckResult]:
    """Mark the failed checks a person overruled: they stay failed (and say so) but no longer block.

    Args:
        checks: Results of one answer or one artifact.
        waivers: Check name → the reason given (theme file ``waive:``, ``--waive CHECK=REASON``, a review).

    Returns:
        The same checks; each failed one named in ``waivers`` carries ``details["waived"]`` with the reason.
    """
    if not waivers:
        return checks
    return [c.model_copy(update={"details": {**c.details, "waived": waivers[c.name]}})
            if not c.passed and c.name in waivers else c for c in checks]
