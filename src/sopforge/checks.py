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
    def blocking(self) -> bool:
        return not self.passed and self.severity == "error"


def check(name: str, passed: bool, message: str, *, severity: Literal["error", "warning"] = "error",
          **details: Any) -> CheckResult:
    """Build a CheckResult; ``message`` should describe the failure (it is kept on success too)."""
    return CheckResult(name=name, passed=passed, severity=severity, message=message, details=details)


def blocking_failures(checks: list[CheckResult]) -> list[CheckResult]:
    return [c for c in checks if c.blocking]
