"""Read a SOP-Bench folder tolerantly: every file that can be read is, every failure is kept.

Nothing here executes the folder's code; ``tools.py`` is read as text only.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from sopforge.sandbox.channel import nests_deeper

__all__ = ["REQUIRED_FILES", "TEST_FILES", "REFERENCE_FILE", "FolderContents", "ToolSpecView", "load_folder",
           "read_text", "spec_views"]

TEST_FILES = ("test_set.csv", "test_set_with_outputs.csv")  # the harness prefers test_set.csv
REQUIRED_FILES = ("sop.txt", "toolspecs.json", "tools.py", "metadata.json")
REFERENCE_FILE = "reference_procedure.py"
MAX_JSON_DEPTH = 64


@dataclass
class ToolSpecView:
    """One toolspec element in either accepted shape (``toolSpec`` wrapper or flat)."""

    index: int
    name: Any
    description: Any
    schema: Any  # inputSchema.json, or None when absent
    raw: dict
    required_outside_json: bool = False

    @property
    def properties(self) -> dict:
        props = self.schema.get("properties") if isinstance(self.schema, dict) else None
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        req = self.schema.get("required") if isinstance(self.schema, dict) else None
        return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


@dataclass
class FolderContents:
    """What could be read from one folder, and what could not."""

    path: Path
    present: set[str] = field(default_factory=set)
    sop_text: str | None = None
    sop_error: str | None = None
    metadata: Any = None
    metadata_error: str | None = None
    toolspecs: Any = None
    toolspecs_error: str | None = None
    specs: list[ToolSpecView] = field(default_factory=list)
    dropped_specs: list[int] = field(default_factory=list)
    csv_name: str | None = None
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    frame: pd.DataFrame | None = None
    csv_error: str | None = None
    tools_source: str | None = None
    tools_error: str | None = None
    reference_source: str | None = None

    @cached_property
    def records(self) -> list[dict[str, str]]:
        """Rows as dicts of raw text (the first of duplicate headers wins; short rows padded with "")."""
        first: dict[str, int] = {}
        for i, name in enumerate(self.header):
            first.setdefault(name, i)
        return [{name: (row[i] if i < len(row) else "") for name, i in first.items()} for row in self.rows]

    @property
    def input_columns(self) -> list[str]:
        return _string_list(self.metadata, "input_columns")

    @property
    def output_columns(self) -> list[str]:
        return _string_list(self.metadata, "output_columns")


def _string_list(metadata: Any, key: str) -> list[str]:
    if not isinstance(metadata, dict) or not isinstance(metadata.get(key), list):
        return []
    return [c for c in metadata[key] if isinstance(c, str)]


def read_text(path: Path) -> str:
    """UTF-8 with the harness's Latin-1 fallback."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def spec_views(toolspecs: Any) -> tuple[list[ToolSpecView], list[int]]:
    """Normalise toolspec elements; return the views and the indices of unusable elements."""
    views, dropped = [], []
    if not isinstance(toolspecs, list):
        return views, dropped
    for index, element in enumerate(toolspecs):
        body = element.get("toolSpec") if isinstance(element, dict) and isinstance(element.get("toolSpec"), dict) \
            else element
        if not isinstance(body, dict) or "name" not in body:
            dropped.append(index)
            continue
        input_schema = body.get("inputSchema")
        schema = input_schema.get("json") if isinstance(input_schema, dict) else None
        outside = isinstance(input_schema, dict) and "required" in input_schema
        views.append(ToolSpecView(index=index, name=body.get("name"), description=body.get("description"),
                                  schema=schema, raw=body, required_outside_json=outside))
    return views, dropped


def _load_csv(contents: FolderContents, path: Path) -> None:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        contents.csv_error = f"{path.name} is not UTF-8: {exc}"
        return
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        table = [row for row in reader if row]  # pandas skips blank lines too
    except csv.Error as exc:
        contents.csv_error = f"{path.name}: {exc}"
        return
    if table:
        contents.header, contents.rows = table[0], table[1:]
    try:
        contents.frame = pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a finding, not a crash
        contents.csv_error = f"pandas cannot read {path.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def _load_json(path: Path) -> Any:
    """JSON of a published file, refused when nested beyond what any spec needs: schemas are
    walked recursively by the checks (and by jsonschema), so depth is a host-side hazard."""
    try:
        value = json.loads(read_text(path))
    except RecursionError:
        raise ValueError(f"it nests deeper than {MAX_JSON_DEPTH} levels") from None
    if nests_deeper(value, MAX_JSON_DEPTH):
        raise ValueError(f"it nests deeper than {MAX_JSON_DEPTH} levels")
    return value


def load_folder(path: Path) -> FolderContents:
    """Read every SOP-Bench file of ``path`` that exists; never raises for bad content."""
    contents = FolderContents(path=path)
    contents.present = {p.name for p in path.iterdir() if p.is_file()}
    if "sop.txt" in contents.present:
        try:
            contents.sop_text = read_text(path / "sop.txt")
        except OSError as exc:
            contents.sop_error = str(exc)
    if "metadata.json" in contents.present:
        try:
            contents.metadata = _load_json(path / "metadata.json")
        except (OSError, ValueError) as exc:
            contents.metadata_error = f"metadata.json does not parse: {str(exc)[:200]}"
    if "toolspecs.json" in contents.present:
        try:
            contents.toolspecs = _load_json(path / "toolspecs.json")
            contents.specs, contents.dropped_specs = spec_views(contents.toolspecs)
        except (OSError, ValueError) as exc:
            contents.toolspecs_error = f"toolspecs.json does not parse: {str(exc)[:200]}"
    contents.csv_name = next((n for n in TEST_FILES if n in contents.present), None)
    if contents.csv_name:
        _load_csv(contents, path / contents.csv_name)
    if "tools.py" in contents.present:
        try:
            contents.tools_source = read_text(path / "tools.py")
        except OSError as exc:
            contents.tools_error = str(exc)
    if REFERENCE_FILE in contents.present:
        contents.reference_source = read_text(path / REFERENCE_FILE)
    return contents
