"""A check's message matches its verdict: a passing check never carries failure text."""

from __future__ import annotations

from sopforge.checks import check


def test_ok_text_replaces_the_failure_text_when_the_check_passes():
    failing = check("package.tasks_present", False, "no task has a computed ground truth: nothing to export",
                    ok="50 tasks exported", tasks=0)
    passing = check("package.tasks_present", True, "no task has a computed ground truth: nothing to export",
                    ok="50 tasks exported", tasks=50)
    assert failing.message == "no task has a computed ground truth: nothing to export"
    assert passing.message == "50 tasks exported" and passing.details == {"tasks": 50}


def test_a_message_that_reads_true_either_way_is_kept():
    assert check("schema.field_count", True, "18 fields").message == "18 fields"
