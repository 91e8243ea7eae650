"""How the sop_tools evaluation reads agents' answers: strict where the papers' harnesses are, never guessing."""

from __future__ import annotations

from sopforge.families.sop_tools.evaluation.sop_bench import parse_final_answer
from sopforge.families.sop_tools.evaluation.teller import parse_graph, score_graph
from sopforge.families.sop_tools.evaluation.tod import _task1_answer, _verdict

FIELDS = ["refill_decision", "blocking_reason"]


def test_final_answer_is_the_json_object_of_the_last_block():
    text = ('<final_response>{"refill_decision": "approve"}</final_response> on second thought '
            '<final_response>```json\n{"refill_decision": "deny", "blocking_reason": "x", "note": 1}\n```'
            '</final_response>')
    assert parse_final_answer(text, FIELDS) == {"refill_decision": "deny", "blocking_reason": "x"}
    assert parse_final_answer('<final_output>{"refill_decision": "deny"}</final_output>', FIELDS) == \
        {"refill_decision": "deny"}
    assert parse_final_answer("I would deny it.", FIELDS) is None
    assert parse_final_answer("<final_response>deny</final_response>", FIELDS) is None, "two fields need JSON"
    assert parse_final_answer("<final_response>deny</final_response>", ["refill_decision"]) == {"refill_decision": "deny"}


def test_graph_answers_need_both_blocks_and_score_nodes_and_edges():
    text = "<nodes>a, b\nc</nodes><edges>\na -> b\n- `b` → c\nnot an edge\n</edges>"
    nodes, edges = parse_graph(text)
    assert nodes == {"a", "b", "c"} and edges == {("a", "b"), ("b", "c")}
    assert parse_graph("<nodes>a</nodes>") is None
    score = score_graph({"a", "b", "z"}, {("a", "b")}, ({"a", "b", "c"}, {("a", "b"), ("b", "c")}))
    assert score["nodes"] == {"precision": 0.6667, "recall": 0.6667, "f1": 0.6667}
    assert score["edges"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667}


def test_tod_answers_are_read_strictly():
    assert _task1_answer("<output>do.c1.a2,do.c1,do.c2</output>") == ("do.c1.a2", ["do.c1", "do.c2"])
    assert _task1_answer("<output>the first action</output>") is None
    assert _verdict("<reason>r</reason><compliant>Yes.</compliant>") == "compliant"
    assert _verdict("<compliant>no</compliant>") == "violating"
    assert _verdict("<compliant>yes no</compliant>") is None, "label soup is not an answer"
    assert _verdict("compliant") is None
