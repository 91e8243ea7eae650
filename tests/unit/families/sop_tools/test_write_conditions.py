"""Write branches as precise as the SOP (issue 19): comparisons with numbers and alternative rules.

"Post the adjustment only when the variance is not 0" and "notify compliance only under sub-rule
5.8.3" could not be stated with decision values alone; the checks then demanded writes the SOP text
forbids. These tests fail on the old {field: [decision values]} form.
"""

from __future__ import annotations

import pytest

from sopforge.families.sop_tools.models.api_graph import APISpec
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.write_conditions import render, satisfied
from sopforge.families.sop_tools.verify.api_graph_checks import condition_problems

SCHEMA = DataSchema.parse("""<schema>
<Existing_fields>
count_id - string, inventory count id (e.g., "IC-20931")
hazmat_class - enum, hazard class of the item (e.g., "none_declared") [choices: none_declared | class_3 | class_8]
</Existing_fields>
<Field_to_be_obtained>
variance_units - integer, counted minus booked units (e.g., -2) [range: -500 to 500]
variance_value_usd - float, value of the variance (e.g., 120.5) [range: -100000.0 to 100000.0]
adjustment_decision - enum, what happens to the count (e.g., "post") [choices: post | recount | escalate] [decision]
</Field_to_be_obtained>
</schema>""")
FIELDS = {f.name: f for f in SCHEMA.fields}


def write(when) -> APISpec:
    return APISpec.model_validate({
        "api_name": "postAdjustment", "description": "d", "purpose": "p", "effect": "write",
        "writes_table": "adjustments", "when": when, "complexity_level": "low", "business_criticality": "high"})


@pytest.mark.parametrize(("values", "expected"), [
    ({"adjustment_decision": "post", "variance_units": 3}, True),
    ({"adjustment_decision": "post", "variance_units": 0}, False),  # the SOP posts nothing when nothing differs
    ({"adjustment_decision": "post", "variance_units": -4}, True),
    ({"adjustment_decision": "recount", "variance_units": 3}, False),
])
def test_not_zero_narrows_a_decision(values, expected):
    api = write({"adjustment_decision": ["post"], "variance_units": ["!= 0"]})
    assert api.allowed_on(values) is expected
    assert api.when_text == 'adjustment_decision is "post" and variance_units != 0'


def test_alternative_rules_any_of_which_performs_the_write():
    # 5.8.3: notify compliance for a class 8 item, or for any variance worth more than 2,500 dollars
    api = write([{"hazmat_class": ["class_8"]}, {"variance_value_usd": ["> 2500", "< -2500"]}])
    assert api.allowed_on({"hazmat_class": "class_8", "variance_value_usd": 10.0})
    assert api.allowed_on({"hazmat_class": "none_declared", "variance_value_usd": -3000.0})
    assert not api.allowed_on({"hazmat_class": "class_3", "variance_value_usd": 2500.0})
    assert api.conditional
    assert api.when_text == ('(hazmat_class is "class_8") or '
                             '((variance_value_usd > 2500 or variance_value_usd < -2500))')
    assert condition_problems(api.when, FIELDS) == []


def test_the_old_form_still_reads_the_same():
    api = write({"adjustment_decision": ["post", "escalate"]})
    assert api.allowed_on({"adjustment_decision": "escalate"}) and not api.allowed_on({"adjustment_decision": "recount"})
    assert not write({}).conditional and satisfied({}, {}) and render({}) == "every branch"


def test_booleans_and_bare_numbers_are_labelled_as_the_schema_writes_them():
    assert write({"variance_units": [0]}).when == {"variance_units": ["0"]}
    assert write({"variance_units": [0]}).allowed_on({"variance_units": 0})


@pytest.mark.parametrize(("when", "problem"), [
    ({"adjustment_decision": ["> 0"]}, "'> 0' compares adjustment_decision with a number, but adjustment_decision is a enum"),
    ({"variance_units": ["post"]}, "'post' is not a number, and variance_units is a integer"),
    ({"adjustment_decision": ["approve"]}, "approve is not a value of adjustment_decision (post | recount | escalate)"),
    ({"adjustment_decision": ["> post"]}, "'> post': > needs a number"),
    ({"no_such_field": ["x"]}, "no_such_field is not a field of the schema"),
    ([{"adjustment_decision": ["post"]}, {}], "an alternative of the list is empty"),
])
def test_a_condition_the_schema_cannot_hold_is_named(when, problem):
    assert any(p.startswith(problem) for p in condition_problems(write(when).when, FIELDS)), \
        condition_problems(write(when).when, FIELDS)


def test_a_comparison_on_a_number_passes_the_graph_check():
    """The old check refused any condition on a field without labels ('is not an enum or boolean field')."""
    assert condition_problems({"variance_units": ["!= 0"], "adjustment_decision": ["post"]}, FIELDS) == []
