"""The protocol a benchmark family declares itself with: its stages, their edits, views and exports.

Data only, importing no family and no registry: a family's ``family`` module and the shared
stages (:mod:`sopforge.context.shared`) build these values, and the registry
(:mod:`sopforge.families`) reads them, so declaring a stage never imports the code that plans it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel

if TYPE_CHECKING:
    from sopforge.checks import CheckResult
    from sopforge.evaluation.protocol import EvalSpec
    from sopforge.settings import Settings
    from sopforge.theme import ThemeSpec

__all__ = ["EditSpec", "ExportSpec", "Family", "FamilySummary", "InputContext", "OptionsSpec", "StageSpec",
           "SummaryTable", "TableView"]


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
        per_run: its artifact belongs to the run that made it, e.g. it writes ``exports/<run id>/``:
            every run produces it again (never reused from another run, whose export would then be
            the only one), and an approval of the same inputs in an earlier run carries over. Only
            for deterministic stages (``uses_llm=False``): it costs no call.
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
    per_run: bool = False
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
