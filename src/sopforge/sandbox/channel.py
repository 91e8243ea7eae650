"""The record channel from a sandbox child to the parent: framed, bounded, parsed defensively.

The child's records are written by a process that user code shares, so the parent reads them
as hostile input. Each record is one frame: a tag byte (``H`` hello, ``R`` result, ``V``
violation, ``F`` fatal, ``E`` end), a 4-byte big-endian body length, and a UTF-8 JSON body.
:class:`FrameReader` reads frame by frame and stops at the first frame that is malformed or
would exceed what is left of the byte budget, *before* reading its body, so a 1.5 GiB record
never reaches memory; each body is parsed at once, refused when it holds more JSON values than
the value budget allows (a cap on the parsed size, not only on the bytes) or nests deeper than
:data:`MAX_DEPTH`, and the raw bytes are dropped. Nothing here raises on bad input.

``child.py`` and ``guard.py`` write the same frames with their own few lines of code (they
import nothing of sopforge); ``tests/unit/sandbox/test_channel.py`` keeps the three in step.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable

__all__ = ["HEADER_BYTES", "MAX_DEPTH", "TAGS", "FrameReader", "Malformed", "frame", "nests_deeper", "parse_body"]

TAGS = frozenset("HRVFE")
HEADER_BYTES = 5
MAX_DEPTH = 100  # far beyond any tool result, far below Python's recursion limit
# A JSON string, its plain runs taken whole: the same matches as '"(?:[^"\\]|\\.)*"' at twice the speed
# (2.7 -> 1.2 ms on a 50 kB tool result), which mattered because every record of every sandbox run is counted.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


@dataclass(frozen=True)
class Malformed:
    """A frame body that could not be accepted, and why."""

    reason: str


def frame(tag: str, body: bytes) -> bytes:
    """One frame as the child writes it (for tests and for documentation of the format)."""
    return tag.encode("ascii") + len(body).to_bytes(4, "big") + body


def _count(body: bytes) -> tuple[int, int]:
    """(an upper bound on the JSON values and keys, the number of lists and dicts), at C speed."""
    bare = _STRING.sub(b'""', body)
    containers = bare.count(b"[") + bare.count(b"{")
    return 1 + bare.count(b",") + bare.count(b":") + containers, containers


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether parsed JSON holds lists or dicts nested more than ``limit`` levels (iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def parse_body(body: bytes, *, max_values: int, max_depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """Parse one frame body; returns (value or :class:`Malformed`, values counted)."""
    values, containers = _count(body)
    if values > max_values:
        return Malformed(f"the record holds more than {max_values} JSON values"), values
    try:
        data = json.loads(body)
    except RecursionError:
        return Malformed(f"the record nests deeper than {max_depth} levels"), values
    except (ValueError, MemoryError) as err:  # UnicodeDecodeError is a ValueError
        return Malformed(f"the record is not JSON: {str(err)[:120]}"), values
    if containers > max_depth and nests_deeper(data, max_depth):  # fewer containers cannot nest deeper
        return Malformed(f"the record nests deeper than {max_depth} levels"), values
    return data, values


@dataclass
class FrameReader:
    """Reads frames from the child's record pipe into ``records`` until EOF or the first problem.

    Attributes:
        records: (tag, parsed body or Malformed), in arrival order.
        problem: why reading stopped early (malformed frame, byte or value budget exceeded).
        overflow: the byte or value budget was exceeded.
    """

    max_bytes: int
    max_values: int
    on_frame: Callable[[str, Any], None] | None = None
    records: list[tuple[str, Any]] = field(default_factory=list)
    problem: str | None = None
    overflow: bool = False
    total: int = 0
    values: int = 0

    def run(self, pipe: BinaryIO) -> None:
        """Read until EOF or a problem; never raises."""
        try:
            self._loop(pipe)
        except Exception as err:  # noqa: BLE001 - a reading thread must end with a reason, not a traceback
            self.problem = self.problem or f"the record channel failed: {type(err).__name__}: {str(err)[:120]}"

    def _loop(self, pipe: BinaryIO) -> None:
        while True:
            header = pipe.read(HEADER_BYTES)
            if not header:
                return
            if len(header) < HEADER_BYTES:
                self.problem = "the record channel ended inside a frame header"
                return
            tag, length = chr(header[0]), int.from_bytes(header[1:], "big")
            if tag not in TAGS:
                self.problem = f"the record channel holds a frame with the unknown tag {header[:1]!r}"
                return
            self.total += HEADER_BYTES + length
            if self.total > self.max_bytes:
                self.overflow = True
                self.problem = f"the child wrote more than {self.max_bytes} bytes of records"
                return
            body = pipe.read(length)
            if len(body) < length:
                self.problem = "the record channel ended inside a frame"
                return
            data, values = parse_body(body, max_values=self.max_values - self.values)
            del body
            self.values += values
            self.records.append((tag, data))
            if isinstance(data, Malformed):
                self.overflow = self.values > self.max_values
                self.problem = f"malformed {tag} record: {data.reason}"
                return
            if self.on_frame is not None:
                self.on_frame(tag, data)
