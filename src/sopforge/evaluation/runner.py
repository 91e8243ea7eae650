"""One evaluation: plan the families' items, run each one not yet done, store it, report.

The orchestration (``sopforge.orchestration.evaluation``) submits :meth:`Evaluation.run_item` for
every item as a Prefect task run; this module knows nothing of Prefect. An item is stored when it
finishes (``eval_items``), so an evaluation stopped by a crash or Ctrl-C resumes with the items
left, and the model calls of an item that was in flight are answered from the response cache
when it runs again: nothing is paid twice. An item whose model call waits for an exchange answer
is not stored (it is pending); everything else that goes wrong with an item is stored as its error.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sopforge.errors import ResponsePending, UserError
from sopforge.evaluation.protocol import EvalContext, EvalItem, EvalOptions, EvalReport, ItemRecord, ItemResult
from sopforge.llm.types import LLMRequest, LLMResponse

__all__ = ["Evaluation", "ItemLLM", "RESULTS_FOLDER", "leaderboard_markdown"]

RESULTS_FOLDER = "evaluations"
PLAN_SUITE = "plan"


class ItemLLM:
    """The gateway as one item sees it: every answer it gets is counted for the item."""

    def __init__(self, gateway: Any):
        self._gateway = gateway
        self.provider = gateway.provider
        self.calls = self.input_tokens = self.output_tokens = 0
        self.cost_usd = self.latency_ms = 0.0
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResponse:
        response = self._gateway.complete(request)
        with self._lock:
            self.calls += 1
            self.input_tokens += response.input_tokens
            self.output_tokens += response.output_tokens
            self.cost_usd += response.cost_usd
            self.latency_ms += response.latency_ms
        return response

    def accounting(self) -> dict[str, Any]:
        return {"llm_calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 6), "latency_ms": round(self.latency_ms, 1)}


@dataclass
class Evaluation:
    """An evaluation being run (see the module docstring); build it with :meth:`open`."""

    store: Any
    settings: Any
    eval_id: str
    run_id: str
    options: EvalOptions
    contexts: dict[str, EvalContext]
    gateways: dict[str, Any] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, eval_id: str, home: str | None = None) -> Evaluation:
        """Load an evaluation created by ``sopforge eval``."""
        from sopforge.settings import load_settings
        from sopforge.store import Store

        settings = load_settings(home=home)
        store = Store(settings.db_path)
        record = store.get_eval(eval_id)
        run = store.get_run(record.run_id)
        options = EvalOptions.model_validate(record.options)

        def stage_content(stage: str) -> dict[str, Any] | None:
            artifact = store.artifact_for_stage(run.id, stage)
            return artifact.content if artifact is not None else None

        contexts = {name: EvalContext(eval_id=record.id, run_id=run.id, theme_slug=run.theme_slug,
                                      export_dir=Path(record.export_dir), options=options, settings=settings,
                                      stage_content=stage_content) for name in options.families}
        return cls(store=store, settings=settings, eval_id=record.id, run_id=run.id, options=options, contexts=contexts)

    def _gateway(self, family: str) -> Any:
        with self._lock:
            if family not in self.gateways:
                from sopforge.llm import build_gateway

                settings = self.settings
                if self.options.provider == "replay" and settings.recordings_dir is None:
                    # Recorded evaluations live beside the domain's own recordings: examples/recordings/<slug>.
                    slug = self.contexts[family].theme_slug
                    settings = settings.model_copy(update={"recordings_dir": settings.resolved_recordings_dir / slug})
                gateway = build_gateway(settings, ledger=self.store, run_id=self.run_id,
                                        provider=self.options.provider, base_url=self.options.base_url)
                gateway.family = family
                self.gateways[family] = gateway
            return self.gateways[family]

    def todo(self, retry_errors: bool = False) -> list[tuple[str, EvalItem]]:
        """Every planned item that has no stored result yet (or an errored one, with ``retry_errors``)."""
        from sopforge.families import load_family

        if retry_errors:
            self.store.forget_errors(self.eval_id)  # an item that now waits for an answer must not keep its old error
        done = self.store.done_items(self.eval_id)
        items: list[tuple[str, EvalItem]] = []
        for name, ctx in self.contexts.items():
            spec = load_family(name).evaluation
            try:
                planned = spec.plan(ctx)
            except (UserError, OSError, ValueError, LookupError) as problem:
                planned = [EvalItem(suite=PLAN_SUITE, agent=PLAN_SUITE, item_id=name, payload={"error": str(problem)})]
            items += [(name, item) for item in planned if (name, item.suite, item.agent, item.item_id) not in done]
        return items

    def run_item(self, family: str, item: EvalItem) -> str:
        """Run and store one item; returns ``done``, ``error`` or ``pending`` (not stored)."""
        from sopforge.families import load_family

        llm = ItemLLM(self._gateway(family))
        if item.suite == PLAN_SUITE:
            result = ItemResult(error=item.payload["error"])
        else:
            try:
                result = load_family(family).evaluation.run(item, self.contexts[family], llm)
            except ResponsePending as waiting:
                with self._lock:
                    self.pending.append(str(waiting).splitlines()[0])
                return "pending"
            except Exception as bug:  # a defect in a runner still fails only its item
                result = ItemResult(error=f"internal error: {type(bug).__name__}: {str(bug).splitlines()[0][:300]}"
                                    if str(bug) else f"internal error: {type(bug).__name__}")
        record = {"suite": item.suite, "agent": item.agent, "item_id": item.item_id, **result.model_dump(),
                  **llm.accounting()}
        self.store.save_item(self.eval_id, family, record)
        return "error" if result.error else "done"

    def records(self, family: str) -> list[ItemRecord]:
        return [ItemRecord(**{k: v for k, v in row.items() if k in ItemRecord.model_fields})
                for row in self.store.eval_items(self.eval_id, family)]

    def reports(self) -> dict[str, EvalReport]:
        """Each family's report from its stored items (the plan errors as their own line)."""
        from sopforge.families import load_family

        out = {}
        for name, ctx in self.contexts.items():
            records = self.records(name)
            report = load_family(name).evaluation.report([r for r in records if r.suite != PLAN_SUITE], ctx)
            problems = [f"{r.suite}: {r.error}" for r in records if r.error and (r.suite == PLAN_SUITE or r.agent == PLAN_SUITE)]
            if problems:
                report.facts["problems"] = problems
            out[name] = report
        return out

    def summary(self) -> dict[str, Any]:
        """Everything ``sopforge eval`` prints and writes next to the export."""
        record = self.store.get_eval(self.eval_id)
        items = self.store.eval_items(self.eval_id)
        reports = self.reports()
        return {
            "eval_id": self.eval_id, "run_id": self.run_id, "status": record.status, "error": record.error,
            "options": self.options.model_dump(), "artifacts": record.artifacts,
            "items": len(items), "item_errors": sum(1 for i in items if i["status"] == "error"),
            "llm_calls": sum(i["llm_calls"] for i in items), "input_tokens": sum(i["input_tokens"] for i in items),
            "output_tokens": sum(i["output_tokens"] for i in items),
            "cost_usd": round(sum(i["cost_usd"] for i in items), 6),
            "families": {name: r.model_dump() for name, r in reports.items()},
            "errors": [{"family": i["family"], "suite": i["suite"], "agent": i["agent"], "item": i["item_id"],
                        "error": i["error"]} for i in items if i["status"] == "error"][:50],
        }

    def finish(self, statuses: list[str]) -> dict[str, Any]:
        """Record the outcome, write the results file, return the summary."""
        total = len(self.store.eval_items(self.eval_id)) + statuses.count("pending")
        if self.pending:
            self.store.set_eval_status(self.eval_id, "pending", items_total=total, error=(
                f"{len(self.pending)} item(s) wait for an answer, e.g. {self.pending[0]}"))
        else:
            self.store.set_eval_status(self.eval_id, "succeeded", items_total=total)
        summary = self.summary()
        folder = Path(self.contexts[next(iter(self.contexts))].export_dir) / RESULTS_FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{self.eval_id}.json.tmp"
        tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        tmp.replace(folder / f"{self.eval_id}.json")
        summary["results_file"] = str(folder / f"{self.eval_id}.json")
        return summary


def leaderboard_markdown(summary: dict[str, Any]) -> str:
    """The summary's tables as markdown (the Prefect leaderboard artifact)."""
    options = summary["options"]
    lines = [f"# Evaluation {summary['eval_id']} of run {summary['run_id']}",
             f"{options['provider']} / {options['model']}, agent {options['agent']}; {summary['items']} items, "
             f"{summary['item_errors']} with errors; {summary['llm_calls']} model calls, ${summary['cost_usd']:.4f}", ""]
    for name, report in summary["families"].items():
        for table in report["tables"]:
            lines += [f"## {name}: {table['title']}", "", "| " + " | ".join(table["columns"]) + " |",
                      "|" + "---|" * len(table["columns"])]
            lines += ["| " + " | ".join(row) + " |" for row in table["rows"]]
            lines.append("")
    return "\n".join(lines)
