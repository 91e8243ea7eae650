"""Theme specs: per-stage overrides resolve the way a theme file's author expects."""

from __future__ import annotations

import pytest

from sopforge.errors import UserError
from sopforge.run_request import resolve_spec
from sopforge.theme import ThemeSpec, build_spec, build_stored_spec, slugify


def test_stage_overrides_win_and_fall_back_to_run_settings():
    spec = ThemeSpec(theme="Loan pre-screening", provider="anthropic", model="claude-sonnet-4-5",
                     temperature=0.1, stages={"context": {"provider": "openai", "temperature": 0.3},
                                              "sop": {"model": "claude-opus-4-1"}})
    context, schema, sop = (spec.for_stage(s) for s in ("context", "schema", "sop"))
    assert (context.provider, context.model, context.temperature) == ("openai", None, 0.3)
    assert (schema.provider, schema.model, schema.temperature) == ("anthropic", "claude-sonnet-4-5", 0.1)
    assert (sop.provider, sop.model) == ("anthropic", "claude-opus-4-1")


def test_slug_is_derived_from_the_theme_when_absent():
    assert ThemeSpec(theme="  Pharmacy refills: retail!  ").slug == "pharmacy_refills_retail"
    assert slugify("***") == "theme"


@pytest.mark.parametrize("data, fragment", [
    ({"theme": " "}, "theme is empty"),
    ({"theme": "x", "slug": "Bad Slug"}, "must match"),
    ({"theme": "x", "stages": {"packaging": {}}}, "unknown stage 'packaging'"),
    ({"theme": "x", "stages": {"sop": {"provider": "gemini"}}}, "unknown provider 'gemini'"),
])
def test_invalid_specs_raise_one_line_naming_the_source(data, fragment):
    with pytest.raises(UserError) as err:
        build_spec(data, source="theme.yaml")
    message = str(err.value)
    assert message.startswith("theme.yaml: ") and fragment in message and "\n" not in message


@pytest.mark.parametrize("option, value, fragment", [
    ("rows", -5, "--rows -5: "), ("provider", "bogus", "--provider bogus: unknown provider"),
    ("families", ["nope"], "--family: unknown family 'nope'"), ("review", "later", "--review later: "),
    ("base_url", None, None),
])
def test_a_bad_command_line_option_is_blamed_on_the_option_not_the_theme_file(tmp_path, option, value, fragment):
    theme_file = tmp_path / "theme.yaml"
    theme_file.write_text("theme: pharmacy refills\nrows: 20\n")
    if value is None:  # a valid file and no override: no error at all
        assert resolve_spec(theme_file, None, {option: value})[0].rows == 20
        return
    with pytest.raises(UserError) as err:
        resolve_spec(theme_file, None, {option: value})
    message = str(err.value)
    assert message.startswith(fragment) and str(theme_file) not in message


def test_a_bad_value_in_the_theme_file_is_still_blamed_on_the_file(tmp_path):
    theme_file = tmp_path / "theme.yaml"
    theme_file.write_text("theme: pharmacy refills\nrows: -5\n")
    with pytest.raises(UserError, match=f"^{theme_file}: rows: "):
        resolve_spec(theme_file, None, {"rows": None, "model": "m"})
    with pytest.raises(UserError, match="^parameter rows -5: "):  # the deployable flow names its parameter
        resolve_spec(None, "pharmacy refills", {"rows": -5}, option_label="parameter {}")


def test_a_stored_run_from_an_older_version_drops_the_options_this_one_no_longer_has():
    """A run a previous version stored with PROBE's old ``max_bm25_f1`` could not be rerun at all."""
    stored = ThemeSpec(theme="Baggage claims", families=["sop_tools", "probe"]).model_dump(mode="json")
    stored["options"]["probe"] = {**stored["options"].get("probe", {}), "max_bm25_f1": 0.5, "personas": 2}
    with pytest.raises(UserError, match="probe.max_bm25_f1: unknown key"):
        build_spec(stored, source="run r-1")  # a theme file with it is still refused: its author can fix it
    stored["retired_top_level"] = True
    spec, dropped = build_stored_spec(stored, source="run r-1")
    assert sorted(dropped) == ["probe.max_bm25_f1", "retired_top_level"]
    assert spec.options["probe"]["personas"] == 2 and "max_bm25_f1" not in spec.options["probe"]
    again, none = build_stored_spec(spec.model_dump(mode="json"), source="run r-2")
    assert again == spec and none == []
