"""The replay driver's state tracking, run in-process on small Managers (the sandbox only hosts it).

The driver copies only what changed in ``database_state()`` after each call. These tests pin what a
copy of the whole state after every call gave: the same per-call diffs, the same final diff, values as
JSON reads them back, and the same error for a state JSON cannot hold.
"""

from __future__ import annotations

import json
import math
import sys
import types

import pytest

from sopforge.families.sop_tools.verify.replay import DRIVER_SOURCE


class Ledger:
    """Appends a record per ``add`` call, edits one in place on ``edit``, reads on ``get``."""

    def __init__(self):
        self.tables = {"entries": {}, "audit": {}}

    def database_state(self):
        return self.tables  # the live tables, not a copy: the driver must not share them

    def process_tool_call(self, tool, args):
        if tool == "add":
            self.tables["entries"][args["id"]] = {"id": args["id"], "tags": ("new", args["id"]), "score": args.get("score")}
            return {"added": args["id"]}
        if tool == "edit":
            self.tables["entries"][args["id"]]["tags"] = ("edited",)
            return {"edited": args["id"]}
        return {"entries": len(self.tables["entries"])}


def driver(manager_class) -> types.SimpleNamespace:
    """The driver's functions, with ``manager_class`` as the folder's Manager."""
    tools = types.ModuleType("tools")
    tools.LedgerManager = manager_class
    namespace: dict = {}
    saved = sys.modules.get("tools")
    sys.modules["tools"] = tools
    try:
        exec(compile(DRIVER_SOURCE, "_sopforge_replay.py", "exec"), namespace)
    finally:
        if saved is None:
            sys.modules.pop("tools")
        else:
            sys.modules["tools"] = saved
    return types.SimpleNamespace(**namespace)


def whole_copy_replay(manager, steps):
    """Per-call and final diffs as a JSON copy of the whole state after every call gives them."""
    start = before = json.loads(json.dumps(manager.database_state()))
    per_call = []
    for step in steps:
        manager.process_tool_call(step["tool"], step["args"])
        after = json.loads(json.dumps(manager.database_state()))
        per_call.append(_diff(before, after))
        before = after
    return per_call, _diff(start, before)


def _diff(before, after):
    out = {}
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table) or {}, after.get(table) or {}
        changed = {k: new.get(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}
        if changed:
            out[table] = changed
    return out


STEPS = [{"tool": "add", "args": {"id": "a"}}, {"tool": "get", "args": {}}, {"tool": "add", "args": {"id": "b"}},
         {"tool": "edit", "args": {"id": "a"}}, {"tool": "get", "args": {}}, {"tool": "add", "args": {"id": "c"}}]


def test_diffs_match_a_whole_copy_after_every_call_with_tuples_and_in_place_edits():
    result = driver(Ledger).replay(STEPS, True)
    per_call, final = whole_copy_replay(Ledger(), STEPS)
    assert [entry.get("state_diff", {}) for entry in result["calls"]] == per_call
    assert result["state_diff"] == final
    # Tuples read back as lists; an unchanged call records no diff though its tuples never compare equal.
    assert per_call[0] == {"entries": {"a": {"id": "a", "tags": ["new", "a"], "score": None}}}
    assert per_call[1] == {} and per_call[3] == {"entries": {"a": {"id": "a", "tags": ["edited"], "score": None}}}
    assert result["stateful"] and result["tables"] == ["audit", "entries"] and result["initial_records"] == 0


def test_a_shared_manager_carries_its_state_from_plan_to_plan():
    functions = driver(Ledger)
    first = functions.replay(STEPS[:3], "pool")
    second = functions.replay([{"tool": "add", "args": {"id": "d"}}], "pool")
    assert sorted(first["state_diff"]["entries"]) == ["a", "b"]
    assert second["initial_records"] == 2 and list(second["state_diff"]["entries"]) == ["d"]


def test_nan_and_number_keys_read_back_as_json_writes_them():
    class Odd(Ledger):
        def database_state(self):
            return {**self.tables, 7: {"k": 1}}

    steps = [{"tool": "add", "args": {"id": "x", "score": math.nan}}, {"tool": "get", "args": {}},
             {"tool": "add", "args": {"id": "y", "score": 1.5}}]
    for manager in (Odd, Ledger):  # number keys take the whole copy; string keys copy what changed
        result = driver(manager).replay(steps, True)
        calls = result["calls"]
        assert math.isnan(calls[0]["state_diff"]["entries"]["x"]["score"])
        # NaN is not equal to itself, but JSON reads every NaN back as one object: the read changed nothing.
        assert "state_diff" not in calls[1] and list(calls[2]["state_diff"]["entries"]) == ["y"]
        assert sorted(result["state_diff"]["entries"]) == ["x", "y"]
    assert result["tables"] == ["audit", "entries"]
    assert driver(Odd).replay(steps, True)["tables"] == ["7", "audit", "entries"]


def test_a_state_json_cannot_hold_is_an_error_naming_the_table():
    class Unencodable(Ledger):
        def process_tool_call(self, tool, args):
            self.tables["audit"]["x"] = {"seen": {1, 2}}
            return {}

    with pytest.raises(TypeError, match=r"database_state\(\) must return a dict of tables of JSON records: audit holds"):
        driver(Unencodable).replay([{"tool": "add", "args": {"id": "x"}}], True)
