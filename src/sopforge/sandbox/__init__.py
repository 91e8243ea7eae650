"""Sandbox for LLM-written tool code: a static AST policy plus an isolated child process.

``check_code`` rejects unsafe source before anything runs; ``run_in_sandbox`` runs a module
from a benchmark folder in a separate, resource-limited interpreter (audit hook, rlimits,
network namespace when available) and returns per-call outcomes as a ``SandboxResult``.
"""

from sopforge.sandbox.models import (
    CallError, CallOutcome, SandboxLimits, SandboxResult, ToolCallRecord,
)
from sopforge.sandbox.policy import DEFAULT_ALLOWED, check_code, imported_modules
from sopforge.sandbox.runner import network_namespace_prefix, run_in_sandbox

__all__ = [
    "DEFAULT_ALLOWED", "CallError", "CallOutcome", "SandboxLimits", "SandboxResult", "ToolCallRecord",
    "check_code", "imported_modules", "network_namespace_prefix", "run_in_sandbox",
]
