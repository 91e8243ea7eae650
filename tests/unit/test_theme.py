"""Theme specs: per-stage overrides resolve the way a theme file's author expects."""

from __future__ import annotations

import pytest

from sopforge.errors import UserError
from sopforge.theme import ThemeSpec, build_spec, slugify


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
