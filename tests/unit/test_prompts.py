"""Prompt registry: headers, parameter contracts, sandboxed rendering and hashes.

Every template under prompts/ is discovered and checked; the negative cases use small
templates written to tmp_path so they cannot depend on the real prompts' wording.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest
import yaml

from sopforge.errors import UserError
from sopforge.prompts import PromptRegistry, RenderedPrompt, TemplateHeader, default_registry
from sopforge.settings import Settings

REGISTRY = default_registry()
TEMPLATE_IDS = REGISTRY.ids()


def sample_params(template_id: str) -> dict[str, str]:
    """One recognisable value per declared parameter."""
    return {name: f"SAMPLE-VALUE-OF-{name.upper()}" for name in REGISTRY.get(template_id).header.parameters}


def write_template(root: Path, template_id: str, body: str, parameters: dict[str, str] | None = None,
                   tags: list[str] | None = None) -> Path:
    header = {
        "name": "test template",
        "source": "a test, L1-2",
        "parameters": {"topic": "what to write about"} if parameters is None else parameters,
        "output": {"format": "docs/formats.md", "tags": tags or ["answer"]},
        "decisions": ["none needed for a test"],
    }
    path = root / f"{template_id}.j2"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{#-\n" + yaml.safe_dump(header, sort_keys=False) + "-#}\n" + body, encoding="utf-8")
    return path


@pytest.fixture
def tmp_registry(tmp_path: Path) -> PromptRegistry:
    return PromptRegistry(tmp_path / "prompts")


# --- discovery -------------------------------------------------------------------------------

def test_the_chain_templates_are_listed():
    assert {"teller/context", "sop_bench/schema", "sop_bench/sop"} <= set(TEMPLATE_IDS)
    assert TEMPLATE_IDS == sorted(TEMPLATE_IDS)


def test_ids_match_the_files_on_disk():
    on_disk = sorted(f"{p.parent.name}/{p.stem}" for p in Settings().prompts_dir.glob("*/*.j2"))
    assert TEMPLATE_IDS == on_disk


def test_ids_ignore_other_files_and_bad_names(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/stage", "{{ topic }}")
    (tmp_path / "prompts" / "paper" / "notes.md").write_text("not a template")
    (tmp_path / "prompts" / "paper" / "Bad-Name.j2").write_text("x")
    (tmp_path / "prompts" / "top_level.j2").write_text("x")
    assert tmp_registry.ids() == ["paper/stage"]


def test_missing_prompts_dir_lists_nothing(tmp_path: Path):
    assert PromptRegistry(tmp_path / "nowhere").ids() == []


def test_unknown_id_lists_the_known_ones():
    with pytest.raises(UserError) as err:
        REGISTRY.get("teller/nonexistent")
    assert "teller/nonexistent" in str(err.value)
    for known in TEMPLATE_IDS:
        assert known in str(err.value)


def test_path_traversal_is_an_unknown_id(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/stage", "{{ topic }}")
    write_template(tmp_path, "outside", "{{ topic }}")
    with pytest.raises(UserError, match="unknown prompt template"):
        tmp_registry.get("../outside")


def test_default_registry_follows_settings(tmp_path: Path):
    write_template(tmp_path / "prompts", "paper/stage", "{{ topic }}")
    registry = default_registry(Settings(project_root=tmp_path))
    assert registry.prompts_dir == tmp_path / "prompts"
    assert registry.ids() == ["paper/stage"]


# --- every real template ---------------------------------------------------------------------

@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_header_parses_with_every_key_filled(template_id: str):
    template = REGISTRY.get(template_id)
    header = template.header
    assert isinstance(header, TemplateHeader)
    assert header.name.strip()
    seed_citations = [s for s in header.source if "seeds/" in s]
    assert seed_citations and all(re.search(r"L\d+", s) for s in seed_citations), "cite seed line numbers"
    assert header.parameters and all(desc.strip() for desc in header.parameters.values())
    assert "docs/formats.md" in header.output.format
    assert header.output.tags
    assert len(header.decisions) >= 3 and all(d.strip() for d in header.decisions)
    assert template.path == Settings().prompts_dir / f"{template_id}.j2"


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_declared_parameters_are_exactly_the_variables_used(template_id: str):
    report = REGISTRY.declared_vs_used(template_id)
    assert report.used, "a template that reads no parameter is suspicious"
    assert report.undeclared == [] and report.unused == []
    assert report.ok


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_renders_with_its_parameters_and_asks_for_its_output_tags(template_id: str):
    params = sample_params(template_id)
    rendered = REGISTRY.render(template_id, **params)
    assert isinstance(rendered, RenderedPrompt)
    text = rendered.text
    for value in params.values():
        assert value in text
    header = REGISTRY.get(template_id).header
    for tag in header.output.tags + header.output.analysis_tags:
        assert f"<{tag}>" in text and f"</{tag}>" in text, tag
    # The header comment is documentation, not prompt text.
    assert "decisions:" not in text and not text.startswith("\n")
    assert "{{" not in text and "{%" not in text and "{#" not in text
    assert text.endswith("\n")


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_render_identity_is_the_file_hash_and_the_text_hash(template_id: str):
    rendered = REGISTRY.render(template_id, **sample_params(template_id))
    template = REGISTRY.get(template_id)
    assert rendered.template_id == template_id
    assert rendered.template_hash == template.sha256 == hashlib.sha256(template.path.read_bytes()).hexdigest()
    assert rendered.prompt_hash == hashlib.sha256(rendered.text.encode("utf-8")).hexdigest()
    again = REGISTRY.render(template_id, **sample_params(template_id))
    assert again == rendered
    changed = {k: v + " (changed)" for k, v in sample_params(template_id).items()}
    other = REGISTRY.render(template_id, **changed)
    assert other.prompt_hash != rendered.prompt_hash and other.template_hash == rendered.template_hash


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_each_missing_parameter_is_named(template_id: str):
    params = sample_params(template_id)
    for name in params:
        partial = {k: v for k, v in params.items() if k != name}
        with pytest.raises(UserError) as err:
            REGISTRY.render(template_id, **partial)
        assert name in str(err.value) and template_id in str(err.value)
        assert "missing" in str(err.value)


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_an_undeclared_extra_parameter_is_refused(template_id: str):
    with pytest.raises(UserError) as err:
        REGISTRY.render(template_id, **sample_params(template_id), temperature_hint="0.1")
    assert "temperature_hint" in str(err.value) and template_id in str(err.value)


# --- the content the parsers rely on (docs/formats.md) ---------------------------------------

def test_context_prompt_spells_out_the_eight_sections_and_task_keys():
    text = REGISTRY.render("teller/context", business_theme="pharmacy prescription refills").text
    titles = ["Business Overview", "Business Types", "Process Description", "Key Roles",
              "System & Tool Support", "Risks & Controls", "Metrics", "Best Practices"]
    positions = [text.index(f"## {n}. {title}\n") for n, title in enumerate(titles, start=1)]
    assert positions == sorted(positions)
    assert "- Sub-business A: <name> — " in text
    for key in ("sub_business:", "sop_title:", "task_context:", "required_steps:"):
        assert f"\n{key}" in text
    assert "Banking" not in text and "pharmacy prescription refills" in text


FIELD_LINE = re.compile(
    r"^(?P<name>[a-z][a-z0-9_]*) - (?P<type>string|integer|float|boolean|date|datetime|enum|"
    r"list\[string\]|list\[integer\]|list\[float\]), .+ \(e\.g\., .+\)(?P<ann>( \[[^\]]+\])*)$")


def test_schema_one_shot_obeys_the_grammar_it_teaches():
    text = REGISTRY.render("sop_bench/schema", **sample_params("sop_bench/schema")).text
    example = text[text.index("<schema>\n<Existing_fields>"):text.index("</schema>")]
    existing = example.split("<Existing_fields>")[1].split("</Existing_fields>")[0].strip().splitlines()
    obtained = example.split("<Field_to_be_obtained>")[1].split("</Field_to_be_obtained>")[0].strip().splitlines()
    assert existing and obtained
    for line in existing + obtained:
        m = FIELD_LINE.match(line)
        assert m, line
        if m["type"] == "enum":
            assert "[choices: " in m["ann"], line
    assert not any("[decision]" in line for line in existing)
    decisions = [line for line in obtained if "[decision]" in line]
    assert decisions and len(obtained) - len(decisions) >= 2
    assert re.search(r'\(e\.g\., "[A-Z]+-\d+"\)', existing[0]), "first field is an id with a non-digit"
    choices = re.search(r"\[choices: ([^\]]+)\]", decisions[0])[1].split(" | ")
    spaced = [c.replace("_", " ") for c in choices]
    assert not any(a != b and a in b for a in spaced for b in spaced)
    assert "<= 50" in text or "at most 50" in text


def test_sop_prompt_spells_out_the_six_sections_and_step_numbering():
    text = REGISTRY.render("sop_bench/sop", **sample_params("sop_bench/sop")).text
    start = text.index("<SOP>\n")
    body = text[start:text.index("</SOP>", start)]
    titles = ["Purpose", "Scope", "Definitions", "Input", "Main Procedure", "Output"]
    positions = [body.index(f"\n{n}. {title}\n") for n, title in enumerate(titles, start=1)]
    assert positions == sorted(positions)
    assert "\n5.1 " in body and "\n5.1.1 " in body
    assert "backticks" in text and ">=" in text


# --- sandbox, strictness and errors (temporary templates) ------------------------------------

def test_undeclared_variable_in_body_fails_strictly(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/stage", "{{ topic }} and {{ forgotten }}\n")
    report = tmp_registry.declared_vs_used("paper/stage")
    assert report.undeclared == ["forgotten"] and not report.ok
    with pytest.raises(UserError) as err:
        tmp_registry.render("paper/stage", topic="x")
    assert "forgotten" in str(err.value) and "paper/stage" in str(err.value)


def test_declared_but_unused_parameter_is_reported(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/stage", "fixed text\n", parameters={"topic": "unused"})
    assert tmp_registry.declared_vs_used("paper/stage").unused == ["topic"]


def test_missing_attribute_is_an_error_not_blank(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/stage", "[{{ topic.no_such_attribute }}]\n")
    with pytest.raises(UserError, match="no_such_attribute"):
        tmp_registry.render("paper/stage", topic="x")


@pytest.mark.parametrize("body", [
    "{{ ''.__class__ }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ topic.__class__.__init__.__globals__ }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ lipsum.__globals__['os'] }}",
    "{{ self._TemplateReference__context }}",
])
def test_sandbox_blocks_private_attribute_access(tmp_path: Path, tmp_registry: PromptRegistry, body: str):
    write_template(tmp_path / "prompts", "paper/stage", body + "{{ topic }}\n")
    with pytest.raises(UserError) as err:
        tmp_registry.render("paper/stage", topic="x")
    assert "paper/stage" in str(err.value) and "blocked by the sandbox" in str(err.value)


def test_templates_cannot_include_other_files(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/other", "secret {{ topic }}\n")
    write_template(tmp_path / "prompts", "paper/stage", "{% include 'paper/other.j2' %}{{ topic }}\n")
    with pytest.raises(UserError, match="paper/stage"):
        tmp_registry.render("paper/stage", topic="x")


def test_no_autoescape_and_trailing_newline_kept(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/stage", "<answer>{{ topic }}</answer>\n")
    text = tmp_registry.render("paper/stage", topic='a < b & "c"').text
    assert text == '<answer>a < b & "c"</answer>\n'


@pytest.mark.parametrize("source, problem", [
    ("no header here {{ topic }}\n", "must start with"),
    ("{#- [unclosed -#}\n{{ topic }}\n", "not valid YAML"),
    ("{#- just a string -#}\n{{ topic }}\n", "mapping"),
    ("{#-\nname: x\nsource: y\nparameters: {topic: t}\noutput: {format: f, tags: [a]}\n-#}\n{{ topic }}\n",
     "decisions"),
    ("{#-\nname: x\nsource: y\nparameters: {topic: t}\noutput: {format: f, tags: [a]}\ndecisions: [d]\n"
     "colour: blue\n-#}\n{{ topic }}\n", "colour"),
])
def test_bad_headers_are_user_errors_naming_the_problem(tmp_path: Path, tmp_registry: PromptRegistry,
                                                        source: str, problem: str):
    path = tmp_path / "prompts" / "paper" / "stage.j2"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    with pytest.raises(UserError) as err:
        tmp_registry.get("paper/stage")
    assert problem in str(err.value) and "paper/stage" in str(err.value)


def test_syntax_error_is_a_user_error(tmp_path: Path, tmp_registry: PromptRegistry):
    write_template(tmp_path / "prompts", "paper/stage", "{% if topic %}never closed {{ topic }}\n")
    with pytest.raises(UserError, match="syntax error"):
        tmp_registry.render("paper/stage", topic="x")


# --- identity changes with the source --------------------------------------------------------

@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_editing_a_template_changes_its_hash_and_output(tmp_path: Path, template_id: str):
    shutil.copytree(Settings().prompts_dir, tmp_path / "prompts")
    registry = PromptRegistry(tmp_path / "prompts")
    params = sample_params(template_id)
    before = registry.render(template_id, **params)
    assert before == REGISTRY.render(template_id, **params), "a copy renders identically"

    path = tmp_path / "prompts" / f"{template_id}.j2"
    path.write_text(path.read_text(encoding="utf-8") + "One more instruction.\n", encoding="utf-8")
    after = registry.render(template_id, **params)
    assert after.template_hash != before.template_hash
    assert after.template_hash == registry.get(template_id).sha256
    assert after.prompt_hash != before.prompt_hash
    assert after.text.endswith("One more instruction.\n")


def test_header_only_edit_changes_template_hash_but_not_prompt(tmp_path: Path, tmp_registry: PromptRegistry):
    path = write_template(tmp_path / "prompts", "paper/stage", "Write about {{ topic }}.\n")
    before = tmp_registry.render("paper/stage", topic="x")
    path.write_text(path.read_text().replace("a test, L1-2", "a test, L1-3"))
    after = tmp_registry.render("paper/stage", topic="x")
    assert after.template_hash != before.template_hash
    assert after.prompt_hash == before.prompt_hash and after.text == "Write about x.\n"


def test_a_header_is_parsed_once_per_source_and_again_after_an_edit(tmp_path: Path, tmp_registry: PromptRegistry,
                                                                    monkeypatch):
    from sopforge import prompts

    parsed: list[str] = []
    real = prompts.parse_header
    monkeypatch.setattr(prompts, "parse_header", lambda tid, source: parsed.append(tid) or real(tid, source))
    path = write_template(tmp_path / "prompts", "paper/stage", "Write about {{ topic }}.\n")
    for _ in range(3):
        assert tmp_registry.render("paper/stage", topic="x").text == "Write about x.\n"
    assert parsed == ["paper/stage"]
    tmp_registry.get("paper/stage").header.parameters["extra"] = "changed by a caller"  # not kept
    assert tmp_registry.get("paper/stage").header.parameters == {"topic": "what to write about"}
    path.write_text(path.read_text().replace("what to write about", "the subject"))
    assert tmp_registry.get("paper/stage").header.parameters == {"topic": "the subject"}
    assert parsed == ["paper/stage", "paper/stage"]
