"""Sandbox for LLM-written tool code: a static AST policy plus an isolated child process.

``check_code`` rejects unsafe source before anything runs; ``run_in_sandbox`` runs a module
from a benchmark folder in a separate, resource-limited interpreter inside a bubblewrap
container (see ``boundary``), with an audit hook, and returns per-call outcomes as a
``SandboxResult``. Where the container cannot be created, ``SandboxUnavailable`` is raised
and nothing runs.
"""

from sopforge.sandbox.models import (
    CallError, CallOutcome, SandboxLimits, SandboxResult, ToolCallRecord,
)
from sopforge.sandbox.policy import DEFAULT_ALLOWED, PUBLISHED_ALLOWED, check_code, imported_modules
from sopforge.sandbox.boundary import SandboxUnavailable
from sopforge.sandbox.runner import run_in_sandbox

__all__ = [
    "DEFAULT_ALLOWED", "PUBLISHED_ALLOWED", "CallError", "CallOutcome", "SandboxLimits", "SandboxResult", "ToolCallRecord",
    "SandboxUnavailable", "check_code", "imported_modules", "run_in_sandbox",
]
