"""How a reviewer's edit of a sop_tools artifact is read and re-checked (``sopforge review edit``).

Each editable stage re-runs the checks it applies to model output, against the parents the
reviewed version was built from. Computed artifacts (dataset rows, ground truth, hardening
sets, the package) are not editable: a reviewer rejects them with feedback instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sopforge.checks import CheckResult, blocking_failures
from sopforge.families.protocol import EditSpec
from sopforge.families.sop_tools.models.sop import SOPDocument
from sopforge.families.sop_tools.models.tools import ToolsArtifact
from sopforge.families.sop_tools.verify.api_graph_checks import check_graph
from sopforge.families.sop_tools.verify.schema_checks import check_schema
from sopforge.families.sop_tools.verify.sop_checks import check_sop
from sopforge.families.sop_tools.verify.tool_checks import (
    check_api_docs, check_code_static, check_rows_against_specs, check_toolspecs,
)
from sopforge.families.sop_tools.verify.tool_runtime import TOOL_CHECK_LIMITS, check_runtime
from sopforge.settings import Settings

__all__ = ["API_GRAPH_EDIT", "SCHEMA_EDIT", "SOP_EDIT", "TOOLS_EDIT"]


def _check_tools(tools: ToolsArtifact, up: dict[str, BaseModel], settings: Settings) -> list[CheckResult]:
    graph, schema = up["api_graph"], up["schema"]
    dataset = up["dataset"].keyed_by(schema)  # as the tools stage reads it (a stored id_field may be null)
    checks = (check_api_docs(tools.api_docs, graph, schema) + check_toolspecs(tools.toolspecs, graph, schema)
              + check_rows_against_specs(dataset, tools.toolspecs, schema) + check_code_static(tools.code, tools.toolspecs))
    if blocking_failures(checks):
        return checks  # never run code the policy (or a broken spec) refuses
    return checks + check_runtime(tools.code, tools.toolspecs, graph, schema, dataset, limits=TOOL_CHECK_LIMITS)


def _sop_from_text(text: str, original: dict[str, Any]) -> SOPDocument:
    """The SOP may be pasted as its plain text: structure (sections, steps, thresholds) comes from it."""
    return SOPDocument.parse(f"<SOP>\n{text.strip()}\n</SOP>", title=original.get("title", ""))


SCHEMA_EDIT = EditSpec(check=lambda artifact, up, settings: check_schema(artifact))
SOP_EDIT = EditSpec(check=lambda artifact, up, settings: check_sop(artifact, up["schema"]),
                    text_of=lambda content: content.get("text", ""), parse_text=_sop_from_text)
API_GRAPH_EDIT = EditSpec(check=lambda artifact, up, settings: check_graph(artifact, up["schema"], up["sop"]))
TOOLS_EDIT = EditSpec(check=_check_tools)
