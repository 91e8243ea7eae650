"""The maze family's declaration: its DAG, gates, theme section, review pages and summary."""

from __future__ import annotations

import json

import pytest

from sopforge.errors import UserError
from sopforge.families import load_family, plan
from sopforge.families.maze import render
from sopforge.review.edits import check_edit
from sopforge.theme import build_spec

THEME = {"theme": "pharmacy refills", "families": ["maze"]}


def test_the_scenario_stages_read_only_the_context_and_gate_the_sop_trees():
    dag = plan(("maze",))
    assert dag.names == ["context", "maze_lrs", "maze_hrs", "maze_instances", "maze_baselines", "maze_package"]
    assert dag.get("maze_lrs").parents == dag.get("maze_hrs").parents == ("context",)   # they run side by side
    assert [s.name for s in dag.stages if s.gate] == ["maze_lrs", "maze_hrs", "maze_package"]
    assert all(s.family == "maze" for s in dag.stages[1:])
    assert dag.descendants("maze_instances") == ["maze_instances", "maze_baselines", "maze_package"]


def test_the_theme_section_is_validated_with_one_line_errors():
    spec = build_spec({**THEME, "maze": {"lrs_instances": 3, "noise": {"sarcasm": 1.0}}}, source="t.yaml")
    options = spec.options["maze"]
    assert options["lrs_instances"] == 3 and options["noise"]["sarcasm"] == 1.0 and options["noise"]["off_topic"] == 0.0
    for section, fragment in (({"noise": {"shouting": 0.5}}, "unknown noise phenomenon 'shouting'"),
                              ({"noise": {"sarcasm": 1.5}}, "must be between 0 and 1"),
                              ({"hrs_instances": 0}, "hrs_instances"),
                              ({"lrs_task_types": ["poetry"]}, "unknown task type 'poetry'"),
                              ({"max_baseline": 0.1}, "max_baseline"),
                              ({"instances": 4}, "instances")):
        with pytest.raises(UserError, match=fragment) as err:
            build_spec({**THEME, "maze": section}, source="t.yaml")
        assert str(err.value).startswith("t.yaml: maze.") and "\n" not in str(err.value)


def test_the_scenario_stages_ask_one_scenario_per_task_type_in_turn():
    spec = build_spec({**THEME, "maze": {"lrs_scenarios": 3, "lrs_task_types": ["scheduling", "emotion_analysis"],
                                         "hrs_scenarios": 1}}, source="t.yaml")
    dag = plan(("maze",))
    assert dag.get("maze_lrs").params(spec) == {"task_types": ["scheduling", "emotion_analysis", "scheduling"]}
    assert dag.get("maze_lrs").expected_calls(spec) == 3 and dag.get("maze_hrs").expected_calls(spec) == 1
    assert dag.get("maze_instances").expected_calls(spec) == 2 * (3 * 6 + 1 * 6)


def test_review_pages_show_the_sop_as_the_model_reads_it(lrs, hrs):
    lrs_page = render.scenario_markdown(lrs.model_dump(mode="json"))
    assert lrs_page.startswith("# Refill line contact disposition coding\n\nLRS (wide, disposition): 5 categories, "
                               "47 options")
    assert "2 stated exceptions" in lrs_page and "#### Addendum" not in lrs_page and "Addendum" in lrs_page
    assert "2.07" in lrs_page and "Lost or stolen controlled medicine, no police report" in lrs_page
    both = render.scenario_set_markdown({"kind": "LRS", "scenarios": [lrs.model_dump(mode="json")] * 2})
    assert both.startswith("# LRS scenarios: 2") and both.count("## Refill line contact disposition coding") == 2
    hrs_page = render.scenario_markdown(hrs.model_dump(mode="json"))
    assert "```mermaid\ngraph TD" in hrs_page and 'S7 -->|"7.2: reply == no_more_questions"| S2' in hrs_page
    assert "Not a valid scenario" in render.scenario_markdown({"kind": "HRS", "name": "x"})


def test_the_summary_prints_the_set_beside_the_paper_the_noise_table_and_the_baselines():
    names = ("majority", "first_turn", "last_turn", "first_option")
    package = {"export_dir": "/x/maze", "paper": [["instances", "10", "397"]], "stats": {"subtasks": 31, "instances": 10},
               "reference_scores": {"wide": 100.0}, "max_baseline": 0.35,
               "noise_table": [{"phenomenon": "sarcasm", "tagged": 3, "changes_answer": 2}],
               "baselines_pooled": {"LRS": dict.fromkeys(names, 0.2)},
               "baselines": [{"scenario": "wide", "kind": "LRS", "instances": 5,
                              **{n: {"mean": 0.2, "correct": 0} for n in names}}]}
    summary = load_family("maze").summarize({"maze_package": package})
    assert [t.title.split(" (")[0].split(":")[0] for t in summary.tables] == [
        "SOP-Maze set beside the paper", "SOP-Maze noise", "SOP-Maze shortcut baselines"]
    assert summary.tables[1].rows == [("sarcasm", "3", "2")]
    assert summary.tables[2].rows == [("wide", "LRS", "5", *["0.20 (0 exact)"] * 4),
                                      ("all LRS", "LRS", "-", *["0.20"] * 4)]
    assert summary.export == "/x/maze" and "31 subtasks of 10 instances" in summary.lines[0]
    assert load_family("maze").summarize({}).tables == []


def test_a_reviewers_edit_of_a_tree_is_rechecked_and_refused_when_an_option_becomes_unreachable(lrs, pharmacy_context,
                                                                                                 settings):
    original = {"kind": "LRS", "scenarios": [lrs.model_dump(mode="json")]}
    parents = {"context": pharmacy_context.model_dump(mode="json")}
    retitled = json.loads(json.dumps(original))
    retitled["scenarios"][0]["title"] = "Refill line contact disposition codes"
    accepted = check_edit("maze_lrs", json.dumps(retitled), original, parents, settings)
    assert accepted.content["scenarios"][0]["title"] == "Refill line contact disposition codes"
    broken = json.loads(json.dumps(original))
    broken["scenarios"][0]["categories"][0]["options"][5]["when"][-1] = "insurance_status != inactive"   # 1.06 covers 1.05
    with pytest.raises(UserError, match=r"edited maze_lrs fails 1 check\(s\): maze.lrs.reachable: scenario 1 "
                                        r"\(refill_contact_disposition\): .*1.05"):
        check_edit("maze_lrs", json.dumps(broken), original, parents, settings)
