"""Generate the committed JSON Schemas in top-level ``schemas/`` from the pydantic models.

The models are the source of truth (DESIGN, Principle 2); the files exist for users and
other tools that read artifacts without Python. ``tests/unit/test_schemas_drift.py`` fails
when a model changes and the files were not regenerated with::

    .venv/bin/python -m sopforge.jsonschemas
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import BaseModel

from sopforge.checks import CheckResult
from sopforge.families import IMPLEMENTED, load_family, shared_stages
from sopforge.settings import PROJECT_ROOT

__all__ = ["REGENERATE_COMMAND", "artifact_models", "render_json_schema", "write_json_schemas", "main"]

REGENERATE_COMMAND = ".venv/bin/python -m sopforge.jsonschemas"


def artifact_models() -> dict[str, type[BaseModel]]:
    """File stem -> model: every stage's artifact (by its kind) in every family, the extra models
    families declare, and the check result every artifact carries. New families add themselves by
    declaring stages, so one command covers all."""
    models: dict[str, type[BaseModel]] = {s.kind: s.model for s in shared_stages()}
    models["check_result"] = CheckResult
    for name in IMPLEMENTED:
        family = load_family(name)
        models.update({s.kind: s.model for s in family.stages})
        models.update(family.json_schemas)
    return models


def render_json_schema(model: type[BaseModel]) -> str:
    """Return the model's JSON Schema as stable text (sorted keys, two-space indent, final newline).

    Args:
        model: A pydantic model class.

    Returns:
        The serialised schema; identical models always give identical text.
    """
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_json_schemas(out_dir: Path) -> list[Path]:
    """Write ``<stem>.schema.json`` for every model in :func:`artifact_models`.

    Args:
        out_dir: Target folder, created if missing (normally the project's ``schemas/``).

    Returns:
        The written paths, in :func:`artifact_models` order.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, model in artifact_models().items():
        path = out_dir / f"{stem}.schema.json"
        path.write_text(render_json_schema(model), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: regenerate the schema files (default: ``<project>/schemas``)."""
    parser = argparse.ArgumentParser(prog="python -m sopforge.jsonschemas",
                                     description="Regenerate JSON Schemas from the sopforge artifact models.")
    parser.add_argument("out_dir", nargs="?", type=Path, default=PROJECT_ROOT / "schemas",
                        help="folder to write into (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in write_json_schemas(args.out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
