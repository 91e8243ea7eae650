"""Benchmark families: the registry (which families exist, how a run's stages are planned).

A family builds one kind of benchmark (sop_tools: SOP-Bench + TELLER + TOD-ProcBench items around
a tool-using SOP; later PROBE and SOP-Maze). It owns everything under ``sopforge.families.<name>``:
stage modules, artifact models, verifiers, exporters and scorers, and it declares itself with a
single :class:`Family` value named ``FAMILY`` in its ``family`` module. The protocol (``Family``,
``StageSpec``...) is data in :mod:`sopforge.families.protocol` (re-exported here); declarations import
it from there, so no declaration imports the registry that loads it.

Infrastructure (orchestration, review, CLI) reaches a family only through this registry, by name
(``importlib``), so it never imports one, and families never import each other. The stages more
than one family reads (the business context) are declared in :mod:`sopforge.context` and run once
per theme, whatever families it chooses.

The flow is built from these declarations (:func:`plan`): every stage names the stages it reads,
so the Prefect graph is the real data dependency graph and independent stages run concurrently.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

from pydantic import BaseModel

from sopforge.errors import UserError
from sopforge.families.protocol import (EditSpec, ExportSpec, Family, FamilySummary, InputContext, OptionsSpec,
                                        StageSpec, SummaryTable, TableView)

__all__ = [
    "IMPLEMENTED", "EditSpec", "ExportSpec", "Family", "FamilySummary", "InputContext", "OptionsSpec", "Plan",
    "StageSpec", "SummaryTable", "TableView", "all_stages", "declared_stage", "evaluable", "load_family", "options_sections", "plan", "stage",
]

# Families in their default order. A theme without ``families:`` gets all of them.
IMPLEMENTED: tuple[str, ...] = ("sop_tools", "probe", "maze")


@cache
def load_family(name: str) -> Family:
    """The declaration of family ``name``.

    Raises:
        UserError: ``name`` is not an implemented family.
    """
    if name not in IMPLEMENTED:
        raise UserError(f"unknown family {name!r}: choose from {', '.join(IMPLEMENTED)}")
    family = importlib.import_module(f"sopforge.families.{name}.family").FAMILY
    if family.name != name:
        raise RuntimeError(f"sopforge.families.{name} declares itself as {family.name!r}")
    return family


@cache
def shared_stages() -> tuple[StageSpec, ...]:
    """Stages that run once per theme and feed every family."""
    return importlib.import_module("sopforge.context.shared").SHARED_STAGES


@dataclass(frozen=True)
class Plan:
    """The stage DAG of one run: shared stages and the chosen families' stages, in a topological
    order that keeps each family's declared order (so summaries and tables read naturally)."""

    families: tuple[str, ...]
    stages: tuple[StageSpec, ...]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    def get(self, name: str) -> StageSpec:
        for spec in self.stages:
            if spec.name == name:
                return spec
        raise UserError(f"unknown stage {name!r}: choose one of {', '.join(self.names)}")

    def ancestors(self, name: str) -> list[str]:
        """Every stage ``name`` reads, directly or not, in plan order (without ``name``)."""
        found = set(self.get(name).parents)
        for spec in reversed(self.stages):
            if spec.name in found:
                found.update(spec.parents)
        return [s.name for s in self.stages if s.name in found]

    def descendants(self, name: str) -> list[str]:
        """``name`` and every stage that reads it, directly or not, in plan order."""
        found = {self.get(name).name}
        for spec in self.stages:
            if found & set(spec.parents):
                found.add(spec.name)
        return [s.name for s in self.stages if s.name in found]


@cache
def plan(families: tuple[str, ...] = IMPLEMENTED) -> Plan:
    """The DAG for ``families``.

    Raises:
        UserError: an unknown family.
        RuntimeError: a declaration error (duplicate stage name, unknown parent, a parent in
            another family, a cycle): a bug in a family, not in the user's input.
    """
    stages: list[StageSpec] = list(shared_stages())
    shared = {s.name for s in stages}
    for name in families:
        own = {s.name for s in load_family(name).stages}
        for spec in load_family(name).stages:
            foreign = [p for p in spec.parents if p not in own | shared]
            if foreign:
                raise RuntimeError(f"family {name}: stage {spec.name} reads {foreign}, which is neither "
                                   "its own nor a shared stage (families never read each other)")
            if spec.per_run and spec.uses_llm:
                raise RuntimeError(f"family {name}: stage {spec.name} is per_run, so every run makes it again: "
                                   "only a stage without model calls may be")
            stages.append(_with_family(spec, name))
    names = [s.name for s in stages]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RuntimeError(f"stage names must be unique over families: {duplicates}")
    return Plan(families=families, stages=tuple(_topological(stages)))


def _with_family(spec: StageSpec, family: str) -> StageSpec:
    from dataclasses import replace

    return replace(spec, family=family)


def _topological(stages: list[StageSpec]) -> list[StageSpec]:
    """Declared order, except that a stage never precedes one it reads."""
    placed: list[StageSpec] = []
    done: set[str] = set()
    pending = list(stages)
    while pending:
        ready = next((s for s in pending if set(s.parents) <= done), None)
        if ready is None:
            raise RuntimeError(f"the stage graph has a cycle among {[s.name for s in pending]}")
        placed.append(ready)
        done.add(ready.name)
        pending.remove(ready)
    return placed


def all_stages() -> dict[str, StageSpec]:
    """Every stage of every implemented family (and the shared ones), by name."""
    return {s.name: s for s in plan(IMPLEMENTED).stages}


def declared_stage(name: str, family: str | None) -> StageSpec | None:
    """Stage ``name`` as the family a stored artifact names declares it (None for shared stages).

    Only that family loads: a command that prints one artifact need not import the other families'
    models (0.4 s). An unknown family or stage (a store written by another version) falls back to
    every family's declarations, and to None when none declares it.
    """
    if family is None:
        found = [s for s in shared_stages() if s.name == name]
    elif family in IMPLEMENTED:
        found = [s for s in load_family(family).stages if s.name == name]
    else:
        found = []
    return found[0] if found else all_stages().get(name)


def stage(name: str) -> StageSpec:
    """The declaration of stage ``name`` in whichever family owns it.

    Raises:
        UserError: no family declares ``name``.
    """
    return plan(IMPLEMENTED).get(name)


def evaluable() -> tuple[str, ...]:
    """Implemented families that declare an evaluation (``sopforge eval --family``)."""
    return tuple(name for name in IMPLEMENTED if load_family(name).evaluation is not None)


def options_sections() -> dict[str, tuple[str, type[BaseModel]]]:
    """Theme-file section key -> (family, options model), for every implemented family."""
    return {f.options.key: (f.name, f.options.model) for f in map(load_family, IMPLEMENTED) if f.options}
