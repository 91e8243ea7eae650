"""Bad input: one clear line, a non-zero exit, and nothing half-written in the store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest

from cli_support import ROOT, SOPFORGE, quiet_env


def run(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SOPFORGE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=quiet_env(SOPFORGE_HOME=str(home), **(env or {})))


def assert_one_line_error(proc, *fragments: str) -> None:
    assert getattr(proc, "returncode", getattr(proc, "code", 0)) != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def assert_no_runs(home: Path) -> None:
    db = home / "sopforge.duckdb"
    if db.exists():
        with duckdb.connect(str(db), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def theme_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "theme.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize("args, fragments", [
    (("--theme", ""), ("theme is empty",)),
    (("--theme", "   \n\t "), ("theme is empty",)),
    (("--theme", "x" * 2001), ("2001 characters", "at most 2000")),
    (("--theme", "pharmacy", "--provider", "bogus"), ("unknown provider 'bogus'", "anthropic")),
    (("--theme", "pharmacy", "--provider", "anthropic"), ("ANTHROPIC_API_KEY is not set",)),
    (("--theme", "pharmacy", "--provider", "openai"), ("OPENAI_API_KEY is not set",)),
    (("missing-theme.yaml",), ("does not exist",)),
    ((), ("no theme given",)),
    (("examples/themes/pharmacy_refills.yaml", "--model", "gpt-5"), ("replay provider", "ignore model 'gpt-5'")),
])
def test_bad_command_line(tmp_path, args, fragments):
    home = tmp_path / "home"
    proc = run(home, "generate", *args)
    assert_one_line_error(proc, *fragments)
    assert_no_runs(home)


@pytest.mark.parametrize("content, fragments", [
    ("theme: [unclosed\n", ("not valid YAML", "line")),
    ("- just\n- a list\n", ("must be a YAML mapping",)),
    (b"theme: \xff\xfe broken\n", ("cannot be read",)),
    ("theme: pharmacy\nstages:\n  bogus_stage: {model: x}\n", ("unknown stage 'bogus_stage'",)),
    ("theme: pharmacy\nprovider: nope\n", ("unknown provider 'nope'",)),
    ("theme: pharmacy\ncolour: blue\n", ("colour: unknown key; the keys here are theme, slug, provider", "hardening")),
    ("theme: pharmacy\nstages:\n  sop: {colour: x}\n", ("stages.sop.colour", "provider, model, temperature, base_url")),
])
def test_bad_theme_file(tmp_path, content, fragments):
    home = tmp_path / "home"
    proc = run(home, "generate", str(theme_file(tmp_path, content)))
    assert_one_line_error(proc, str(tmp_path / "theme.yaml"), *fragments)
    assert_no_runs(home)


def test_a_local_server_that_is_not_running_is_one_line_before_anything_starts(tmp_path):
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "home"
    url = f"http://127.0.0.1:{port}/v1"
    proc = run(home, "generate", "--theme", "pharmacy refills", "--provider", "openai", "--base-url", url)
    assert proc.returncode == 2
    assert_one_line_error(proc, f"nothing is listening at {url}", "start the server or fix --base-url")
    assert_no_runs(home)
    assert not (home / "prefect").exists()  # before the home's Prefect server was started (20 s before issue 21)


def test_database_path_that_cannot_be_written(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the state folder should be")
    proc = run(blocker, "generate", "examples/themes/pharmacy_refills.yaml")
    assert_one_line_error(proc, str(blocker), "SOPFORGE_HOME")


def test_show_unknown_run(tmp_path):
    home = tmp_path / "home"
    assert run(home, "generate", "--theme", "x", "--provider", "bogus").returncode != 0
    proc = run(home, "show", "r-doesnotexist")
    assert proc.returncode != 0 and proc.stderr.startswith("error: ")


@pytest.mark.prefect
def test_replay_without_a_recording_names_the_call_key(cli, tmp_path):
    spec = theme_file(tmp_path, "theme: a theme nobody recorded\nslug: unrecorded\nprovider: replay\n"
                                f"recordings: {ROOT / 'examples/recordings/pharmacy_refills'}\n")
    proc = cli("generate", str(spec))
    assert_one_line_error(proc, "unrecorded/context/main/a1", "--provider exchange")
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM artifacts").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM llm_calls").fetchone() == (0,)
        assert con.execute("SELECT status FROM runs").fetchall() == [("failed",)]


def test_review_commands_and_servers_refuse_bad_requests(tmp_path):
    home = tmp_path / "home"
    ui_without_server = run(home, "generate", "examples/themes/pharmacy_refills.yaml", "--review", "ui")
    assert_one_line_error(ui_without_server, "--review ui", "start `sopforge ui`")
    assert ui_without_server.returncode == 2
    bad_mode = run(home, "generate", "examples/themes/pharmacy_refills.yaml", "--review", "later")
    assert_one_line_error(bad_mode, "review", "'auto' or 'ui'")
    bad_gate = run(home, "generate", "examples/themes/pharmacy_refills.yaml", "--gate", "deploy")
    assert_one_line_error(bad_gate, "unknown gate stage 'deploy'")
    assert_no_runs(home)

    nothing = run(home, "review", "approve", "r-0000000000")
    assert_one_line_error(nothing, "no run matches")
    serve = run(home, "serve")
    assert_one_line_error(serve, "PREFECT_API_URL")
    assert serve.returncode == 2


EVERY_COMMAND = [
    ("generate", "examples/themes/pharmacy_refills.yaml"), ("rerun", "r-0"), ("show", "r-0"), ("runs",),
    ("runs", "delete", "r-0"), ("runs", "prune", "--status", "failed"), ("review", "list"), ("review", "show", "r-0"),
    ("review", "approve", "r-0"), ("ui",), ("serve", "--no-deploy"),
]


MALFORMED = [("SOPFORGE_MAX_ATTEMPTS", "three", "a whole number from 1 to 10"),
             ("SOPFORGE_MAX_CONCURRENCY", "0", "a whole number ≥ 1"),
             ("SOPFORGE_REQUEST_TIMEOUT_SECONDS", "abc", "a number > 0")]


@pytest.mark.parametrize("n, command", list(enumerate(EVERY_COMMAND)), ids=lambda c: " ".join(c) if isinstance(c, tuple) else "")
def test_a_malformed_setting_is_one_line_from_every_command(tmp_path, n, command):
    # Issue 21: each of these crashed every command with a 56-line pydantic traceback and exit 1
    # (unit tests cover every variable; each command here meets one of the three, in turn).
    variable, value, takes = MALFORMED[n % len(MALFORMED)]
    proc = run(tmp_path / "home", *command, env={variable: value})
    assert proc.returncode == 2, (command, proc.stderr)
    assert_one_line_error(proc, f"{variable}={value!r} is not valid", takes)
    assert not (tmp_path / "home").exists()  # nothing was started or written
