"""The audit report: every check that ran, every check that could not run, and why.

Findings are :class:`~sopforge.checks.CheckResult` objects, so an audit can be stored
in the ``validations`` table like any other gate. A check that could not run (its input was
unusable, or running the code would be unsafe) is a :class:`SkippedCheck`, never a pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sopforge.checks import CheckResult

__all__ = ["AuditReport", "SkippedCheck"]

_MAX_LINE = 400


class SkippedCheck(BaseModel):
    """A check (or group, e.g. ``runtime``) that did not run."""

    name: str = Field(description="Check id or group prefix, e.g. 'runtime' or 'labels.reference_procedure'.")
    reason: str = Field(description="Why it did not run, phrased so the user can act on it.")


class AuditReport(BaseModel):
    """Result of auditing one SOP-Bench folder (``research/sopbench_format.md`` §9)."""

    folder: str = Field(description="The audited folder, as given.")
    checks: list[CheckResult] = Field(default_factory=list, description="Every check that ran, passed or not.")
    skipped: list[SkippedCheck] = Field(default_factory=list, description="Checks that could not run.")
    stats: dict[str, Any] = Field(default_factory=dict,
                                  description="Counts of the folder (tasks, tools, SOP tokens, labels), when readable.")
    timings: dict[str, float] = Field(default_factory=dict, description="Seconds spent per audit phase.")
    strict: bool = Field(False, description="Warnings count as failures (``--strict``).")

    @property
    def errors(self) -> list[CheckResult]:
        """Failed checks of severity error."""
        return [c for c in self.checks if not c.passed and c.severity == "error"]

    @property
    def warnings(self) -> list[CheckResult]:
        """Failed checks of severity warning."""
        return [c for c in self.checks if not c.passed and c.severity == "warning"]

    @property
    def ok(self) -> bool:
        """No errors (and, in strict mode, no warnings either)."""
        return not self.errors and not (self.strict and self.warnings)

    def failed(self, *, promote: frozenset[str] | set[str] = frozenset()) -> list[CheckResult]:
        """Errors plus the warnings whose name is in ``promote`` (or every warning when strict)."""
        return [c for c in self.checks if not c.passed and (
            c.severity == "error" or self.strict or c.name in promote)]

    def get(self, name: str) -> CheckResult | None:
        """The check called ``name``, if it ran."""
        return next((c for c in self.checks if c.name == name), None)

    def failed_names(self) -> set[str]:
        """Names of every failed check (errors and warnings)."""
        return {c.name for c in self.checks if not c.passed}

    def ordered(self) -> list[CheckResult]:
        """Errors first, then warnings, then passes (in the order they ran)."""
        return sorted(self.checks, key=lambda c: (c.passed, not c.passed and c.severity != "error"))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, checks failures first, with a summary block."""
        data = self.model_dump(mode="json")
        data["checks"] = [c.model_dump(mode="json") for c in self.ordered()]
        data["summary"] = {"ok": self.ok, "errors": len(self.errors), "warnings": len(self.warnings),
                           "passed": sum(c.passed for c in self.checks), "skipped": len(self.skipped)}
        return data

    def to_text(self, *, show_passed: bool = True) -> str:
        """Plain-text rendering: one line per check, failures first, then skips and the summary."""
        lines = [f"audit of {self.folder}"]
        for c in self.ordered():
            if c.passed and not show_passed:
                continue
            status = "ok  " if c.passed else ("FAIL" if c.severity == "error" else "warn")
            message = " ".join(c.message.split())
            if len(message) > _MAX_LINE:
                message = message[: _MAX_LINE - 3] + "..."
            lines.append(f"{status} {c.name}: {message}")
        for s in self.skipped:
            lines.append(f"skip {s.name}: {s.reason}")
        verdict = "PASSED" if self.ok else "FAILED"
        lines.append(f"{verdict}: {len(self.errors)} error(s), {len(self.warnings)} warning(s), "
                     f"{sum(c.passed for c in self.checks)} passed, {len(self.skipped)} skipped")
        return "\n".join(lines)

    def write_json(self, path: Path) -> None:
        """Write :meth:`to_json` to ``path``."""
        path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
