"""Contracts between the scenario prompts and the checks (issue 19): every limit a check enforces is stated
in the prompt that produces the value, and business days in the words are business days in the structure."""

from __future__ import annotations

import pytest

from sopforge.checks import blocking_failures
from sopforge.families.maze.stages.scenario import HRS_TEMPLATE, LRS_TEMPLATE
from sopforge.families.maze.verify.scenario_checks import COMMON, HRS_SHAPE, LRS_SHAPE, PROMPT_LIMITS, check_scenario
from sopforge.prompts import default_registry

REGISTRY = default_registry()
TEMPLATES = {"LRS": LRS_TEMPLATE, "HRS": HRS_TEMPLATE}


@pytest.mark.parametrize("kind", ["LRS", "HRS"])
def test_every_limit_a_check_enforces_is_stated_in_the_scenario_prompt(kind):
    template = TEMPLATES[kind]
    shapes = {**COMMON, **(LRS_SHAPE if kind == "LRS" else HRS_SHAPE)}
    assert set(PROMPT_LIMITS[kind]) == {f"limit_{k}" for k in shapes}   # every number the checks use is listed
    declared = REGISTRY.get(template).header.parameters
    missing = sorted(set(PROMPT_LIMITS[kind]) - set(declared))
    assert not missing, f"{template} does not state the limits {missing}"
    # rendered with a distinct sentinel per limit, each sentinel appears in the prompt text
    sentinels = {name: str(90_001 + i) for i, name in enumerate(sorted(PROMPT_LIMITS[kind]))}
    others = {name: f"<{name}>" for name in declared if name not in sentinels}
    text = REGISTRY.render(template, **others, **sentinels).text
    absent = sorted(name for name, sentinel in sentinels.items() if sentinel not in text)
    assert not absent, f"{template} renders without stating {absent}"


@pytest.mark.parametrize("kind", ["LRS", "HRS"])
def test_the_text_limit_covers_knowledge_base_answers_in_the_prompt(kind):
    params = {name: f"<{name}>" for name in REGISTRY.get(TEMPLATES[kind]).header.parameters}
    text = REGISTRY.render(TEMPLATES[kind], **{**params, "limit_text_chars": "300"}).text
    assert "Every script and every knowledge-base answer: 1 to 300 characters." in text


def test_a_long_knowledge_base_answer_fails_the_same_check_as_a_long_script(lrs):
    lrs.knowledge_base[0].a = "x" * 301
    failures = {c.name: c.message for c in blocking_failures(check_scenario(lrs))}
    assert "knowledge base answer 1 (301 characters)" in failures["maze.scripts_fit"]


def test_a_period_the_procedure_compares_must_be_counted_as_the_text_counts_it(lrs):
    category, option, threshold = next((c, o, a.value) for c in lrs.categories for o in c.options
                                       for a in lrs.leaf_atoms(c, o)
                                       if a.fact == "days_since_last_fill" and a.op in ("<", ">=", ">", "<="))
    option.title = f"Refill after {threshold} business days"
    failures = {c.name: c.message for c in blocking_failures(check_scenario(lrs))}
    assert (f'"{threshold} business days" beside days_since_last_fill (calendar days) compared with {threshold}'
            in failures["maze.business_days"])
    lrs.fact("days_since_last_fill").description = "Business days since the last fill."
    failures = {c.name: c.message for c in blocking_failures(check_scenario(lrs))}
    assert "facts described in business days but derived otherwise: days_since_last_fill" in failures[
        "maze.business_days"]
    lrs.fact("days_since_last_fill").derivation = "business_days"
    assert "maze.business_days" not in {c.name for c in blocking_failures(check_scenario(lrs))}


def test_a_count_of_business_days_the_procedure_never_decides_on_is_a_promise_not_a_rule(lrs):
    """Every independent answerer's HRS scenario promised something "within N working days" (issue 19)."""
    option = lrs.categories[0].options[0]
    option.script = f"{option.script[:200]} We call you back within 2 business days."
    lrs.constraints.append("The pharmacist calls the patient back within 3 business days.")
    assert "maze.business_days" not in {c.name for c in blocking_failures(check_scenario(lrs))}


def test_the_next_business_day_is_a_date_not_a_count(lrs):
    assert any("next business day" in p.a for p in lrs.knowledge_base)
    assert "maze.business_days" not in {c.name for c in blocking_failures(check_scenario(lrs))}


def test_business_days_are_explained_identically_to_the_model_writer_and_reader(lrs):
    fact = lrs.fact("days_since_last_fill")
    fact.derivation = "business_days"
    lrs.holidays = ["12-25"]
    catalogue = lrs.fact_catalogue()
    assert ("business days from the first date to the second: the weekdays (Monday to Friday) after the first date up "
            "to and including the second, skipping weekends and these holidays (month-day, every year): 12-25") in catalogue
    assert catalogue in lrs.sop_text(messy=True) and catalogue in lrs.sop_text()
