"""BusinessContext: parsing the <business_context>/<task> answer and the context gate."""

from __future__ import annotations

import pytest

from sopforge.parsing import ParseError
from sopforge.context.checks import check_context
from sopforge.context.model import SECTION_TITLES, BusinessContext


def failing(checks) -> list[str]:
    return [c.name for c in checks if not c.passed]


def by_name(checks, name):
    return next(c for c in checks if c.name == name)


def parse(text: str) -> BusinessContext:
    return BusinessContext.parse(text, theme="pharmacy prescription refills")


def test_good_answer_parses_fully(good_context: BusinessContext):
    assert good_context.theme == "pharmacy prescription refills"
    assert [s.number for s in good_context.sections] == list(range(1, 9))
    assert [s.title for s in good_context.sections] == list(SECTION_TITLES)
    assert good_context.sections[0].body.startswith("Scenario Name: Community Pharmacy")
    assert [(sb.label, sb.name) for sb in good_context.sub_businesses] == [
        ("A", "Routine Refill Authorization"),
        ("B", "Prescriber Renewal Requests"),
        ("C", "Automatic Refill Enrollment"),
    ]
    assert good_context.sub_businesses[1].description.startswith("contacts prescribers")
    assert good_context.task.sub_business == "Routine Refill Authorization"
    assert len(good_context.task.required_steps) == 6
    assert good_context.chosen_sub_business() is good_context.sub_businesses[0]


def test_good_answer_passes_every_check(good_context: BusinessContext):
    checks = check_context(good_context)
    assert failing(checks) == []
    assert {c.name for c in checks} == {
        "context.sections_complete", "context.sub_businesses_present", "context.task_sub_business_known",
        "context.task_has_steps", "context.task_complete",
    }


def test_additional_context_numbers_the_required_steps(good_context: BusinessContext):
    text = good_context.additional_context()
    assert text.startswith(good_context.task.task_context)
    assert "\n1. Match the refill request to the prescription and patient records\n" in text
    assert text.rstrip().endswith("6. Record the blocking reason and decide approve, refer_to_prescriber or deny")


def test_to_prompt_text_round_trips_the_sections(good_context: BusinessContext):
    text = good_context.to_prompt_text()
    assert text.startswith("## 1. Business Overview\nScenario Name:")
    reparsed = parse(f"<business_context>\n{text}\n</business_context><task>{_task_yaml(good_context)}</task>")
    assert reparsed.sections == good_context.sections
    assert reparsed.sub_businesses == good_context.sub_businesses


def _task_yaml(ctx: BusinessContext) -> str:
    steps = "\n".join(f'  - "{s}"' for s in ctx.task.required_steps)
    return (f'sub_business: "{ctx.task.sub_business}"\nsop_title: "{ctx.task.sop_title}"\n'
            f'task_context: "{ctx.task.task_context}"\nrequired_steps:\n{steps}\n')


@pytest.mark.parametrize("tag", ["business_context", "task"])
def test_missing_block_is_a_parse_error(context_answer: str, tag: str):
    start, end = context_answer.index(f"<{tag}>"), context_answer.index(f"</{tag}>") + len(tag) + 3
    with pytest.raises(ParseError, match=f"missing <{tag}>…</{tag}> block"):
        parse(context_answer[:start] + context_answer[end:])


def test_task_with_unknown_key_is_a_parse_error(context_answer: str, edit):
    bad = edit(context_answer, "required_steps:\n", 'priority: "high"\nrequired_steps:\n')
    with pytest.raises(ParseError, match=r"<task>: priority: Extra inputs are not permitted"):
        parse(bad)


def test_task_missing_key_is_a_parse_error(context_answer: str, edit):
    bad = edit(context_answer, 'sub_business: "Routine Refill Authorization"\n', "")
    with pytest.raises(ParseError, match=r"<task>: sub_business: Field required"):
        parse(bad)


def test_task_not_a_mapping_is_a_parse_error():
    with pytest.raises(ParseError, match="expected a YAML mapping"):
        parse("<business_context>## 1. Business Overview\nx</business_context><task>- a\n- b</task>")


def test_required_steps_as_one_string_is_a_parse_error(context_answer: str):
    start = context_answer.index("required_steps:")
    bad = context_answer[:start] + 'required_steps: "do everything"\n</task>\n'
    with pytest.raises(ParseError, match="required_steps must be a YAML list"):
        parse(bad)


def test_unquoted_step_with_colon_is_read_as_text(context_answer: str, edit):
    bad = edit(context_answer, '  - "Check that at least one refill remains"',
               "  - Refill check: at least one refill remains")
    assert "Refill check: at least one refill remains" in parse(bad).task.required_steps


def test_sub_business_separators(context_answer: str, edit):
    text = edit(context_answer, "- Sub-business B: Prescriber Renewal Requests — contacts",
                "- Sub-business B: Prescriber Renewal Requests: contacts")
    text = edit(text, "- Sub-business C: Automatic Refill Enrollment — enrolls",
                "* Sub-business C: Automatic Refill Enrollment - enrolls")
    ctx = parse(text)
    assert [sb.name for sb in ctx.sub_businesses] == [
        "Routine Refill Authorization", "Prescriber Renewal Requests", "Automatic Refill Enrollment"]
    assert ctx.sub_businesses[2].description.startswith("enrolls")


def test_sub_business_without_description_is_a_parse_error(context_answer: str, edit):
    bad = edit(context_answer, "- Sub-business C: Automatic Refill Enrollment — enrolls maintenance-medication "
               "patients in scheduled refills and triggers fills a fixed number of days before supply runs out.",
               "- Sub-business C: Automatic Refill Enrollment")
    with pytest.raises(ParseError, match="sub-business line needs '<name> — <description>'.*Automatic Refill"):
        parse(bad)


def test_missing_section_fails_sections_check(context_answer: str, edit):
    ctx = parse(edit(context_answer, "## 7. Metrics\n", ""))
    result = by_name(check_context(ctx), "context.sections_complete")
    assert not result.passed
    assert "'## 7. Metrics' missing" in result.message
    assert "\n" not in result.message


def test_renamed_section_fails_sections_check(context_answer: str, edit):
    ctx = parse(edit(context_answer, "## 4. Key Roles", "## 4. Stakeholders"))
    assert failing(check_context(ctx)) == ["context.sections_complete"]


def test_sections_out_of_order_fail(context_answer: str):
    a, b = "## 7. Metrics", "## 8. Best Practices"
    swapped = context_answer.replace(a, "@@").replace(b, "## 7. Metrics").replace("@@", "## 8. Best Practices")
    # every (number, title) pair exists, but section 8 now comes before section 7
    assert failing(check_context(parse(swapped))) == ["context.sections_complete"]


def test_extra_section_fails_sections_check(context_answer: str, edit):
    ctx = parse(edit(context_answer, "</business_context>", "## 9. Appendix\nmore\n</business_context>"))
    result = by_name(check_context(ctx), "context.sections_complete")
    assert not result.passed and "9. Appendix" in result.message


def test_title_wording_and_case_are_tolerated(context_answer: str, edit):
    text = edit(context_answer, "## 5. System & Tool Support", "## 5. System and Tool Support")
    text = edit(text, "## 6. Risks & Controls", "### 6. risks & controls:")
    assert failing(check_context(parse(text))) == []


def test_no_sub_business_fails(context_answer: str):
    lines = [ln for ln in context_answer.splitlines() if "Sub-business " not in ln or "Process" in ln]
    ctx = parse("\n".join(lines))
    assert ctx.sub_businesses == []
    assert set(failing(check_context(ctx))) == {"context.sub_businesses_present", "context.task_sub_business_known"}


def test_unknown_task_sub_business_fails_and_lists_the_known_ones(context_answer: str, edit):
    ctx = parse(edit(context_answer, 'sub_business: "Routine Refill Authorization"', 'sub_business: "Refill Desk"'))
    result = by_name(check_context(ctx), "context.task_sub_business_known")
    assert not result.passed
    assert "'Refill Desk'" in result.message and "'Prescriber Renewal Requests'" in result.message
    assert failing(check_context(ctx)) == ["context.task_sub_business_known"]


def test_task_sub_business_match_ignores_case(context_answer: str, edit):
    ctx = parse(edit(context_answer, 'sub_business: "Routine Refill Authorization"',
                     'sub_business: "routine refill  authorization"'))
    assert failing(check_context(ctx)) == []


def test_empty_required_steps_fail(context_answer: str):
    start = context_answer.index("required_steps:")
    ctx = parse(context_answer[:start] + "required_steps: []\n</task>\n")
    assert failing(check_context(ctx)) == ["context.task_has_steps"]


def test_blank_title_fails_task_complete(context_answer: str, edit):
    ctx = parse(edit(context_answer, 'sop_title: "SOP describing the steps for authorizing a refill request '
                     'against an existing community pharmacy prescription"', 'sop_title: ""'))
    assert failing(check_context(ctx)) == ["context.task_complete"]
