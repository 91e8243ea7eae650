"""Every example in README.md works: ``make demo``, then each ```` ```bash ```` block, in order.

``make demo`` runs on a copy of the session's demo home (``integration/conftest.py``), which that same
command generated first; so it is the cached second run here, and every block reads a real demo run.

The rule, stated in the README too: a ``bash`` block runs unless the line just above it is an HTML
comment ``<!-- readme-test: skip: why -->`` (it needs an API key, the network, Docker, or a server
that runs until stopped). A runnable block may only call ``.venv/bin/sopforge``, ``.venv/bin/python``
or ``make``, so a new example that needs more fails here until it is marked. Blocks run in a folder
whose ``.venv`` and ``examples`` point at the checkout and whose ``artifacts`` is ``SOPFORGE_HOME``,
with the README's example ids replaced by real runs: ``r-1a2b`` by the demo run, ``r-5c6d`` by a
failed run.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from cli_support import ROOT, quiet_env
from sopforge.theme import build_spec

README = ROOT / "README.md"
SKIP = re.compile(r"^<!-- readme-test: skip: (?P<why>.+) -->$")
COMMANDS = (".venv/bin/sopforge", ".venv/bin/python", "make ")


@dataclass
class Block:
    lang: str
    code: str
    line: int
    skip: str | None


def readme_blocks(text: str) -> list[Block]:
    """Fenced blocks with their language, first line number and skip reason (if marked)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.match(above.strip())
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        blocks.append(Block(fence.group(1), "\n".join(lines[i + 1:end]) + "\n", i + 1,
                            skip.group("why") if skip else None))
        i = end + 1
    return blocks


def commands(code: str) -> list[str]:
    """The command lines of a bash block (not heredoc bodies, continuations or comments)."""
    found, heredoc, continued = [], None, False
    for line in code.splitlines():
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if not continued and line.strip() and not line.lstrip().startswith("#"):
            found.append(line.strip())
            marker = re.search(r"<<-?'?(\w+)'?", line)
            heredoc = marker.group(1) if marker else None
        continued = line.rstrip().endswith("\\")
    return found


def test_the_readme_marks_every_block_it_does_not_run():
    bash = [b for b in readme_blocks(README.read_text(encoding="utf-8")) if b.lang == "bash"]
    assert sum(b.skip is None for b in bash) >= 4
    for block in bash:
        if block.skip is None:
            bad = [c for c in commands(block.code) if not c.startswith(COMMANDS)]
            assert not bad, f"README.md line {block.line}: mark the block <!-- readme-test: skip: why --> or " \
                            f"call only {COMMANDS}: {bad}"
    assert commands(".venv/bin/python - <<'SQL'\nimport duckdb\nSQL\n.venv/bin/sopforge runs \\\n  --json\n") == [
        ".venv/bin/python - <<'SQL'", ".venv/bin/sopforge runs \\"]


def test_the_yaml_examples_are_valid_theme_files():
    blocks = [yaml.safe_load(b.code) for b in readme_blocks(README.read_text(encoding="utf-8")) if b.lang == "yaml"]
    assert len(blocks) == 3
    theme, *sections = blocks
    assert build_spec(theme, source="README theme example").slug == "sb_loans"
    for section in sections:  # a family's section of the theme file, defaults shown
        [key] = section
        assert build_spec({"theme": "x", **section}, source=f"README {key} example").options[key]


def run(args: list[str], work: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.prefect
@pytest.mark.xdist_group("demo")
def test_every_runnable_readme_example_runs(demo, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for name in (".venv", "examples"):
        (work / name).symlink_to(ROOT / name)
    home = demo.copy(work / "artifacts")  # `make demo` below is its cached second run (module docstring)
    env = quiet_env(SOPFORGE_HOME=str(home), PREFECT_API_URL=demo.prefect_api)

    demo = run(["make", "-C", str(ROOT), "demo"], work, env)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    unrecorded = tmp_path / "unrecorded.yaml"
    unrecorded.write_text(f"theme: a theme nobody recorded\nslug: unrecorded\nprovider: replay\n"
                          f"recordings: {ROOT / 'examples/recordings/pharmacy_refills'}\n")
    assert run([".venv/bin/sopforge", "generate", str(unrecorded)], work, env).returncode != 0
    runs = {r["theme_slug"]: r["id"] for r in json.loads(run([".venv/bin/sopforge", "runs", "--json"], work,
                                                                 env).stdout)}
    demo_run, failed_run = runs["pharmacy_refills"], runs["unrecorded"]
    export = f"artifacts/exports/{demo_run}/pharmacy_refills"
    ids = {"r-1a2b3c4d5e": demo_run, "r-1a2b": demo_run, "r-5c6d": failed_run, "path/to/sopbench_folder": export}

    text = README.read_text(encoding="utf-8")
    ran = []
    for block in readme_blocks(text):
        if block.lang != "bash" or block.skip is not None:
            continue
        code = block.code
        for example, real in ids.items():
            code = code.replace(example, real)
        proc = run(["bash", "-euo", "pipefail", "-c", code], work, env)
        assert proc.returncode == 0, f"README.md line {block.line}:\n{code}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        ran.append((code, proc.stdout))
    assert len(ran) >= 4
    outputs = "\n".join(out for _, out in ran)
    assert "api_graph" in outputs and "dataset" in outputs  # the SQL example printed the SOP's children
    assert "would delete 1 run(s)" in outputs and "sopforge " in outputs

    # The README names the columns the agent sees; they are the demo export's input columns.
    metadata = json.loads((work / export / "metadata.json").read_text())
    paragraph = next(p for p in text.split("\n\n") if "The agent" in p and "sees only the input columns" in p)
    named = set(re.findall(r"`([a-z_]+)`", paragraph))
    assert named == set(metadata["input_columns"]), (named, metadata["input_columns"])
