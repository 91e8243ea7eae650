"""The SOP-Maze family end to end: the CLI in a subprocess, a real Prefect server, real DuckDB, and every prompt
answered through the exchange folder by the plan-driven scripted model while the run waits (the way an
independent answerer records the example)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from answers import RECORDINGS, THEME, by_stage
from cli_support import recorded_task_runs
from sopforge.families import plan
from sopforge.families.maze.options import MazeSpec
from sopforge.llm.providers._files import read_response
from sopforge.llm.testserver import FakeLLMServer
from sopforge.theme import load_theme_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "families" / "maze"))
from maze_support import FakeModel, load_hrs, load_lrs, scenario_answer  # noqa: E402

pytestmark = pytest.mark.prefect
STAGES = ["context", "maze_lrs", "maze_hrs", "maze_instances", "maze_baselines", "maze_package"]
EXAMPLE = "examples/themes/pharmacy_refills.yaml"


def example_options() -> MazeSpec:
    return MazeSpec.model_validate(load_theme_file(Path(EXAMPLE))[0]["maze"])


class Answerer(threading.Thread):
    """Answers every request file that appears in the exchange folder, as an independent answerer would."""

    def __init__(self, folder: Path, fake: FakeModel):
        super().__init__(daemon=True)
        self.folder, self.fake, self.stop = folder, fake, threading.Event()
        self.answered: list[str] = []

    def answer(self, stem: str) -> str:
        if "__context__" in stem:
            return read_response(RECORDINGS / "pharmacy_refills__context__main__a1.response.md")[1]
        return self.fake(type("Request", (), {"call_key": stem.replace("__", "/")})())

    def run(self) -> None:
        while not self.stop.wait(0.1):
            for request in sorted(self.folder.glob("*.request.md")):
                stem = request.name.removesuffix(".request.md")
                response = self.folder / f"{stem}.response.md"
                if not response.exists():
                    tmp = response.with_suffix(".tmp")
                    tmp.write_text(self.answer(stem), encoding="utf-8")
                    tmp.replace(response)
                    self.answered.append(stem)


def intents():
    return load_lrs("intent_recognition").model_copy(update={"name": "refill_intents",
                                                             "report": ["request_type", "days_since_last_fill"]})


def db(cli) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True)


def test_the_example_builds_several_scenarios_per_kind_with_subtasks_and_a_release_gate(cli, prefect_api, tmp_path):
    opts = example_options()
    fake = FakeModel([load_lrs(), intents()], [load_hrs("inbound_service_line"),
                                               load_hrs("outbound_follow_up").model_copy(update={"name": "refill_callback"})],
                     opts)
    folder = tmp_path / "exchange"
    folder.mkdir()
    answerer = Answerer(folder, fake)
    answerer.start()
    env = {"SOPFORGE_EXCHANGE_DIR": str(folder), "SOPFORGE_EXCHANGE_WAIT_SECONDS": "60"}
    try:
        first = cli("generate", EXAMPLE, "--provider", "exchange", "--family", "maze", "--json", env=env, timeout=600)
    finally:
        answerer.stop.set()
    assert first.code == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["status"] == "succeeded" and [s["stage"] for s in summary["stages"]] == STAGES
    instances = opts.lrs_scenarios * opts.lrs_instances + opts.hrs_scenarios * opts.hrs_instances
    # the context, one ask per scenario, and per instance a writer, a reader and the two shortcut readers (the
    # scripted writer's first turns can repeat word for word, and a repeated prompt is answered from the cache)
    assert summary["llm_calls"] == len(answerer.answered)
    assert 1 + 4 + 3 * instances < summary["llm_calls"] <= 1 + 4 + 4 * instances
    maze = summary["families"]["maze"]
    paper = {row[0]: row[1:] for row in maze["tables"][0]["rows"]}
    assert paper["scenarios (LRS / HRS)"] == ["4 (2 / 2)", "23 (13 / 10)"]
    assert paper["instances (dialogues)"] == [str(instances), "397"]
    assert [t["title"].split(":")[0].split(" (")[0] for t in maze["tables"]] == [
        "SOP-Maze set beside the paper", "SOP-Maze noise", "SOP-Maze shortcut baselines"]
    run_id = summary["run_id"]

    with db(cli) as con:
        assert con.execute("SELECT count(*) FROM validations WHERE NOT passed AND severity = 'error'").fetchone() == (0,)
        calls = dict(con.execute("SELECT stage, count(*) FROM llm_calls GROUP BY 1").fetchall())
        assert {k: v for k, v in calls.items() if k != "maze_baselines"} == {
            "context": 1, "maze_lrs": 2, "maze_hrs": 2, "maze_instances": 2 * instances}
        release = con.execute("SELECT message FROM validations WHERE check_name = 'maze_package.release'").fetchone()
        assert "re-executed from the exported tree" in release[0]
        gates = con.execute("SELECT a.stage, r.decision FROM reviews r JOIN artifacts a ON a.id = r.artifact_id "
                            "ORDER BY a.stage").fetchall()
        assert gates == [("maze_hrs", "approve"), ("maze_lrs", "approve"), ("maze_package", "approve")]

    export = cli.home / "exports" / run_id / "maze"
    metadata = json.loads((export / "metadata.json").read_text())
    stats = metadata["statistics"]
    assert stats["instances"] == instances and stats["subtasks"] > instances
    assert set(stats["task_types"].values()) == {"disposition", "intent_recognition", "inbound_service_line",
                                                 "outbound_follow_up"}
    noisy = metadata["noise_table"][-1]
    assert noisy["phenomenon"] == "instances with noise" and 2 * noisy["changes_answer"] >= noisy["tagged"] > 0
    assert all(m < 0.35 for means in metadata["baselines_pooled"].values() for m in means.values())
    assert len(pq.read_table(export / "subtasks.parquet")) == stats["subtasks"]
    for scenario in ("refill_contact_disposition", "refill_intents", "automated_refill_line", "refill_callback"):
        assert (export / scenario / "prompt_template.txt").read_text().startswith("【Background】")
        assert json.loads((export / scenario / "schema.json").read_text())["additionalProperties"] is False

    # Prefect drew the family's real graph: the two scenario stages wait only for the context
    flow_runs = httpx.post(f"{prefect_api}/flow_runs/filter", json={"flow_runs": {"name": {"any_": [run_id]}}},
                           timeout=30).json()
    task_runs = recorded_task_runs(prefect_api, flow_runs[0]["id"], STAGES)
    stage_runs = {t["name"]: t for t in task_runs if t["name"] in STAGES}
    name_of = {t["id"]: t["name"] for t in task_runs}
    drawn = {name: sorted(name_of[i["id"]] for i in t["task_inputs"].get("wait_for", [])) for name, t in stage_runs.items()}
    assert drawn == {s.name: sorted(s.parents) for s in plan(("maze",)).stages}

    again = cli("rerun", run_id, "--from", "maze_package", "--json", env=env)
    assert again.code == 0, again.stderr
    statuses = {s["stage"]: s["status"] for s in json.loads(again.stdout)["stages"]}
    assert statuses == {**dict.fromkeys(STAGES[:5], "reused"), "maze_package": "generated"}


def test_a_scenario_with_an_unreachable_option_stops_the_family_with_one_line(cli):
    bad = load_lrs()
    bad.option("1.06")[1].when[-1] = "insurance_status != inactive"   # 1.06 now holds whenever 1.05 does
    env = {"OPENAI_API_KEY": "sk-test", "SOPFORGE_MAX_ATTEMPTS": "2"}
    with FakeLLMServer(by_stage({"maze_lrs": scenario_answer(bad), "maze_hrs": scenario_answer(load_hrs())})) as server:
        failed = cli("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "maze",
                     "--provider", "openai", "--model", "m", "--base-url", server.openai_base_url, env=env)
    assert failed.code == 1
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "maze_lrs: scenario 1 (disposition): check maze.lrs.reachable failed after 2 attempts" \
        in errors[0]
    assert "1.05: whenever it holds, so does 1.06" in errors[0]
    with db(cli) as con:
        stages = {s for (s,) in con.execute("SELECT stage FROM artifacts").fetchall()}
        assert stages <= {"context", "maze_hrs"} and "maze_instances" not in stages
    assert not (cli.home / "exports").exists()
