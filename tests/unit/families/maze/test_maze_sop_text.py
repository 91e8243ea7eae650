"""The messy SOP the evaluated model reads: the paper's production imperfections, with the answer still defined."""

from __future__ import annotations

import re

from sopforge.families.maze.export.task_prompt import task_prompt
from sopforge.families.maze.models.scenario import atoms_of


def _lines_with(text: str, marker: str) -> list[str]:
    return [line for line in text.splitlines() if marker in line]


def test_the_messy_lrs_sop_states_every_code_condition_value_action_and_script(lrs):
    messy = lrs.sop_text(messy=True)
    for category, option in lrs.leaves():
        (line,) = [x for x in messy.splitlines() if re.match(rf"- (Code )?{re.escape(option.id)}\b", x)]
        assert option.script in line and option.action in line
        for atom in atoms_of(option.when):   # every threshold and value of the option's own condition
            for value in atom.constants():
                shown = str(value).lower() if not isinstance(value, bool) else None
                if shown:
                    assert shown in line.lower() or shown.replace("_", " ") in line.lower(), (option.id, atom.text())
    for category in lrs.categories:
        assert f"## Category {category.id}. {category.title}" in messy


def test_the_messy_sop_is_out_of_order_informal_redundant_and_states_its_precedence(lrs, hrs):
    clean, messy = lrs.sop_text(), lrs.sop_text(messy=True)
    assert messy != clean and messy == lrs.sop_text(messy=True)   # seeded: the same tree, the same text
    order = [m.group(2) for m in re.finditer(r"^- (Code )?(\d\.\d\d)", messy, re.MULTILINE)]
    assert order != sorted(order)                                    # out of order
    assert "# Addendum (codes added after the last revision" in messy   # rules added at the end
    assert re.search(r"reaches|or more|is under|exceeds|is below|\u2192", messy)   # informal wording
    assert "Remember:" in messy                                      # redundant restatements
    assert messy.count("Q: ") == len(lrs.knowledge_base) + 1         # a knowledge-base pair given twice
    assert "- When 1.02 (Non-controlled prescription expired) and 1.03 both apply, use 1.02." in messy
    assert "set aside when an option that takes precedence over it also applies" in messy
    hrs_messy = hrs.sop_text(messy=True)
    assert "# Notes added after the last review" in hrs_messy
    assert "- Global rules, checked on every reply before the current step and taking precedence over it:" in hrs_messy
    for step in hrs.steps:
        for branch in step.branches:
            assert len(_lines_with(hrs_messy, f"Step {branch.id} ")) >= 1, branch.id


def test_the_evaluated_model_reads_the_messy_sop_and_the_writers_the_clean_one(lrs):
    prompt = task_prompt(lrs)
    assert lrs.sop_text(messy=True) in prompt and lrs.sop_text() not in prompt
