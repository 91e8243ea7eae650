"""Benchmark families: the one protocol a family declares itself with, and the registry.

A family builds one kind of benchmark (sop_tools: SOP-Bench + TELLER + TOD-ProcBench items around
a tool-using SOP; later PROBE and SOP-Maze). It owns everything under ``sopforge.families.<name>``:
stage modules, artifact models, verifiers, exporters and scorers, and it declares itself with a
single :class:`Family` value named ``FAMILY`` in its ``family`` module.

Infrastructure (orchestration, review, CLI) reaches a family only through this registry, by name
(``importlib``), so it never imports one, and families never import each other. The stages more
than one family reads (the business context) are declared in :mod:`sopforge.context` and run once
per theme, whatever families it chooses.

The flow is built from these declarations (:func:`plan`): every stage names the stages it reads,
so the Prefect graph is the real data dependency graph and independent stages run concurrently.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel

from sopforge.errors import UserError

if TYPE_CHECKING:
    from sopforge.checks import CheckResult
    from sopforge.evaluation.protocol import EvalSpec
    from sopforge.settings import Settings
    from sopforge.theme import ThemeSpec

__all__ = [
    "IMPLEMENTED", "EditSpec", "ExportSpec", "Family", "FamilySummary", "InputContext", "OptionsSpec", "Plan",
    "StageSpec", "SummaryTable", "TableView", "all_stages", "evaluable", "load_family", "options_sections", "plan", "stage",
]

# Families in their default order. A theme without ``families:`` gets all of them.
IMPLEMENTED: tuple[str, ...] = ("sop_tools", "probe", "maze")


@dataclass(frozen=True)
class InputContext:
    """What a stage's inputs may need beyond the theme and its parents' content."""

    run_id: str
    exports_dir: Path
    parent_records: dict[str, Any] = field(default_factory=dict)  # stage -> ArtifactRecord


@dataclass(frozen=True)
class EditSpec:
    """How a reviewer's edit of a stage's artifact is read and re-checked (``sopforge review edit``).

    Attributes:
        check: ``check(artifact, parents, settings)``: the checks the stage applies to model output,
            given the parsed parents the reviewed version was built from.
        text_of: the text a reviewer edits and a diff compares (default: indented JSON).
        parse_text: reads a plain-text edit when the artifact has a text form (the SOP); it gets
            the text and the original content, and returns the artifact or raises.
    """

    check: Callable[[Any, dict[str, BaseModel], "Settings"], list["CheckResult"]]
    text_of: Callable[[dict[str, Any]], str] | None = None
    parse_text: Callable[[str, dict[str, Any]], BaseModel] | None = None


@dataclass(frozen=True)
class TableView:
    """A table view of an artifact: a Prefect table artifact and, optionally, ``sopforge show``'s view."""

    rows: Callable[[dict[str, Any]], list[dict[str, Any]]]
    description: str
    in_terminal: bool = False


@dataclass(frozen=True)
class StageSpec:
    """How one stage plugs into the flow.

    Attributes:
        name: stage name, unique over all families (the Prefect task run name and the store's
            ``stage`` column; the second part of every LLM call key, so recordings depend on it).
        parents: stages whose artifacts are this stage's inputs.
        kind: artifact kind stored in ``artifacts.kind``.
        model: pydantic model of the artifact content.
        template_ids: templates whose source hashes are part of the cache key.
        run: the stage's pure ``run()`` function.
        make_inputs: builds the stage's input model from the theme and the parents' artifacts.
        params: stage parameters from the theme that change its output (part of the cache key).
        uses_llm: False for deterministic stages (package): no provider, template or model.
        gate: a review gate follows this stage unless the theme says otherwise.
        render: markdown of a stored artifact (Prefect UI, ``sopforge show``, review pages).
        table: a table view of the artifact, when it has one.
        edit: how a reviewer's edit is checked; None when the artifact is computed, not written.
        stores_rows: the artifact's ``rows`` (keyed by its ``id_field``) also go to the
            ``dataset_rows`` table and to ``<home>/datasets/<artifact id>.parquet``.
        expected_calls: how many LLM calls the stage makes on first try, from the theme (default:
            one per template); the pre-run cost estimate and the progress line use it.
        warm_up: slow one-time set-up ``run()`` needs (importing Great Expectations...), started
            in a background thread as soon as an upstream stage is generated, so that it overlaps
            the model calls before it instead of adding to the critical path.
        family: the family that owns it (None for shared stages); set by :func:`plan`.
    """

    name: str
    parents: tuple[str, ...]
    kind: str
    model: type[BaseModel]
    template_ids: tuple[str, ...]
    run: Callable[..., Any]
    make_inputs: Callable[["ThemeSpec", dict[str, BaseModel], InputContext], BaseModel]
    params: Callable[["ThemeSpec"], dict[str, Any]] = lambda spec: {}
    uses_llm: bool = True
    gate: bool = False
    render: Callable[[dict[str, Any]], str] | None = None
    table: TableView | None = None
    edit: EditSpec | None = None
    stores_rows: bool = False
    expected_calls: Callable[["ThemeSpec"], int] | None = None
    warm_up: Callable[[], Any] | None = None
    family: str | None = None


@dataclass(frozen=True)
class OptionsSpec:
    """A family's section of the theme file (e.g. ``hardening:``), validated by ``model``."""

    key: str
    model: type[BaseModel]


@dataclass(frozen=True)
class ExportSpec:
    """One thing a family writes under ``exports/<run id>/``, for docs and ``sopforge families``."""

    path: str
    description: str


@dataclass(frozen=True)
class SummaryTable:
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass
class FamilySummary:
    """What a family adds to a run's summary: JSON facts, tables and lines for the terminal."""

    facts: dict[str, Any] = field(default_factory=dict)
    tables: list[SummaryTable] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    export: str | None = None


@dataclass(frozen=True)
class Family:
    """A benchmark family's declaration.

    Attributes:
        name: package name under ``sopforge.families`` and the value themes list in ``families:``.
        title: one line saying what it builds.
        sources: the papers it ports (seed files in ``shared/seeds``).
        stages: its stages; parents may name shared stages (``context``) and its own stages only.
        options: its section of the theme file, if it has one.
        exports: what it writes under ``exports/<run id>/``.
        scorers: name -> deterministic scoring function (used by the oracle and agent evaluation).
        summarize: builds the family's part of a run summary from its stages' artifact contents.
        json_schemas: extra models (besides the stages' artifacts) whose JSON Schemas go to ``schemas/``.
        evaluation: how ``sopforge eval`` runs agents on its exports and scores them (its task runner,
            baselines and report; :class:`sopforge.evaluation.protocol.EvalSpec`); None when it has none yet.
    """

    name: str
    title: str
    sources: tuple[str, ...]
    stages: tuple[StageSpec, ...]
    options: OptionsSpec | None = None
    exports: tuple[ExportSpec, ...] = ()
    scorers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    summarize: Callable[[dict[str, dict[str, Any]]], FamilySummary] | None = None
    json_schemas: dict[str, type[BaseModel]] = field(default_factory=dict)
    evaluation: "EvalSpec | None" = None


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
