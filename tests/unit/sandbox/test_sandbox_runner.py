"""Running LLM-written tools in the sandbox: results, limits and the runtime guard."""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sopforge.errors import UserError
from sopforge.sandbox import SandboxLimits, run_in_sandbox
from sopforge.sandbox.accounting import TaskGroup

HAS_CGROUP = (lambda group: group is not None and (group.close() or True))(TaskGroup.create())

CSV = """\
application_id,applicant_name,requested_amount,credit_score,dti_ratio,final_decision
A-0001,Ada Park,12000,742,0.21,approve
A-0002,Ben Ortiz,30000,655,0.41,refer
A-0003,Cara Nilsen,8000,590,0.30,decline
A-0004,Dev Rao,45000,710,0.44,refer
"""

LOAN_TOOLS = '''\
import csv
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


class LoanTriageManager:
    def __init__(self):
        with open(os.path.join(_HERE, "test_set_with_outputs.csv"), newline="") as f:
            self._rows = {r["application_id"]: r for r in csv.DictReader(f)}

    def _row(self, application_id):
        if application_id not in self._rows:
            raise ValueError(f"unknown application_id {application_id}")
        return self._rows[application_id]

    def process_tool_call(self, tool_name, tool_input):
        if tool_name == "getCreditScore":
            return {"credit_score": int(self._row(tool_input["application_id"])["credit_score"])}
        if tool_name == "getDebtToIncome":
            return {"dti_ratio": float(self._row(tool_input["application_id"])["dti_ratio"])}
        raise ValueError(f"Invalid tool_name: {tool_name}")
'''

FAST = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_bytes=512 * 1024 ** 2)


def call(tool: str, **tool_input) -> dict:
    return {"tool": tool, "input": tool_input}


@pytest.fixture
def loan_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "loan_triage"
    folder.mkdir()
    (folder / "test_set_with_outputs.csv").write_text(CSV)
    (folder / "tools.py").write_text(LOAN_TOOLS)
    return folder


def tool_folder(tmp_path: Path, body: str, *, header: str = "") -> Path:
    """A folder whose XManager.process_tool_call runs ``body`` (tool_name/tool_input in scope)."""
    folder = tmp_path / "tools_under_test"
    folder.mkdir()
    source = header + "class XManager:\n    def process_tool_call(self, tool_name, tool_input):\n"
    (folder / "tools.py").write_text(source + textwrap.indent(textwrap.dedent(body), " " * 8))
    return folder


def run_one(folder: Path, *, limits: SandboxLimits = FAST, skip_policy: bool = True, groups=None):
    payload = {"op": "call_tools", "groups": groups or [[call("t")]]}
    return run_in_sandbox(folder, "tools.py", payload, limits=limits, skip_policy=skip_policy)


def test_a_well_behaved_manager_returns_correct_json_results(loan_folder: Path):
    groups = [[call("getCreditScore", application_id="A-0001"), call("getDebtToIncome", application_id="A-0002")],
              [call("getCreditScore", application_id="A-9999")]]
    result = run_in_sandbox(loan_folder, "tools.py", {"op": "call_tools", "groups": groups}, limits=FAST)
    assert result.ok, result.error_message
    assert result.completed == 2 and [len(g) for g in result.results] == [2, 1]
    first, second = result.results[0]
    assert (first.result, first.json_ok) == ({"credit_score": 742}, True)
    assert (second.result, second.json_ok) == ({"dti_ratio": 0.41}, True)
    failed = result.results[1][0]
    assert not failed.ok and failed.error.type == "ValueError"
    assert failed.error.message == "unknown application_id A-9999" and failed.error.line == 14
    assert [c.passed for c in result.checks] == [True]
    assert result.layers == ["staging", "ast_policy", "bubblewrap", "unprivileged_uid", "seccomp", "rlimits",
                             *(["pids_cgroup"] if HAS_CGROUP else []), "audit_hook", "wall_clock"]
    assert result.peak_rss_bytes and result.peak_rss_bytes > 1024 ** 2


def test_code_failing_the_ast_policy_never_starts(tmp_path: Path):
    folder = tool_folder(tmp_path, "return subprocess.run(['true']).returncode\n", header="import subprocess\n")
    result = run_one(folder, skip_policy=False)
    assert result.error_kind == "policy_violation" and result.exit_code is None and result.results == []
    assert result.layers == ["staging", "ast_policy"]
    assert result.error_message.startswith("tools.py: line 1: import of 'subprocess' is not allowed "
                                           "(tools may not start processes or threads); line 4: subprocess.run")


def test_runtime_guard_stops_writes_outside_the_sandbox(tmp_path: Path):
    target = tmp_path / "escaped.txt"
    folder = tool_folder(tmp_path, f"open({str(target)!r}, 'w').write('x')\nreturn 1\n")
    result = run_one(folder)
    assert result.error_kind == "policy_violation" and "opening" in result.error_message
    assert not target.exists()


def test_runtime_guard_cannot_be_swallowed_by_user_code(tmp_path: Path):
    body = """\
        try:
            getattr(__builtins__, 'op' + 'en')('/etc/hostname')
        except Exception:
            pass
        try:
            open('/etc/hostname').read()
        except Exception:
            pass
        return 'escaped'
        """
    result = run_one(tool_folder(tmp_path, body))
    assert result.error_kind == "policy_violation"
    assert "reading '/etc/hostname' outside the sandbox folder" in result.error_message
    assert result.results == []


@pytest.mark.parametrize(("body", "event"), [
    ("import subprocess\nreturn subprocess.run(['/bin/true']).returncode\n", "import"),
    ("import os\nreturn os.system('true')\n", "os.system"),
])
def test_runtime_guard_stops_starting_a_process(tmp_path: Path, body: str, event: str):
    result = run_one(tool_folder(tmp_path, body))
    assert result.error_kind == "policy_violation" and f"stopped '{event}'" in result.error_message


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.3)
    yield server
    server.close()


def test_runtime_guard_stops_a_socket_to_localhost(tmp_path: Path, listener: socket.socket):
    port = listener.getsockname()[1]
    result = run_one(tool_folder(tmp_path, f"import socket\nsocket.create_connection(('127.0.0.1', {port}))\n"))
    assert result.error_kind == "policy_violation" and "socket" in result.error_message
    with pytest.raises(TimeoutError):
        listener.accept()


def test_pandas_works_under_the_limits_and_its_preloaded_modules_stay_guarded(tmp_path: Path,
                                                                              listener: socket.socket):
    # pandas imports socket and subprocess itself, so these bypass the guard's import check:
    # the socket event and the neutralized fork_exec must stop them instead.
    header = ("import os\nimport pandas as pd\n_HERE = os.path.dirname(os.path.abspath(__file__))\n")
    body = f"""\
        df = pd.read_csv(os.path.join(_HERE, "test_set_with_outputs.csv"))
        if tool_name == "mean":
            return {{"mean": float(df.credit_score.mean()), "raw": df.credit_score.iloc[0]}}
        if tool_name == "net":
            import socket
            socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}))
        if tool_name == "spawn":
            import _posixsubprocess
            _posixsubprocess.fork_exec()
        """
    folder = tool_folder(tmp_path, body, header=header)
    (folder / "test_set_with_outputs.csv").write_text(CSV)
    ok = run_one(folder, groups=[[call("mean")]], limits=SandboxLimits(wall_seconds=60, memory_bytes=1024 ** 3))
    assert ok.ok, ok.error_message + ok.stderr_tail
    outcome = ok.results[0][0]
    assert outcome.ok and not outcome.json_ok and outcome.unencodable == "$.raw: numpy.int64"
    for tool, event in (("net", "socket."), ("spawn", "subprocess.Popen': subprocess.Popen('_posixsubprocess.fork_exec'")):
        stopped = run_one(folder, groups=[[call(tool)]], limits=SandboxLimits(wall_seconds=60))
        assert stopped.error_kind == "policy_violation" and f"stopped '{event}" in stopped.error_message
    with pytest.raises(TimeoutError):
        listener.accept()


def test_an_infinite_loop_hits_the_cpu_limit_and_earlier_groups_survive(tmp_path: Path):
    folder = tool_folder(tmp_path, "while tool_name == 'spin':\n    pass\nreturn {'done': tool_name}\n")
    groups = [[call("a")], [call("b")], [call("spin")], [call("c")]]
    started = time.monotonic()
    result = run_one(folder, groups=groups, limits=SandboxLimits(cpu_seconds=1, wall_seconds=20))
    assert result.error_kind == "cpu_limit" and time.monotonic() - started < 10
    assert result.completed == 2 and [g[0].result for g in result.results] == [{"done": "a"}, {"done": "b"}]


def test_a_blocked_process_is_killed_at_the_wall_clock_limit(tmp_path: Path):
    folder = tool_folder(tmp_path, "import time\ntime.sleep(60)\n")
    started = time.monotonic()
    result = run_one(folder, limits=SandboxLimits(wall_seconds=1.5, cpu_seconds=30))
    # Killed either way: bubblewrap itself by SIGKILL (-9), or the process inside it, which bubblewrap,
    # still alive for an instant, reports as 128 + 9 (seen under load).
    assert result.error_kind == "timeout" and result.exit_code in (-9, 137)
    assert 1.5 <= time.monotonic() - started < 8


@pytest.mark.parametrize("body", [
    "hog = []\nwhile True:\n    hog.append(bytearray(10 ** 7))\n",
    "return len('x' * 2 ** 34)\n",
])
def test_a_memory_bomb_hits_the_memory_limit(tmp_path: Path, body: str):
    result = run_one(tool_folder(tmp_path, body), limits=SandboxLimits(memory_bytes=256 * 1024 ** 2))
    assert result.error_kind == "memory_limit", (result.error_message, result.stderr_tail)


def test_stray_prints_do_not_break_the_protocol(loan_folder: Path):
    tools = loan_folder / "tools.py"
    tools.write_text('print("loading tools")\n' + tools.read_text().replace(
        "    def process_tool_call(self, tool_name, tool_input):\n",
        "    def process_tool_call(self, tool_name, tool_input):\n"
        "        print('0' * 32 + ' R {\"i\": 7}')\n        print('}{ not json')\n"))
    groups = [[call("getCreditScore", application_id="A-0004")]] * 3
    result = run_in_sandbox(loan_folder, "tools.py", {"op": "call_tools", "groups": groups}, limits=FAST)
    assert result.ok, result.error_message
    assert [g[0].result for g in result.results] == [{"credit_score": 710}] * 3
    assert "loading tools" in result.stderr_tail and "}{ not json" in result.stderr_tail


def test_non_json_results_are_reported_and_large_ones_omitted(tmp_path: Path):
    header = "import datetime\n"
    body = """\
        if tool_name == "date":
            return {"when": datetime.date(2024, 1, 1)}
        if tool_name == "set":
            return {"tags": [1, {2, 3}]}
        if tool_name == "big":
            return "x" * 5000
        return {"fine": [1, 2.5, None, "s", True]}
        """
    groups = [[call("date"), call("set"), call("big"), call("fine")]]
    result = run_one(tool_folder(tmp_path, body, header=header), groups=groups,
                     limits=SandboxLimits(max_result_bytes=1024, wall_seconds=20))
    date, tags, big, fine = result.results[0]
    assert result.ok and all(o.ok for o in result.results[0])
    assert (date.json_ok, date.unencodable) == (False, "$.when: datetime.date")
    assert (tags.json_ok, tags.unencodable) == (False, "$.tags[1]: builtins.set")
    assert big.json_ok and big.omitted and big.result is None and big.result_bytes == 5002
    assert fine.json_ok and fine.result == {"fine": [1, 2.5, None, "s", True]}


def test_thousands_of_calls_run_in_one_process(loan_folder: Path):
    ids = ["A-0001", "A-0002", "A-0003", "A-0004"]
    groups = [[call("getCreditScore" if j % 2 else "getDebtToIncome", application_id=ids[(i + j) % 4])
               for j in range(5)] for i in range(1000)]
    started = time.monotonic()
    result = run_in_sandbox(loan_folder, "tools.py", {"op": "call_tools", "groups": groups}, limits=FAST)
    elapsed = time.monotonic() - started
    print(f"\n5000 tool calls in one sandbox process: {elapsed:.2f} s, {5000 / elapsed:,.0f} calls/s "
          f"(child wall {result.wall_seconds:.2f} s)")
    assert result.ok and result.completed == 1000
    assert sum(o.ok and o.json_ok for g in result.results for o in g) == 5000


def test_run_function_records_the_reference_procedures_tool_calls(loan_folder: Path):
    (loan_folder / "reference.py").write_text(textwrap.dedent("""\
        def decide(tools, application_id):
            score = tools.process_tool_call("getCreditScore", {"application_id": application_id})["credit_score"]
            dti = tools.getDebtToIncome(application_id=application_id)["dti_ratio"]
            return {"final_decision": "approve" if score >= 700 and dti <= 0.35 else "refer"}
        """))
    payload = {"op": "run_function", "function": "decide", "tools_entry": "tools.py",
               "calls": [{"args": ["A-0001"]}, {"kwargs": {"application_id": "A-0009"}}]}
    result = run_in_sandbox(loan_folder, "reference.py", payload, limits=FAST)
    assert result.ok, result.error_message
    approve, unknown = result.results
    assert approve.result == {"final_decision": "approve"}
    assert [(c.tool, c.input, c.ok) for c in approve.tool_calls] == [
        ("getCreditScore", {"application_id": "A-0001"}, True), ("getDebtToIncome", {"application_id": "A-0001"}, True)]
    assert not unknown.ok and [c.ok for c in unknown.tool_calls] == [False]


def test_per_group_instances_do_not_share_state(tmp_path: Path):
    folder = tmp_path / "counter"
    folder.mkdir()
    (folder / "tools.py").write_text(textwrap.dedent("""\
        class CounterManager:
            def __init__(self):
                self.n = 0
            def process_tool_call(self, tool_name, tool_input):
                self.n += 1
                return {"n": self.n}
        """))
    groups = [[call("bump"), call("bump")]] * 2
    for instance, expected in (("shared", [2, 4]), ("per_group", [2, 2])):
        result = run_in_sandbox(folder, "tools.py", {"op": "call_tools", "groups": groups, "instance": instance},
                                limits=FAST)
        assert [g[-1].result["n"] for g in result.results] == expected


@pytest.mark.parametrize(("source", "message"), [
    ("class Helper:\n    pass\n", "defines no public name ending in 'Manager'"),
    ("x = 1\nraise RuntimeError('boom at import')\n", "RuntimeError at line 2: boom at import"),
])
def test_unloadable_modules_are_load_errors(tmp_path: Path, source: str, message: str):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "tools.py").write_text(source)
    result = run_one(folder, skip_policy=False)
    assert result.error_kind == "load_error" and message in result.error_message


def test_entries_outside_the_folder_are_rejected(loan_folder: Path):
    with pytest.raises(UserError):
        run_in_sandbox(loan_folder, "../tools.py", {"op": "call_tools", "groups": []})
    with pytest.raises(UserError):
        run_in_sandbox(loan_folder, "tools.py", {"op": "call_everything"})
    with pytest.raises(UserError, match=r"groups\[1\]"):
        run_in_sandbox(loan_folder, "tools.py", {"op": "call_tools", "groups": [[call("a")], [{"input": {}}]]})


@pytest.mark.parametrize(("body", "stopped"), [
    ("import socket\ntry:\n    socket.socket(socket.AF_UNIX)\nexcept PermissionError:\n    return 'unix refused'\n", False),
    ("import os\nos.fork()\nreturn 'forked'\n", True),
    ("import socket\nsocket.socket(socket.AF_INET)\nreturn 'socket'\n", True),
    ("import ctypes\nreturn ctypes.CDLL(None).inotify_init1(0)\n", True),
])
def test_the_seccomp_filter_kills_processes_sockets_and_inotify(tmp_path: Path, body: str, stopped: bool):
    # With the audit hook off, the kernel filter alone decides, and a kill is reported as a violation.
    result = run_in_sandbox(tool_folder(tmp_path, body), "tools.py", {"op": "call_tools", "groups": [[call("t")]]},
                            limits=FAST, skip_policy=True, skip_guard=True)
    if stopped:
        assert result.error_kind == "policy_violation" and "seccomp" in result.error_message
    else:
        assert result.ok and result.results[0][0].result == "unix refused", result.error_message


THREAD = "import threading\nt = threading.Thread(target=len, args=('x',))\nt.start()\nt.join()\nreturn 'thread ok'\n"


@pytest.mark.parametrize("guard", [True, False])
def test_a_thread_is_a_violation_unless_the_limits_allow_one(tmp_path: Path, guard: bool):
    folder = tool_folder(tmp_path, THREAD)
    payload = {"op": "call_tools", "groups": [[call("t")]]}
    refused = run_in_sandbox(folder, "tools.py", payload, limits=FAST, skip_policy=True, skip_guard=not guard)
    if guard or HAS_CGROUP:  # the audit hook's stub, or the cgroup's count of refused tasks
        assert refused.error_kind == "policy_violation", refused.error_message
        assert ("thread" in refused.error_message or "processes or threads" in refused.error_message)
    else:  # RLIMIT_NPROC alone refuses it without the parent seeing it
        assert not refused.results[0][0].ok
    allowed = run_in_sandbox(folder, "tools.py", payload, limits=FAST.model_copy(update={"max_processes": 1}),
                             skip_policy=True, skip_guard=not guard)
    assert allowed.ok and allowed.results[0][0].result == "thread ok", allowed.error_message


def test_seccomp_programs_exist_for_x86_64_and_aarch64_only():
    from sopforge.sandbox.seccomp import filter_program

    for machine in ("x86_64", "aarch64"):
        program = filter_program(machine)
        assert program and len(program) % 8 == 0 and len(program) // 8 < 4096  # BPF_MAXINSNS
    assert filter_program("riscv64") is None


DRIVER = '''\
import tools


def first_manager_name(_):
    return sorted(n for n in dir(tools) if n.endswith("Manager"))[0]


def call_by_name(_):
    return getattr(tools, first_manager_name(None))().process_tool_call("getCreditScore", {"application_id": "A-0001"})
'''


def test_only_the_declared_driver_text_skips_the_policy_and_tools_are_still_checked(loan_folder: Path):
    (loan_folder / "driver.py").write_text(DRIVER)
    payload = {"op": "run_function", "function": "call_by_name", "calls": [{"args": [None]}]}
    undeclared = run_in_sandbox(loan_folder, "driver.py", payload, limits=FAST)
    assert undeclared.error_kind == "policy_violation" and "driver.py: line 9" in undeclared.error_message
    declared = run_in_sandbox(loan_folder, "driver.py", payload, limits=FAST, driver_source=DRIVER)
    assert declared.ok, declared.error_message
    assert declared.results[0].result == {"credit_score": 742}
    with pytest.raises(UserError, match="not the driver it was declared to be"):
        run_in_sandbox(loan_folder, "driver.py", payload, limits=FAST, driver_source=DRIVER + "# changed\n")
    (loan_folder / "tools.py").write_text(LOAN_TOOLS + "\nimport subprocess\n")
    hostile = run_in_sandbox(loan_folder, "driver.py", payload, limits=FAST, driver_source=DRIVER)
    assert hostile.error_kind == "policy_violation" and hostile.error_message.startswith("tools.py: ")


def test_an_interpreter_that_lives_under_tmp_still_runs_in_the_sandbox(tmp_path: Path, loan_folder: Path):
    # The sandbox mounts a private /tmp; a checkout (and its venv) under /tmp, as in CI, must stay visible.
    import subprocess
    import sys
    import sysconfig

    venv = tmp_path / "venv-under-tmp"
    assert str(venv).startswith("/tmp/")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n" +
                                    str(Path(__file__).resolve().parents[3] / "src") + "\n")
    script = ("import json, pathlib; from sopforge.sandbox import run_in_sandbox, SandboxLimits; "
              f"r = run_in_sandbox(pathlib.Path({str(loan_folder)!r}), 'tools.py', {{'op': 'call_tools', 'groups': "
              "[[{'tool': 'getCreditScore', 'input': {'application_id': 'A-0001'}}]]}, "
              "limits=SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_bytes=512 * 1024 ** 2)); "
              "print(json.dumps([r.ok, r.results[0][0].result if r.results else r.error_message]))")
    done = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, {"credit_score": 742}]


SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")


@pytest.mark.skipif(os.geteuid() != 0 or not SYSTEM_PYTHON.exists(),
                    reason="needs root and a system interpreter of this version the sandbox user can read")
def test_root_without_cap_sys_admin_drops_to_the_sandbox_uid_before_bubblewrap(tmp_path: Path, loan_folder: Path):
    # Docker's default container: root, but no CAP_SYS_ADMIN, so bubblewrap cannot set up the
    # container as root. setpriv drops to HOST_ID first and bubblewrap runs unprivileged as it;
    # the interpreter must be one HOST_ID can read (this venv's base lives under /root).
    import shutil
    import subprocess
    import sysconfig
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="sopforge-system-venv-"))  # pytest's own tmp is 0700
    home.chmod(0o755)
    venv = home / "venv"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n" +
                                    str(Path(__file__).resolve().parents[3] / "src") + "\n")
    script = ("import json, pathlib; from sopforge.sandbox import boundary, run_in_sandbox, SandboxLimits; "
              "boundary.has_sys_admin = lambda: False; "
              f"r = run_in_sandbox(pathlib.Path({str(loan_folder)!r}), 'tools.py', {{'op': 'call_tools', 'groups': "
              "[[{'tool': 'getCreditScore', 'input': {'application_id': 'A-0001'}}]]}, "
              "limits=SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_bytes=512 * 1024 ** 2)); "
              "print(json.dumps([boundary.identity().drop, r.ok, r.layers, "
              "r.results[0][0].result if r.results else r.error_message]))")
    try:
        done = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True,
                              timeout=120)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    drop, ok, layers, result = json.loads(done.stdout.strip().splitlines()[-1])
    assert drop == "outside" and ok and result == {"credit_score": 742}, (result, layers)
    assert {"bubblewrap", "unprivileged_uid", "seccomp"} <= set(layers)


def test_an_unknown_limit_is_refused_not_ignored():
    # SandboxLimits(network_namespace="off") read as if it switched the network namespace off.
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="network_namespace"):
        SandboxLimits(network_namespace="off")
