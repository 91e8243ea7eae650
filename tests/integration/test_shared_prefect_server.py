"""One Prefect server per SOPFORGE_HOME, started by the first command and shared by the others.

Issue 15: two generate processes on one home each started an ephemeral Prefect server on the same
database, and one exited 1 with ObjectNotFound. Now the first starts the home's background server
(the second waits for it instead of starting its own) and both report to it.
"""

from __future__ import annotations

import json
import os
import subprocess

import httpx
import pytest

from cli_support import ROOT, SOPFORGE, quiet_env, recorded_task_runs, stop_home_server
from sopforge.families import plan

DEMO = "examples/themes/pharmacy_refills.yaml"
STAGES = [stage.name for stage in plan(("maze",)).stages]


@pytest.fixture
def home(tmp_path):
    """A home whose background Prefect server is stopped at the end, whatever happened."""
    home = tmp_path / "home"
    yield home
    stop_home_server(home)


def sopforge(home, *args: str) -> subprocess.Popen:
    # No PREFECT_API_URL: each command finds (or starts) the home's own server.
    env = quiet_env(SOPFORGE_HOME=str(home), SOPFORGE_PREFECT_IDLE_SECONDS="60")
    return subprocess.Popen([*SOPFORGE, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finished(proc: subprocess.Popen) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=600)
    return proc.returncode, json.loads(out) if proc.returncode == 0 else {}, err


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_generates_on_one_home_share_one_prefect_server_and_both_complete(home):
    # SOP-Maze alone: the cheapest family's chain is as much a flow run as every family's (a third of the CPU)
    generate = ("generate", DEMO, "--family", "maze", "--json")
    first, second = sopforge(home, *generate), sopforge(home, *generate)
    (code_a, run_a, err_a), (code_b, run_b, err_b) = finished(first), finished(second)
    assert code_a == 0, err_a
    assert code_b == 0, err_b
    assert run_a["status"] == run_b["status"] == "succeeded"

    server = json.loads((home / "prefect" / "server.json").read_text())
    api = server["api_url"]
    # Started from the machine's template database (when it has one), the server skipped registering
    # Prefect's block types: the template holds them.
    assert httpx.get(f"{api}/block_types/slug/secret", timeout=30).status_code == 200
    flow_runs = httpx.post(f"{api}/flow_runs/filter", json={
        "flow_runs": {"name": {"any_": [run_a["run_id"], run_b["run_id"]]}}}, timeout=30).json()
    assert sorted(fr["state_type"] for fr in flow_runs) == ["COMPLETED", "COMPLETED"]
    for flow_run in flow_runs:
        task_runs = recorded_task_runs(api, flow_run["id"], STAGES)
        stages = {t["name"]: t["state_type"] for t in task_runs if ":" not in t["name"]}
        assert stages.keys() == set(STAGES) and set(stages.values()) == {"COMPLETED"}, stages

    # A later command reuses the same server: no second start-up.
    code, rerun, err = finished(sopforge(home, "rerun", run_a["run_id"], "--json"))
    assert code == 0, err
    assert rerun["llm_calls"] == 0
    assert {s["status"] for s in rerun["stages"] if not s["stage"].endswith("package")} == {"reused"}
    assert json.loads((home / "prefect" / "server.json").read_text())["pid"] == server["pid"]


@pytest.mark.slow
def test_the_starting_command_points_prefect_at_the_server_before_it_answers(home, monkeypatch):
    """The command that starts the home's server chooses its port, so it can import Prefect (and do the
    rest of its start-up) while the server comes up, and waits only before the flow run."""
    from sopforge.orchestration import prefect_env
    from sopforge.orchestration.prefect_server import healthy
    from sopforge.settings import Settings

    # Whatever begin_prefect sets in this process's environment is undone after the test.
    for key in {*prefect_env._QUIET_DEFAULTS, "PREFECT_API_URL", "PREFECT_HOME",
                *(k for k in os.environ if k.startswith("PREFECT_"))}:
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    monkeypatch.setattr(prefect_env, "_early_url", None)
    monkeypatch.setenv("SOPFORGE_PREFECT_IDLE_SECONDS", "30")
    settings = Settings(home=home)
    prefect_env.begin_prefect(settings)
    url = os.environ["PREFECT_API_URL"]
    assert url.startswith("http://127.0.0.1:") and not healthy(url)  # set before the server answers
    assert prefect_env.configure_prefect(settings, shared_server=True).startswith(
        f"Prefect server at {url.removesuffix('/api')}")  # no wait, no other server
    prefect_env.ready_prefect(settings)
    assert healthy(url)
    assert json.loads((home / "prefect" / "server.json").read_text())["api_url"] == url
