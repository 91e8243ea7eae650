"""Run one stage of one run: reuse what the store already holds, else generate and persist.

DuckDB is the single source of truth for what has been computed. A stage's ``input_key`` hashes
everything that changes its output (upstream content hashes, template hashes, provider, model,
sampling parameters, theme); when the store holds a validated or approved artifact with that key
the stage is not recomputed and costs no LLM call. This module knows nothing of Prefect.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sopforge.ask import Mapper, sequential_map, using_mapper
from sopforge.checks import apply_waivers
from sopforge.errors import SopforgeError, ValidationFailed
from sopforge.llm.factory import build_provider, default_model
from sopforge.llm.batch import Batcher
from sopforge.llm.budget import budget_for
from sopforge.llm.gateway import Gateway
from sopforge.llm.types import sha256_json
from sopforge.families import InputContext, StageSpec
from sopforge.prompts import default_registry
from sopforge.settings import Settings
from sopforge.checks import blocking_failures
from sopforge.store import REUSABLE_STATUSES, ArtifactRecord, ArtifactWrite, ReviewWrite, Store
from sopforge.theme import StageModelConfig, ThemeSpec, build_stored_spec


@dataclass
class StageOutcome:
    """What a stage produced or reused, for progress lines and summaries."""

    stage: str
    artifact: ArtifactRecord
    reused: bool
    llm_calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    checks: list = field(default_factory=list)

    @property
    def cached_share(self) -> float:
        """Share of this stage's prompt tokens the provider read from its prompt cache."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


# Events: 'started', 'finished' and 'failed' carry the StageOutcome (or None); 'review' carries
# a one-line message from a review gate (waiting, approved, regenerating...); 'call' carries the
# LLMCallRecord of every call that reached a provider (progress: calls, tokens, cost so far).
StageListener = Callable[[str, str, "StageOutcome | str | None"], None]
_listeners: list[StageListener] = []


def add_listener(listener: StageListener) -> None:
    """Register ``listener(stage, event, payload)``; events: 'started', 'finished', 'failed', 'review'."""
    _listeners.append(listener)


def remove_listener(listener: StageListener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def _emit(stage: str, event: str, outcome: StageOutcome | str | None = None) -> None:
    for listener in list(_listeners):
        listener(stage, event, outcome)


def run_spec(store: Store, run_id: str) -> tuple[ThemeSpec, dict]:
    run = store.get_run(run_id)
    return build_stored_spec(run.config["spec"], source=f"the configuration of run {run_id}")[0], run.config


class _Ledger:
    """The store as the gateway's ledger, telling progress listeners about every call (events
    'call' with the LLMCallRecord). ``fresh`` (a stage forced by ``sopforge rerun --from``): calls
    are recorded as usual but no answer comes from the response cache, so the stage really samples
    the model again."""

    def __init__(self, store: Store, stage: str, fresh: bool = False):
        self._store, self._stage, self._fresh = store, stage, fresh
        self.call_keys: list[str] = []  # calls this stage made, so a failed stage's answers can be set aside

    def cached_response(self, request_hash: str):
        return None if self._fresh else self._store.cached_response(request_hash)

    def claim(self, request_hash: str, *, max_wait: float):
        return self._store.claim(request_hash, max_wait=max_wait, lookup=not self._fresh)

    def record_call(self, record) -> None:
        self.call_keys.append(record.call_key)
        self._store.record_call(record)
        _emit(self._stage, "call", record)


def rerun_options(config: dict, stage: str) -> tuple[bool, str | None]:
    """Whether ``stage`` is forced to regenerate in this run, and the reviewer feedback for it."""
    rerun = config.get("rerun") or {}
    return stage in rerun.get("force", []), (rerun.get("feedback") or {}).get(stage)


def notify(stage: str, message: str) -> None:
    """Tell progress listeners what a review gate is doing."""
    _emit(stage, "review", message)


def previous_run_artifact(store: Store, config: dict, stage: str,
                          parents: dict[str, ArtifactRecord]) -> ArtifactRecord | None:
    """The artifact the run being resumed (``sopforge rerun``) holds for ``stage``, when it is
    still usable (validated or approved) and was built from exactly these parents.

    This is what carries a reviewer's work across a rerun: a version regenerated with feedback
    or edited at a gate has another input key than a fresh generation would, so the input key
    alone would miss it.
    """
    from_run = (config.get("rerun") or {}).get("from_run")
    if not from_run:
        return None
    record = store.artifact_for_stage(from_run, stage)
    if record is None or record.status not in REUSABLE_STATUSES:
        return None
    built_from = {p.stage: p.content_hash for p in store.parents_of(record.id)}
    return record if built_from == {name: p.content_hash for name, p in parents.items()} else None


def run_waivers(store: Store, spec: ThemeSpec, config: dict, run_id: str) -> dict[str, str]:
    """Checks overruled for this run: the theme file's ``waive:`` (and ``--waive``), then every ``waive``
    review decision of this run and of the run it resumes (one review row per check, "check: reason")."""
    waivers = dict(spec.waive)
    runs = [run_id, *([(config.get("rerun") or {}).get("from_run")] if (config.get("rerun") or {}).get("from_run")
                      else [])]
    for rid in runs:
        for review in store.reviews_for_run(rid):
            if review.decision == "waive" and review.comment and ": " in review.comment:
                name, reason = review.comment.split(": ", 1)
                waivers.setdefault(name, reason)
    return waivers


def input_key(definition: StageSpec, spec: ThemeSpec, parents: dict[str, ArtifactRecord],
              template_hashes: dict[str, str], model: str, settings: Settings,
              feedback: str | None = None) -> str:
    """Hash of everything that determines a stage's output: the cache key in the store."""
    cfg = spec.for_stage(definition.name) if definition.uses_llm else StageModelConfig()
    return sha256_json({
        "stage": definition.name,
        "theme": spec.theme if not definition.parents else None,
        "slug": spec.slug,
        "parents": {name: rec.content_hash for name, rec in sorted(parents.items())},
        "templates": template_hashes,
        "provider": cfg.provider,
        "model": model,
        "temperature": cfg.temperature,
        # base_url is deliberately left out: the same model behind another proxy or port is
        # the same model, and moving a server must not force paying for every stage again.
        "max_tokens": settings.max_tokens,
        "params": definition.params(spec),
        "feedback": feedback,
    })


def execute_stage(run_id: str, stage: str, *, settings: Settings, force: bool = False,
                  feedback: str | None = None, mapper: Mapper = sequential_map) -> StageOutcome:
    """Produce (or reuse) the artifact of ``stage`` for ``run_id`` and record it in the store.

    ``force`` samples the model again even when a reusable artifact exists (a review gate's
    rejection, or ``sopforge rerun --from``); ``feedback`` goes into the stage's prompt.
    ``mapper`` runs the stage's independent calls (``sopforge.ask.fan_out``); the flow passes one
    that submits them as concurrent Prefect task runs.

    Raises:
        ValidationFailed: the model's answers failed the stage's checks after every re-ask.
        ProviderError / ResponsePending / UserError: the LLM could not be asked or answered.
    """
    store = Store(settings.db_path)
    spec, config = run_spec(store, run_id)
    dag = spec.plan()
    definition = dag.get(stage)
    parents: dict[str, ArtifactRecord] = {}
    for parent in definition.parents:
        record = store.artifact_for_stage(run_id, parent)
        if record is None:
            raise SopforgeError(f"stage {stage} needs the {parent} artifact, which run {run_id} does not have yet")
        parents[parent] = record

    cfg = spec.for_stage(stage) if definition.uses_llm else StageModelConfig()
    model = (cfg.model or default_model(cfg.provider)) if definition.uses_llm else None
    registry = default_registry(settings)
    template_hashes = {tid: registry.get(tid).sha256 for tid in definition.template_ids}
    forced, configured_feedback = rerun_options(config, stage)
    forced, feedback = forced or force, feedback or configured_feedback
    key = input_key(definition, spec, parents, template_hashes, model, settings, feedback)

    _emit(stage, "started")
    reusable = None if forced else (previous_run_artifact(store, config, stage, parents)
                                    or store.find_reusable_artifact(stage, key))
    carried = None  # a per-run stage's earlier artifact with these inputs: its approval carries over
    if reusable is not None and definition.per_run and reusable.run_id != run_id:
        carried, reusable = reusable, None
    if reusable is not None:
        store.record_reuse(run_id, stage, reusable.id, family=definition.family)
        outcome = StageOutcome(stage, reusable, reused=True, checks=store.validations_for(reusable.id))
        _emit(stage, "finished", outcome)
        return outcome

    stage_run_id = store.start_stage(run_id, stage, family=definition.family)
    gateway = None
    if definition.uses_llm:
        provider_settings = settings.model_copy(update={"recordings_dir": _recordings(config)})
        provider = build_provider(cfg.provider, settings=provider_settings, base_url=cfg.base_url)
        budget = budget_for(run_id, spec.max_cost, store.run_cost(run_id)) if spec.max_cost else None
        batcher = (Batcher(provider, store, run_id=run_id, stage=stage, poll_seconds=settings.batch_poll_seconds)
                   if spec.batch and hasattr(provider, "submit_batch") else None)
        ledger = _Ledger(store, stage, fresh=forced)
        gateway = Gateway(provider, ledger=ledger, settings=settings, run_id=run_id,
                          family=definition.family, budget=budget, batcher=batcher)
    settings = settings.model_copy(update={"waivers": run_waivers(store, spec, config, run_id)})
    context = InputContext(run_id=run_id, exports_dir=settings.exports_dir, parent_records=parents)
    inputs = definition.make_inputs(
        spec, {n: dag.get(n).model.model_validate(r.content) for n, r in parents.items()}, context)
    # Only now, with this stage's own set-up done (its provider's SDK imported), do the later stages'
    # warm-ups start: they then overlap this stage's model calls instead of competing with its set-up
    # for the interpreter (a run's first stage took 2.2 s instead of 0.9 s to ask its first question
    # while Great Expectations was imported beside it).
    warm_up(dag.get(name) for name in dag.descendants(stage)[1:])
    try:
        with using_mapper(mapper):
            result = definition.run(inputs, llm=gateway, settings=settings, model=model,
                                    temperature=cfg.temperature, registry=registry, feedback=feedback)
    except BaseException as err:
        if isinstance(err, ValidationFailed):
            store.reject_answers(stage_run_id)
            if gateway is not None and hasattr(gateway.backend, "retire"):
                # An exchange folder would hand the same refused answers to the next run: set them aside.
                gateway.backend.retire(ledger.call_keys)
        store.finish_stage(stage_run_id, "failed", error=_error_line(err))
        _emit(stage, "failed")
        raise
    content = result.artifact.model_dump(mode="json")
    rows = content.get("rows") if definition.stores_rows else None
    record = store.save_artifact(ArtifactWrite(
        run_id=run_id, stage=stage, family=definition.family, kind=definition.kind, content=content,
        rows=rows, row_id_field=content.get("id_field") if rows is not None else None,
        funnel=getattr(result.artifact, "funnel", None),
        template_id=result.template_id, template_hash=result.template_hash, model=model,
        input_key=key, status="validated", parents=[p.id for p in parents.values()],
        checks=apply_waivers(result.checks, settings.waivers), stage_run_id=stage_run_id,
    ))
    if rows is not None:
        write_parquet(rows, settings.home / "datasets" / f"{record.id}.parquet")
    if carried is not None:
        record = carry_approval(store, record, carried, result.checks)
    outcome = StageOutcome(stage, record, reused=False, checks=store.validations_for(record.id))
    if gateway is not None:
        stats = gateway.stats
        outcome.llm_calls, outcome.cache_hits = stats.calls, stats.cache_hits
        outcome.input_tokens, outcome.output_tokens = stats.input_tokens, stats.output_tokens
        outcome.cached_tokens, outcome.cost_usd = stats.cached_tokens, stats.cost_usd
    _emit(stage, "finished", outcome)
    return outcome


def carry_approval(store: Store, record: ArtifactRecord, earlier: ArtifactRecord, checks: list) -> ArtifactRecord:
    """A per-run stage made again from the inputs of an approved artifact of an earlier run is
    approved too (its reviewer saw the same content but for the run id), when its checks pass."""
    if earlier.status != "approved" or record.status != "validated" or blocking_failures(checks):
        return record
    by = next((r.reviewer for r in reversed(store.reviews_for(earlier.id)) if r.decision in ("approve", "edit")), None)
    store.record_review(ReviewWrite(
        artifact_id=record.id, run_id=record.run_id, decision="approve", reviewer=by, source="auto",
        comment=f"made from the same inputs as {earlier.id} of run {earlier.run_id}, approved there"))
    store.set_artifact_status(record.id, "approved")  # a person's approval, carried: not the automatic gate's
    return store.get_artifact(record.id)


_warming: set[int] = set()
_warming_lock = threading.Lock()


def warm_up(stages: Iterable[StageSpec]) -> None:
    """Start the one-time set-up of stages that will run later (``StageSpec.warm_up``), each once
    per process, in background threads: called when a stage is generated, since its descendants
    then will be too (a fully reused run warms nothing up)."""
    for spec in stages:
        if spec.warm_up is None:
            continue
        with _warming_lock:
            if id(spec.warm_up) in _warming:
                continue
            _warming.add(id(spec.warm_up))
        threading.Thread(target=_quietly, args=(spec.warm_up,), name=f"warm-up {spec.name}", daemon=True).start()


def _quietly(set_up: Callable[[], object]) -> None:
    try:
        set_up()
    except Exception:  # noqa: BLE001 - the stage meets the same problem itself and reports it
        pass


def write_parquet(rows: list[dict], path: Path) -> None:
    """The dataset as Parquet for pandas/DuckDB users; written after the store commit (a derived copy)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)


def _recordings(config: dict) -> Path | None:
    value = config.get("recordings_dir")
    return Path(value) if value else None


def _error_line(err: BaseException) -> str:
    if isinstance(err, SopforgeError):
        return str(err)
    return f"{err.__class__.__name__}: {err}"
