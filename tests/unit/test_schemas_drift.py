"""The committed JSON Schemas in schemas/ must equal what the pydantic models generate (Principle 2)."""

from __future__ import annotations

import json
from pathlib import Path

from sopforge.jsonschemas import REGENERATE_COMMAND, artifact_models, main, write_json_schemas
from sopforge.settings import PROJECT_ROOT

COMMITTED = PROJECT_ROOT / "schemas"
HINT = f"JSON Schemas in schemas/ are out of date; regenerate them with: {REGENERATE_COMMAND}"


def _schema_files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.schema.json"))}


def test_committed_schemas_match_the_models(tmp_path: Path):
    write_json_schemas(tmp_path)
    generated, committed = _schema_files(tmp_path), _schema_files(COMMITTED)
    assert sorted(committed) == sorted(generated), HINT
    for name, text in generated.items():
        assert committed[name] == text, f"{name} differs. {HINT}"


def test_every_artifact_model_has_a_file_with_sorted_keys_and_final_newline(tmp_path: Path):
    paths = write_json_schemas(tmp_path)
    assert [p.name for p in paths] == [f"{stem}.schema.json" for stem in artifact_models()]
    assert {"business_context", "data_schema", "sop_document", "check_result"} <= set(artifact_models())
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert text.endswith("}\n") and not text.endswith("\n\n")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_generated_schema_reflects_field_descriptions(tmp_path: Path):
    write_json_schemas(tmp_path)
    schema = json.loads((tmp_path / "data_schema.schema.json").read_text(encoding="utf-8"))
    role = schema["$defs"]["FieldSpec"]["properties"]["role"]
    assert role["enum"] == ["existing", "to_be_obtained"]
    assert role["description"]


def test_command_line_entry_writes_into_the_given_folder(tmp_path: Path, capsys):
    assert main([str(tmp_path / "out")]) == 0
    assert _schema_files(tmp_path / "out") == _schema_files(COMMITTED)
    assert "sop_document.schema.json" in capsys.readouterr().out
