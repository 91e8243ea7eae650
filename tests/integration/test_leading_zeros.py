"""A domain whose identifiers have leading zeros succeeds end to end, export included.

The model first writes prescription numbers the way a pharmacy system prints them, digits with
a leading zero (``0775353``). Before issue 15 every stage accepted them and the run failed at
``package``, after every LLM call was paid for: pandas reads the exported CSV back as the number
775353. Now the schema and dataset stages quote the problem to the model, which answers with a
prefix (``RX-0775353``), and the exported CSV, read the way SOP-Bench's harness reads it
(``pandas.read_csv`` with no options), keeps every zero.
"""

from __future__ import annotations

import json
import re

import duckdb
import pandas as pd
import pytest

from answers import RECORDED_CALLS, THEME, by_stage, prompt_text, recorded_answer, stage_of
from sopforge.llm.testserver import FakeLLMServer

pytestmark = pytest.mark.prefect
# The recorded rows are Python literals (single quotes); JSON-style double quotes match too.
NUMBER = re.compile(r"""(?P<q>["'])prescription_number(?P=q): (?P=q)RX-(?P<n>\d+)(?P=q)""")


def users(body: dict) -> int:
    return sum(m["role"] == "user" for m in body["messages"])


def test_identifiers_with_leading_zeros_are_fixed_upstream_and_survive_the_export(cli):
    recorded = by_stage()
    schema_line = 'pharmacy prescription number the refill is requested against (e.g., "RX-7734102")'
    assert schema_line in recorded_answer("schema")
    assert all(len(NUMBER.findall(recorded_answer("dataset", b))) == 25 for b in ("batch1", "batch2"))
    feedback_seen: dict[str, str] = {}

    def respond(body: dict, protocol: str) -> str:
        stage, answer = stage_of(prompt_text(body, protocol)), recorded(body, protocol)
        if users(body) > 1:  # a re-ask: keep what it says, answer with the fix
            feedback_seen[stage] = body["messages"][-1]["content"]
        if stage == "schema" and users(body) == 1:
            return answer.replace(schema_line, schema_line.replace("RX-7734102", "07734102"))
        if stage == "dataset":
            prefix = "" if users(body) == 1 else "RX-"
            return NUMBER.sub(rf"\g<q>prescription_number\g<q>: \g<q>{prefix}0\g<n>\g<q>", answer)
        return answer

    with FakeLLMServer(respond) as server:
        result = cli("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools", "--provider", "openai",
                     "--model", "m", "--base-url", server.openai_base_url, "--json", env={"OPENAI_API_KEY": "sk-test"})
    assert result.code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["status"] == "succeeded" and summary["llm_calls"] == RECORDED_CALLS + 2  # schema, batch 2 (batch 1: twice already)

    assert "schema.values_survive_csv" in feedback_seen["schema"] and "07734102" in feedback_seen["schema"]
    assert "dataset.values_survive_csv" in feedback_seen["dataset"]
    assert "prescription_number" in feedback_seen["dataset"] and "read back by pandas as" in feedback_seen["dataset"]

    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        stored = [n for (n,) in con.execute("SELECT data->>'$.prescription_number' FROM dataset_rows "
                                            "ORDER BY ordinal").fetchall()]
    assert len(stored) == 50 and all(re.fullmatch(r"RX-0\d{7}", n) for n in stored)
    csv = cli.home / "exports" / summary["run_id"] / "pharmacy_refills" / "test_set_with_outputs.csv"
    read = pd.read_csv(csv)  # exactly how SOP-Bench's loader reads it
    assert sorted(read["prescription_number"].tolist()) == sorted(stored)
