"""Audit any folder in SOP-Bench layout against the exporter spec's acceptance checklist.

``audit_folder(path)`` reads the files, checks them statically, and runs the tools (and a
reference procedure, when there is one) in the sandbox — never in this process, and never
when the code fails the sandbox's AST policy. See ``research/sopbench_format.md`` §9.
"""

from sopforge.audit.report import AuditReport, SkippedCheck
from sopforge.audit.run import audit_folder

__all__ = ["AuditReport", "SkippedCheck", "audit_folder"]
