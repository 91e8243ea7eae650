"""Checks a business context must pass before any family's first stage runs (DESIGN, chain row 'context')."""

from __future__ import annotations

from sopforge.checks import CheckResult, check
from sopforge.context.model import SECTION_TITLES, BusinessContext, normalize_title

__all__ = ["check_context"]


def check_context(ctx: BusinessContext) -> list[CheckResult]:
    """Checks that must hold before the schema stage runs (DESIGN, chain row 'context').

    Args:
        ctx: A parsed business context.

    Returns:
        One CheckResult per check, passed or not.
    """
    got = [(s.number, normalize_title(s.title)) for s in ctx.sections]
    want = [(i, normalize_title(t)) for i, t in enumerate(SECTION_TITLES, 1)]
    problems = []
    for number, title in want:
        if (number, title) not in got:
            problems.append(f"'## {number}. {SECTION_TITLES[number - 1]}' missing")
    if not problems and got != want:
        problems.append("found " + ", ".join(f"{s.number}. {s.title}" for s in ctx.sections))
    expected = ", ".join(f"{i}. {t}" for i, t in enumerate(SECTION_TITLES, 1))
    results = [check(
        "context.sections_complete", not problems,
        f"<business_context> must have exactly the sections {expected}, in this order, each as a '## N. Title' heading: " + "; ".join(problems)
        if problems else "all 8 sections present in order",
        problems=problems,
    )]

    results.append(check(
        "context.sub_businesses_present", bool(ctx.sub_businesses),
        "no sub-business found in section 2; list each as '- Sub-business A: <name> — <description>'"
        if not ctx.sub_businesses else f"{len(ctx.sub_businesses)} sub-business(es)",
        count=len(ctx.sub_businesses),
    ))

    names = [sb.name for sb in ctx.sub_businesses]
    chosen = ctx.chosen_sub_business()
    results.append(check(
        "context.task_sub_business_known", chosen is not None,
        f"task.sub_business {ctx.task.sub_business!r} is not a sub-business of section 2; use one of: "
        + ", ".join(repr(n) for n in names) if chosen is None else f"task belongs to {chosen.name!r}",
        sub_business=ctx.task.sub_business, known=names,
    ))

    steps = [s for s in ctx.task.required_steps if s.strip()]
    results.append(check(
        "context.task_has_steps", bool(steps),
        "task.required_steps is empty; list the workflow steps the SOP must contain, in order"
        if not steps else f"{len(steps)} required step(s)",
        count=len(steps),
    ))

    blank = [k for k in ("sop_title", "task_context") if not getattr(ctx.task, k).strip()]
    results.append(check(
        "context.task_complete", not blank,
        f"task fields are empty: {', '.join(blank)}; give the SOP title and one paragraph of task context"
        if blank else "task has a title and context",
        empty=blank,
    ))
    return results
