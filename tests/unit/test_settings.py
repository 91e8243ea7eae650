"""Settings from the environment: a malformed ``SOPFORGE_*`` value is one line naming it and what it takes."""

from __future__ import annotations

import pytest

from sopforge.errors import UserError
from sopforge.settings import load_settings


@pytest.mark.parametrize("variable, value, takes", [
    ("SOPFORGE_MAX_ATTEMPTS", "three", "a whole number from 1 to 10; fix it, or unset it for the default (3)"),
    ("SOPFORGE_MAX_CONCURRENCY", "0", "a whole number ≥ 1; fix it, or unset it for the default (16)"),
    ("SOPFORGE_REQUEST_TIMEOUT_SECONDS", "abc", "a number > 0; fix it, or unset it for the default (300)"),
    ("SOPFORGE_MAX_RETRIES", "99", "a whole number from 0 to 20"),
    ("SOPFORGE_REQUESTS_PER_MINUTE", "-5", "a number > 0"),
    ("SOPFORGE_PRICES", "not json", 'JSON such as {"model-prefix": [input, output]}'),
])
def test_a_malformed_variable_is_one_line_naming_it_its_value_and_what_it_takes(monkeypatch, variable, value, takes):
    monkeypatch.setenv(variable, value)
    with pytest.raises(UserError) as raised:
        load_settings()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{variable}=" if variable != "SOPFORGE_PRICES" else variable), message
    assert takes in message, message


def test_an_override_that_is_not_valid_is_named_as_the_option(monkeypatch):
    with pytest.raises(UserError, match=r"^--max-attempts='0' is not valid: it takes a whole number from 1 to 10"):
        load_settings(max_attempts="0")


def test_valid_values_still_load(monkeypatch):
    monkeypatch.setenv("SOPFORGE_MAX_CONCURRENCY", "4")
    monkeypatch.setenv("SOPFORGE_PRICES", '{"m": [1, 2]}')
    settings = load_settings()
    assert settings.max_concurrency == 4 and settings.prices == {"m": (1.0, 2.0)}
