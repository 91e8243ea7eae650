"""The record channel (issue 20, item 4): framed, bounded before reading, parsed defensively."""

from __future__ import annotations

import io
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from sopforge.sandbox import SandboxLimits, SandboxUnavailable, run_in_sandbox, supervise
from sopforge.sandbox.channel import MAX_DEPTH, FrameReader, Malformed, frame, parse_body
from sopforge.sandbox.runner import CHILD_SCRIPT, GUARD_SCRIPT

FAST = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_bytes=512 * 1024 ** 2)


class CountingStream(io.BytesIO):
    """A stream that records how much was read from it."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.consumed = 0

    def read(self, size: int = -1) -> bytes:
        chunk = super().read(size)
        self.consumed += len(chunk)
        return chunk


def read_all(data: bytes, *, max_bytes: int = 1 << 20, max_values: int = 1_000_000) -> FrameReader:
    reader = FrameReader(max_bytes=max_bytes, max_values=max_values)
    reader.run(CountingStream(data))
    return reader


def test_frames_are_read_in_order_and_parsed():
    reader = read_all(frame("H", b'{"a": 1}') + frame("R", b'{"i": 0}') + frame("E", b"{}"))
    assert reader.problem is None and reader.records == [("H", {"a": 1}), ("R", {"i": 0}), ("E", {})]


def test_a_frame_longer_than_the_budget_is_refused_before_its_body_is_read():
    stream = CountingStream(b"R" + (3 << 29).to_bytes(4, "big") + b"[" * 4096)
    reader = FrameReader(max_bytes=1 << 20, max_values=10_000)
    reader.run(stream)
    assert reader.overflow and stream.consumed == 5 and reader.records == []


@pytest.mark.parametrize(("data", "problem"), [
    (b"x" * 100, "unknown tag"),  # a line of text with no frame at all
    (b"R\x00\x00", "inside a frame header"),
    (b"R\x00\x00\x00\x09{}", "inside a frame"),
    (frame("R", b"[" * 200_000 + b"]" * 200_000), "nests deeper"),
    (frame("R", b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)), "nests deeper"),
    (frame("R", b"{not json"), "not JSON"),
    (frame("R", b"\xff\xfe"), "not JSON"),
])
def test_malformed_channels_end_reading_with_a_reason_and_never_raise(data: bytes, problem: str):
    reader = read_all(data)
    assert reader.problem and problem in reader.problem


def test_the_value_budget_caps_what_parsing_may_allocate():
    body = json.dumps([[]] * 5000).encode()  # 15 kB of bytes, 5,000 lists once parsed
    reader = read_all(frame("R", body) + frame("E", b"{}"), max_values=1000)
    assert reader.overflow and "JSON values" in reader.problem
    data, values = parse_body(b'{"s": "[[[,,,::: inside a string", "n": [1, 2]}', max_values=100)
    assert data == {"s": "[[[,,,::: inside a string", "n": [1, 2]} and values < 10
    assert isinstance(parse_body(b"[" * 50 + b"]" * 50, max_values=10)[0], Malformed)


def test_strings_are_told_apart_from_structure_like_the_plain_pattern_does():
    # the counting pattern is the unrolled form of '"(?:[^"\\]|\\.)*"'; escaped quotes, backslashes
    # and unterminated strings must be read the same way, or a record could hide values from the count
    import random
    import re

    from sopforge.sandbox.channel import _count

    plain = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
    rng = random.Random(7)
    for _ in range(5000):
        body = bytes(rng.choice(b'"\\a,:{}[]\n') for _ in range(rng.randrange(40)))
        bare = plain.sub(b'""', body)
        assert _count(body) == (1 + bare.count(b",") + bare.count(b":") + bare.count(b"[") + bare.count(b"{"),
                                bare.count(b"[") + bare.count(b"{")), body


def test_the_child_and_the_guard_write_the_frames_the_parent_reads(tmp_path: Path):
    # child.py and guard.py cannot import sopforge: each has its own few lines of framing.
    script = textwrap.dedent(f"""
        import importlib.util, os, sys
        def load(path, name):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        child = load({str(CHILD_SCRIPT)!r}, "child")
        guard = load({str(GUARD_SCRIPT)!r}, "guard")
        fd = os.dup(1)
        child.Emitter(fd)("R", '{{"i": 0, "calls": ["é"]}}')
        guard.install(read_roots=["/nowhere"], record_fd=fd)
        open("/etc/hostname", "rb")
    """)
    done = __import__("subprocess").run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == 86, done.stderr
    reader = read_all(done.stdout)
    assert reader.problem is None
    assert reader.records[0] == ("R", {"i": 0, "calls": ["é"]})
    assert reader.records[1][0] == "V" and reader.records[1][1]["event"] == "open"


def test_peak_memory_is_the_childs_own_not_the_parents(tmp_path: Path):
    # bubblewrap's rusage inherits this process's RSS at exec (the issue: 3,156 MiB for a 32 MiB child).
    ballast = bytearray(700 * 1024 ** 2)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "tools.py").write_text(
        "class XManager:\n"
        "    def process_tool_call(self, tool_name, tool_input):\n"
        "        block = bytearray(32 * 1024 * 1024)\n"
        "        block[::4096] = b'x' * len(block[::4096])\n"
        "        total = 0\n"
        "        for i in range(3_000_000):\n"
        "            total += i\n"
        "        return len(block)\n")
    result = run_in_sandbox(folder, "tools.py", {"op": "call_tools", "groups": [[{"tool": "t"}]]}, limits=FAST)
    assert result.ok, result.error_message
    assert 32 * 1024 ** 2 < result.peak_rss_bytes < 200 * 1024 ** 2, result.peak_rss_bytes
    assert result.cpu_seconds and result.cpu_seconds > 0.05
    del ballast


@pytest.mark.skipif(os.geteuid() != 0, reason="under root the sandbox shares the host's user namespace")
def test_the_parent_lets_no_user_code_run_in_a_child_it_finds_unconfined(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    # Make the parent (only the parent: the child's own check is unchanged) require a namespace
    # the child legitimately shares with it: its look at /proc must stop the child before the tools load.
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "tools.py").write_text("print('USER CODE RAN')\nclass XManager:\n    pass\n")
    original = supervise.Expectation.__init__

    def stricter(self, **kwargs):
        original(self, **kwargs)
        self.fresh = (*self.fresh, "user")
    monkeypatch.setattr(supervise.Expectation, "__init__", stricter)
    with pytest.raises(SandboxUnavailable) as err:
        run_in_sandbox(folder, "tools.py", {"op": "call_tools", "groups": [[{"tool": "t"}]]}, limits=FAST)
    assert "not confined as required (the user namespace is the parent's)" in str(err.value)
    assert "\n" not in str(err.value)
