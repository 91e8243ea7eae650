"""Generate the committed JSON Schemas in top-level ``schemas/`` from the pydantic models.

The models are the source of truth (DESIGN, Principle 2); the files exist for users and
other tools that read artifacts without Python. ``tests/unit/test_schemas_drift.py`` fails
when a model changes and the files were not regenerated with::

    .venv/bin/python -m sopforge.schemas.jsonschema_export
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import BaseModel

from sopforge.schemas.api_graph import APIGraph
from sopforge.schemas.checks import CheckResult
from sopforge.schemas.context import BusinessContext
from sopforge.schemas.data_schema import DataSchema
from sopforge.schemas.dataset import Dataset
from sopforge.schemas.distractors import DistractorSet
from sopforge.schemas.ground_truth import GroundTruth, OracleReport
from sopforge.schemas.manipulations import ManipulationSet
from sopforge.schemas.package import PackageManifest
from sopforge.schemas.sop import SOPDocument
from sopforge.schemas.tools import ToolsArtifact
from sopforge.settings import PROJECT_ROOT

__all__ = ["ARTIFACT_MODELS", "REGENERATE_COMMAND", "render_json_schema", "write_json_schemas", "main"]

REGENERATE_COMMAND = ".venv/bin/python -m sopforge.schemas.jsonschema_export"

# File stem -> model. Later artifact families add themselves here so one command covers all.
ARTIFACT_MODELS: dict[str, type[BaseModel]] = {
    "business_context": BusinessContext,
    "data_schema": DataSchema,
    "sop_document": SOPDocument,
    "check_result": CheckResult,
    "api_graph": APIGraph,
    "dataset": Dataset,
    "ground_truth": GroundTruth,
    "oracle_report": OracleReport,
    "tools": ToolsArtifact,
    "distractors": DistractorSet,
    "manipulations": ManipulationSet,
    "package": PackageManifest,
}


def render_json_schema(model: type[BaseModel]) -> str:
    """Return the model's JSON Schema as stable text (sorted keys, two-space indent, final newline).

    Args:
        model: A pydantic model class.

    Returns:
        The serialised schema; identical models always give identical text.
    """
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_json_schemas(out_dir: Path) -> list[Path]:
    """Write ``<stem>.schema.json`` for every model in :data:`ARTIFACT_MODELS`.

    Args:
        out_dir: Target folder, created if missing (normally the project's ``schemas/``).

    Returns:
        The written paths, in :data:`ARTIFACT_MODELS` order.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, model in ARTIFACT_MODELS.items():
        path = out_dir / f"{stem}.schema.json"
        path.write_text(render_json_schema(model), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: regenerate the schema files (default: ``<project>/schemas``)."""
    parser = argparse.ArgumentParser(prog="python -m sopforge.schemas.jsonschema_export",
                                     description="Regenerate JSON Schemas from the sopforge artifact models.")
    parser.add_argument("out_dir", nargs="?", type=Path, default=PROJECT_ROOT / "schemas",
                        help="folder to write into (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in write_json_schemas(args.out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
