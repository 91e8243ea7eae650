"""The counts an audit reports for a SOP-Bench folder (SOP-Bench Table 3, from the raw files)."""

from __future__ import annotations

from typing import Any

from sopforge.audit.loader import FolderContents
from sopforge.tokens import TOKEN_METHOD, approx_token_count, label_distribution

__all__ = ["folder_stats"]


def folder_stats(contents: FolderContents) -> dict[str, Any]:
    """The same counts for a folder read by the audit (raw CSV text; no graph is stored in the layout)."""
    roles = set(contents.input_columns) | set(contents.output_columns)
    dist, share = {}, {}
    for col in contents.output_columns:
        if col in contents.header:
            dist[col], share[col] = label_distribution([r[col].strip() for r in contents.records])
    text = contents.sop_text or ""
    graph = None
    if isinstance(contents.metadata, dict) and isinstance(contents.metadata.get("stats"), dict):
        graph = contents.metadata["stats"].get("graph")
    return {
        "num_tasks": len(contents.rows), "num_tools": len(contents.specs), "sop_words": len(text.split()),
        "sop_tokens": approx_token_count(text), "token_method": TOKEN_METHOD, "graph": graph,
        "num_input_columns": len(contents.input_columns), "num_output_columns": len(contents.output_columns),
        "num_hidden_columns": len([h for h in dict.fromkeys(contents.header) if h not in roles]),
        "decision_distribution": dist, "majority_share": share,
    }
