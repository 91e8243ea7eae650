"""Facts, conditions and their exact evaluation: the semantics every SOP-Maze tree is executed with.

SOP-Maze (seeds/001_6dd03d47fea0db71.txt §3, L143-147) needs one definitive answer per
instance (L81). Here that is provable, not hoped for, because every condition of a tree is a
conjunction of **atoms** over typed **facts**, each atom about one fact (``days_since_last_fill
>= 24``, ``reply == affirm``, ``medication_class in [non_controlled, schedule_iii_v]``).

**Cells.** The thresholds of all atoms on an integer fact cut its range into intervals
("cells") on which every atom has one truth value; an enum or boolean fact has one cell per
value. A set of cells per fact is a *region*: the facts as far as they are known (a stated
fact is one cell, an unstated one all of its cells). On a region an atom, and so a
conjunction, is true everywhere, false everywhere or undetermined (:class:`Tri`). Because
every atom reads one fact, a conjunction can hold somewhere in a region exactly when each
fact keeps a cell satisfying its atoms, so all of this is exact and cheap.

Nothing here imports a checker or a stage: it is the data's meaning, used by the sampler,
the verifiers, the scorer's baselines and the exports alike.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Atom", "Cell", "DATE_DERIVATIONS", "Derivation", "Fact", "FactValue", "Logic", "OPS", "REPLY", "Region", "Tri", "atoms_of",
    "parse_atom",
]

REPLY = "reply"  # the per-turn pseudo-fact of HRS trees: the kind of the user's current reply
OPS: tuple[str, ...] = ("==", "!=", "<=", ">=", "<", ">", "not in", "in")
Derivation = Literal["interval_days", "business_days", "median", "sum", "difference"]
DATE_DERIVATIONS = ("interval_days", "business_days")  # computed from two dates
FactValue = Union[bool, int, str]
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# "in" / "not in" are words: they need a space before them, or "days_since" would read as "days_s in ce"
_ATOM = re.compile(r"^\s*([a-z][a-z0-9_]*)(?:\s*(==|!=|<=|>=|<|>)|\s+(not\s+in|in)(?=[\s\[]))\s*(.+?)\s*$")


class Fact(BaseModel):
    """One fact the user input conveys and the SOP's conditions read."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="snake_case name used in conditions and in the extraction answer.")
    type: Literal["enum", "boolean", "integer"] = Field(description="enum (one of values), boolean, or integer.")
    description: str = Field(description="What the fact is and how it is read from the conversation.")
    values: list[str] = Field(default_factory=list, description="enum: the allowed snake_case values.")
    minimum: int | None = Field(None, description="integer: smallest possible value.")
    maximum: int | None = Field(None, description="integer: largest possible value.")
    unit: str = Field("", description="integer: unit, e.g. 'days' or 'usd'.")
    derivation: Derivation | None = Field(None, description=(
        "integer facts the SOP computes: interval_days (calendar days between two dates), business_days "
        "(weekdays between two dates, the scenario's listed holidays excluded), median (of several numbers), sum "
        "or difference (of stated numbers). Calculation noise states the operands, not the value."))
    interval_anchor: Literal["until_call", "after_call"] = Field("until_call", description=(
        "interval_days / business_days: whether the interval ends on the day of the conversation (days since a "
        "past event) or lies after it (a planned period, e.g. a trip)."))

    @field_validator("name")
    @classmethod
    def _snake(cls, value: str) -> str:
        if not _NAME.match(value) or value == REPLY:
            raise ValueError(f"fact name {value!r} must be snake_case and not {REPLY!r}")
        return value

    @model_validator(mode="after")
    def _typed(self) -> "Fact":
        if self.type == "enum":
            bad = [v for v in self.values if not _NAME.match(v)]
            if len(self.values) < 2 or bad or len(set(self.values)) != len(self.values):
                raise ValueError(f"enum fact {self.name!r} needs at least two distinct snake_case values"
                                 + (f" (not {bad[0]!r})" if bad else ""))
        elif self.values:
            raise ValueError(f"fact {self.name!r} of type {self.type} cannot list values")
        if self.type == "integer":
            if self.minimum is None or self.maximum is None or self.minimum >= self.maximum:
                raise ValueError(f"integer fact {self.name!r} needs minimum < maximum")
        elif self.minimum is not None or self.maximum is not None or self.derivation is not None:
            raise ValueError(f"fact {self.name!r}: minimum, maximum and derivation are for integer facts only")
        return self

    def accepts(self, value: object) -> bool:
        """Whether ``value`` is a possible value of this fact (bools are not integers here)."""
        if self.type == "boolean":
            return isinstance(value, bool)
        if self.type == "integer":
            return (isinstance(value, int) and not isinstance(value, bool)
                    and self.minimum <= value <= self.maximum)  # type: ignore[operator]
        return isinstance(value, str) and value in self.values

    def domain_text(self) -> str:
        """The allowed values in one phrase, for prompts and the SOP glossary."""
        if self.type == "enum":
            return "one of " + ", ".join(self.values)
        if self.type == "boolean":
            return "true or false"
        unit = f" {self.unit}" if self.unit else ""
        return f"an integer from {self.minimum} to {self.maximum}{unit}"


class Atom(BaseModel):
    """``fact op value``: one comparison on one fact."""

    model_config = ConfigDict(frozen=True)

    fact: str = Field(description="Fact name (or 'reply' in HRS trees).")
    op: str = Field(description="One of ==, !=, <, <=, >, >=, in, not in.")
    value: FactValue | tuple[FactValue, ...] = Field(description="A value, or a list of values for in / not in.")

    def text(self) -> str:
        """The canonical form, e.g. ``days_since_last_fill >= 24`` or ``reply in [affirm, maybe]``."""
        return f"{self.fact} {self.op} {_value_text(self.value)}"

    def holds(self, value: FactValue) -> bool:
        """The atom on one concrete value."""
        target = self.value
        if self.op == "==":
            return value == target and type(value) is type(target)
        if self.op == "!=":
            return not (value == target and type(value) is type(target))
        if self.op in ("in", "not in"):
            inside = any(value == t and type(value) is type(t) for t in target)  # type: ignore[union-attr]
            return inside if self.op == "in" else not inside
        if isinstance(value, bool) or not isinstance(value, int) or isinstance(target, (bool, tuple, str)):
            return False
        return {"<": value < target, "<=": value <= target, ">": value > target, ">=": value >= target}[self.op]

    def constants(self) -> tuple[FactValue, ...]:
        return self.value if isinstance(self.value, tuple) else (self.value,)


def _value_text(value: FactValue | tuple[FactValue, ...]) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _literal(text: str) -> FactValue:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    if not _NAME.match(text):
        raise ValueError(f"value {text!r} must be a number, true/false or a snake_case word")
    return text


def parse_atom(text: str) -> Atom:
    """Read one condition atom.

    Raises:
        ValueError: the text is not ``<fact> <op> <value>`` (the message shows the expected form).
    """
    return _parsed_atom(text) if isinstance(text, str) else _parse_atom(text)


# Planning instances walks every scenario's branches once per simulated turn, re-reading the same few
# condition texts over and over: the largest single cost of a demo's SOP-Maze stages in a py-spy profile
# before they were kept (an Atom is frozen, so one object serves every reader).
@functools.lru_cache(maxsize=4096)
def _parsed_atom(text: str) -> Atom:
    return _parse_atom(text)


def _parse_atom(text) -> Atom:
    match = _ATOM.match(text if isinstance(text, str) else "")
    if match is None:
        raise ValueError(f"condition {text!r} must read '<fact> <op> <value>' with op one of {', '.join(OPS)}, "
                         "e.g. 'days_since_last_fill >= 24' or 'reply in [affirm, question]'")
    fact, op, raw = match.group(1), " ".join((match.group(2) or match.group(3)).split()), match.group(4)
    if op in ("in", "not in"):
        if not (raw.startswith("[") and raw.endswith("]")):
            raise ValueError(f"condition {text!r}: '{op}' needs a list such as [a, b]")
        try:
            loaded = json.loads(raw)
            items = [_literal(json.dumps(v) if not isinstance(v, str) else v) for v in loaded]
        except (json.JSONDecodeError, TypeError):
            items = [_literal(part) for part in raw[1:-1].split(",") if part.strip()]
        if not items:
            raise ValueError(f"condition {text!r}: the list is empty")
        return Atom(fact=fact, op=op, value=tuple(items))
    if raw.startswith("["):
        raise ValueError(f"condition {text!r}: a list needs 'in' or 'not in', not {op!r}")
    value = _literal(raw)
    if op in ("<", "<=", ">", ">=") and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"condition {text!r}: {op} compares with a number")
    return Atom(fact=fact, op=op, value=value)


def atoms_of(when: list[str]) -> list[Atom]:
    """The parsed atoms of a condition (a list of atom texts, all of which must hold)."""
    try:
        return list(_parsed_condition(tuple(when)))
    except TypeError:  # an unhashable item: parse_atom says what is wrong with it
        return [parse_atom(t) for t in when]


@functools.lru_cache(maxsize=4096)
def _parsed_condition(when: tuple[str, ...]) -> tuple[Atom, ...]:
    return tuple(parse_atom(t) for t in when)


class Tri(Enum):
    """Truth of a condition on a region: everywhere, nowhere, or depends on what is not stated."""

    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Cell:
    """Values on which every atom of the tree agrees: an enum/boolean value or an integer interval."""

    low: FactValue
    high: FactValue

    def representative(self) -> FactValue:
        return self.low

    def contains(self, value: FactValue) -> bool:
        if isinstance(self.low, int) and not isinstance(self.low, bool):
            return (isinstance(value, int) and not isinstance(value, bool)
                    and self.low <= value <= self.high)  # type: ignore[operator]
        return value == self.low and type(value) is type(self.low)


# A region: fact -> indices of the cells still possible. A fact absent from it is unknown (all cells).
Region = dict[str, frozenset[int]]


class Logic:
    """The cells of every fact under a tree's atoms, and exact evaluation on regions.

    Args:
        facts: The tree's facts; HRS trees pass the reply kinds as ``replies`` (the pseudo-fact ``reply``).
        atoms: Every atom of the tree (their thresholds cut the integer ranges).
        replies: Reply kind names, when the tree reads ``reply``.
    """

    def __init__(self, facts: Sequence[Fact], atoms: Iterable[Atom], replies: Sequence[str] = ()):
        self.facts = {f.name: f for f in facts}
        self.cells: dict[str, list[Cell]] = {}
        cuts: dict[str, set[int]] = {f.name: set() for f in facts if f.type == "integer"}
        for atom in atoms:
            if atom.fact in cuts:
                for c in atom.constants():
                    if isinstance(c, int) and not isinstance(c, bool):
                        # every threshold value is a cell of its own: truth is constant on each cell
                        # whatever the operator, and sampling lands on boundaries (exactly 24 for
                        # ">= 24") as often as on interiors, where off-by-one readings are caught
                        cuts[atom.fact].update({c, c + 1})
        for fact in facts:
            if fact.type == "enum":
                self.cells[fact.name] = [Cell(v, v) for v in fact.values]
            elif fact.type == "boolean":
                self.cells[fact.name] = [Cell(False, False), Cell(True, True)]
            else:
                lo, hi = fact.minimum, fact.maximum
                starts = sorted({lo, *(c for c in cuts[fact.name] if lo < c <= hi)})  # type: ignore[operator]
                ends = [s - 1 for s in starts[1:]] + [hi]
                self.cells[fact.name] = [Cell(s, e) for s, e in zip(starts, ends)]
        if replies:
            self.cells[REPLY] = [Cell(r, r) for r in replies]
        self._full = {name: frozenset(range(len(cells))) for name, cells in self.cells.items()}
        # Planning and the reachability checks ask the same few atoms about the same cells tens of
        # thousands of times per scenario; an atom's truth is constant on each cell, so each atom's
        # cells are worked out once (atoms are frozen and parse_atom hands out one object per text).
        self._where: dict[int, tuple[Atom, frozenset[int]]] = {}  # by id: a pydantic hash costs more than the lookup saves

    def full(self, fact: str) -> frozenset[int]:
        return self._full[fact]

    def where(self, atom: Atom) -> frozenset[int]:
        """Cells of the atom's fact on which the atom holds."""
        known = self._where.get(id(atom))
        if known is None or known[0] is not atom:  # the atom is kept in the entry, so its id is not reused
            cells = frozenset(i for i, c in enumerate(self.cells[atom.fact]) if atom.holds(c.representative()))
            known = self._where[id(atom)] = (atom, cells)
        return known[1]

    def cell_of(self, fact: str, value: FactValue) -> int | None:
        """Index of the cell holding ``value`` (None when the value is outside the fact's domain)."""
        return next((i for i, c in enumerate(self.cells[fact]) if c.contains(value)), None)

    def domain(self, region: Region, fact: str) -> frozenset[int]:
        return region.get(fact, self.full(fact))

    def satisfying(self, atoms: Iterable[Atom], fact: str, cells: frozenset[int]) -> frozenset[int]:
        """Cells of ``fact`` among ``cells`` where every atom of ``atoms`` on that fact holds."""
        for atom in atoms:
            if atom.fact == fact:
                cells = cells & self.where(atom)
        return frozenset(cells)

    def truth(self, atoms: Sequence[Atom], region: Region) -> Tri:
        """Truth of the conjunction ``atoms`` on ``region`` (an empty conjunction is TRUE)."""
        satisfied: dict[str, frozenset[int]] = {}
        for atom in atoms:
            cells = satisfied.get(atom.fact)
            satisfied[atom.fact] = (self.domain(region, atom.fact) if cells is None else cells) & self.where(atom)
        if not all(satisfied.values()):
            return Tri.FALSE
        everywhere = all(sat == self.domain(region, fact) for fact, sat in satisfied.items())
        return Tri.TRUE if everywhere else Tri.UNKNOWN

    def region_of(self, values: dict[str, FactValue | None]) -> Region:
        """The region of known values (None means unknown). Unknown fact names and impossible
        values raise ValueError: a caller must not silently lose a fact."""
        region: Region = {}
        for fact, value in values.items():
            if value is None:
                continue
            if fact not in self.cells:
                raise ValueError(f"unknown fact {fact!r}")
            index = self.cell_of(fact, value)
            if index is None:
                raise ValueError(f"{fact} = {value!r} is outside its domain")
            region[fact] = frozenset({index})
        return region

    def solve_unique(self, target: Sequence[Atom], competitors: Sequence[Sequence[Atom]], *,
                     region: Region | None = None, rng: random.Random | None = None) -> Region | None:
        """A region inside ``region`` where ``target`` holds everywhere and every competitor nowhere.

        Exact: returns None only when no single point has the target true and every competitor
        false. Depth-first over "which fact makes competitor k false"; ``rng`` varies the choice
        (so samples are spread over the possibilities), ``None`` takes them in order.
        """
        domains: dict[str, frozenset[int]] = dict(region or {})
        for fact in {a.fact for a in target}:
            sat = self.satisfying(target, fact, self.domain(domains, fact))
            if not sat:
                return None
            domains[fact] = sat
        order = list(range(len(competitors)))
        if rng is not None:
            rng.shuffle(order)

        def search(k: int, current: dict[str, frozenset[int]]) -> dict[str, frozenset[int]] | None:
            if k == len(order):
                return current
            atoms = competitors[order[k]]
            facts = sorted({a.fact for a in atoms})
            if any(not self.satisfying(atoms, f, self.domain(current, f)) for f in facts):
                return search(k + 1, current)  # already false everywhere
            if rng is not None:
                rng.shuffle(facts)
            for fact in facts:
                cells = self.domain(current, fact)
                rest = cells - self.satisfying(atoms, fact, cells)
                if rest:
                    found = search(k + 1, {**current, fact: rest})
                    if found is not None:
                        return found
            return None

        return search(0, domains)

    def sample_value(self, fact: str, cell_index: int, rng: random.Random) -> FactValue:
        """A value in one cell. An integer cell bounded by a threshold on one side only (the
        open-ended ``>= 26`` of 0..400) is sampled near that threshold, where values are
        realistic and the boundary matters; a cell between two thresholds, uniformly."""
        cell = self.cells[fact][cell_index]
        spec = self.facts.get(fact)
        if spec is None or spec.type != "integer":
            return cell.low
        low, high = cell.low, cell.high
        width = max(2, min(10, (high - low) // 5))  # type: ignore[operator]
        if low > spec.minimum and high == spec.maximum:  # type: ignore[operator]
            high = min(high, low + width)  # type: ignore[operator]
        elif high < spec.maximum and low == spec.minimum:  # type: ignore[operator]
            low = max(low, high - width)  # type: ignore[operator]
        return rng.randint(low, high)  # type: ignore[arg-type]

    def sample_point(self, region: Region, facts: Iterable[str], rng: random.Random) -> dict[str, FactValue]:
        """One concrete value per fact in ``facts``, drawn inside ``region``."""
        return {fact: self.sample_value(fact, rng.choice(sorted(self.domain(region, fact))), rng) for fact in facts}
