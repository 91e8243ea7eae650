"""``sopforge generate``: validate the request, create a run, execute the Prefect flow, summarise."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

from typing import TYPE_CHECKING

import typer

from sopforge.cli.output import err, handle_errors, human_int, out, print_funnel, print_json, run_funnel

# The command line answers at once: what a run needs (the store, the executor, Prefect, the
# families) is imported when a run starts, not when the module is loaded for --help.
if TYPE_CHECKING:
    from sopforge.families import FamilySummary
    from sopforge.orchestration import executor
    from sopforge.settings import Settings
    from sopforge.store import Store
    from sopforge.theme import ThemeSpec


class _Progress:
    """Live progress on stderr: a spinner line with the stages done of the plan's, the stages
    running now, LLM calls done of those expected, tokens and cost so far; one line as each stage
    ends.

    Stages run concurrently (independent branches of the plan) and so do calls inside a stage,
    so events arrive from several threads; one lock keeps the lines whole and the spinner current.
    """

    def __init__(self, quiet: bool, stages: int = 0, expected_calls: int = 0):
        self.quiet = quiet
        self.outcomes: dict[str, executor.StageOutcome] = {}
        self.stages, self.expected_calls = stages, expected_calls
        self.calls = self.tokens = 0
        self.usd = 0.0
        self._status = None
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()

    def __call__(self, stage: str, event: str, outcome: executor.StageOutcome | str | None) -> None:
        with self._lock:
            self._handle(stage, event, outcome)

    def status_line(self) -> str:
        done = f"stage {len(self.outcomes)} of {self.stages} done" if self.stages else f"{len(self.outcomes)} stages done"
        calls = f"{self.calls} of ~{max(self.expected_calls, self.calls)} LLM calls" if self.expected_calls \
            else f"{self.calls} LLM calls"
        return (f"{done} · running {', '.join(self._started)} · {calls} · {self.tokens:,} tokens · "
                f"${self.usd:.4f}")

    def _spin(self) -> None:
        if self.quiet:
            return
        if not self._started and self._status is not None:
            self._status.stop()
            self._status = None
        elif self._started:
            if self._status is None:
                self._status = err.status(self.status_line())
                self._status.start()
            else:
                self._status.update(self.status_line())

    def _handle(self, stage: str, event: str, outcome) -> None:
        if event == "review":
            if not self.quiet:
                err.print(f"[cyan]◆[/] {stage:<8} {outcome}")
            return
        if event == "call":
            self.calls += 1
            self.tokens += outcome.input_tokens + outcome.output_tokens
            self.usd += outcome.cost_usd
            self._spin()
            return
        if event == "started":
            self._started[stage] = time.monotonic()
            self._spin()
            return
        seconds = time.monotonic() - self._started.pop(stage, time.monotonic())
        if outcome is not None:
            self.outcomes[stage] = outcome
        self._spin()
        if self.quiet or event == "failed" or outcome is None:
            return  # the error line printed on exit says what failed; a second line would repeat it
        passed = sum(1 for c in outcome.checks if c.passed)
        how = f"reused from {outcome.artifact.run_id}" if outcome.reused else f"{outcome.llm_calls} LLM call(s)"
        cached = f"  prompt cache {outcome.cached_share:.0%}" if outcome.cached_share else ""
        err.print(f"[green]✓[/] {stage:<8} v{outcome.artifact.version}  {how}  checks {passed}/{len(outcome.checks)}"
                  f"{cached}  {seconds:.1f}s")


def family_summaries(spec: ThemeSpec, outcomes: dict[str, executor.StageOutcome]) -> dict[str, FamilySummary]:
    """Each chosen family's part of the summary, from the artifacts its stages produced or reused."""
    from sopforge.families import load_family

    contents = {stage: o.artifact.content for stage, o in outcomes.items()}
    summaries = {}
    for name in spec.families or []:
        family = load_family(name)
        if family.summarize is not None:
            summaries[name] = family.summarize({s.name: contents[s.name] for s in family.stages if s.name in contents})
    return summaries


def summary_dict(run_id: str, store: Store, spec: ThemeSpec, progress: _Progress, target: str,
                 seconds: float) -> dict[str, Any]:
    run = store.get_run(run_id)
    order = spec.plan().names
    stages = []
    for stage, o in sorted(progress.outcomes.items(), key=lambda item: order.index(item[0])):
        stages.append({
            "stage": stage, "artifact_id": o.artifact.id, "version": o.artifact.version,
            "status": "reused" if o.reused else "generated", "from_run": o.artifact.run_id,
            "checks_passed": sum(1 for c in o.checks if c.passed), "checks_total": len(o.checks),
            "llm_calls": o.llm_calls, "cache_hits": o.cache_hits,
            "input_tokens": o.input_tokens, "output_tokens": o.output_tokens,
            "cached_tokens": o.cached_tokens, "prompt_cache_share": round(o.cached_share, 4),
            "cost_usd": round(o.cost_usd, 6),
        })
    from sopforge.families import FamilySummary

    families = family_summaries(spec, progress.outcomes)
    sop_tools = families.get("sop_tools", FamilySummary()).facts  # kept at the top level, as before families
    return {
        "run_id": run_id, "theme": run.theme, "slug": run.theme_slug, "status": run.status, "error": run.error,
        "families": {name: {"facts": s.facts, "export": s.export, "lines": s.lines,
                            "tables": [{"title": t.title, "columns": list(t.columns), "rows": [list(r) for r in t.rows]}
                                       for t in s.tables]}
                     for name, s in families.items()},
        "coverage": sop_tools.get("coverage"), "export": sop_tools.get("export"), "oracle": sop_tools.get("oracle"),
        "stages": stages, "prefect": target, "seconds": round(seconds, 1),
        "llm_calls": sum(s["llm_calls"] for s in stages), "cache_hits": sum(s["cache_hits"] for s in stages),
        "input_tokens": sum(s["input_tokens"] for s in stages), "output_tokens": sum(s["output_tokens"] for s in stages),
        "cached_tokens": sum(s["cached_tokens"] for s in stages), "cost_usd": round(sum(s["cost_usd"] for s in stages), 6),
        "database": str(store.path),
        "funnel": run_funnel(store, run_id),
        "reviews": [{"stage": r.stage, "version": r.artifact_version, "decision": r.decision,
                     "reviewer": r.reviewer, "source": r.source, "comment": r.comment}
                    for r in store.reviews_for_run(run_id)],
    }


def _command_name() -> str:
    """How the user can call sopforge again: bare when on PATH, else the path they used (.venv/bin/sopforge)."""
    if shutil.which("sopforge"):
        return "sopforge"
    invoked = Path(sys.argv[0])
    return os.path.relpath(invoked) if invoked.name == "sopforge" else "sopforge"


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"run {summary['run_id']} ({summary['slug']}): {summary['status']}", title_justify="left")
    for col in ("stage", "artifact", "status", "checks", "LLM calls", "tokens in/out", "prompt cache", "cost"):
        table.add_column(col)
    for s in summary["stages"]:
        origin = s["status"] if s["status"] == "generated" else f"reused ({s['from_run']})"
        table.add_row(s["stage"], f"{s['artifact_id']} v{s['version']}", origin,
                      f"{s['checks_passed']}/{s['checks_total']}", str(s["llm_calls"]),
                      f"{human_int(s['input_tokens'])} / {human_int(s['output_tokens'])}",
                      f"{s['prompt_cache_share']:.0%}" if s["input_tokens"] else "-", f"${s['cost_usd']:.4f}")
    out.print(table)
    share = summary["cached_tokens"] / summary["input_tokens"] if summary["input_tokens"] else 0.0
    out.print(f"LLM calls made now: {summary['llm_calls']} (response-cache hits {summary['cache_hits']}); "
              f"tokens {human_int(summary['input_tokens'])} in ({share:.0%} from the provider's prompt cache) / "
              f"{human_int(summary['output_tokens'])} out; est. ${summary['cost_usd']:.4f}; "
              f"{summary['seconds']}s; {summary['prefect']}")
    for family in summary.get("families", {}).values():
        for t in family["tables"]:
            table = Table(title=t["title"], title_justify="left")
            for col in t["columns"]:
                table.add_column(col)
            for row in t["rows"]:
                table.add_row(*row)
            out.print(table)
    print_funnel(summary.get("funnel") or [])
    if summary.get("reviews"):
        out.print("review gates: " + ", ".join(
            f"{r['stage']} v{r['version']} {r['decision']} ({r['reviewer'] or r['source']})" for r in summary["reviews"]))
    if summary["status"] == "needs_review":
        out.print(f"[yellow]stopped for review:[/] {summary['error']}")
    for family in summary.get("families", {}).values():
        for line in family["lines"]:
            out.print(line)
    run_id, cmd = summary["run_id"], _command_name()
    out.print("Where to look next:")
    if summary["status"] == "needs_review":
        out.print(f"  {cmd} review show {run_id}        what the gate stopped on; then review approve|reject|edit")
    families = summary.get("families", {})
    if "sop_tools" in families:
        out.print(f"  {cmd} show {run_id} --stage sop      the SOP as markdown, its checks, lineage and LLM calls")
    out.print(f"  {cmd} show {run_id} --stage schema   the data schema as a table")
    out.print(f"  {cmd} ui                            flow runs, task runs and artifacts in the Prefect UI")
    if summary.get("export"):  # the sop_tools family's SOP-Bench folder
        out.print(f"  {cmd} audit {summary['export']}   re-check the exported SOP-Bench folder")
    for name, family in families.items():
        if family["export"] and name != "sop_tools":
            out.print(f"  {family['export']}   the {name} family's export")
    out.print(f"  {summary['database']}   plain SQL: runs, stage_runs, artifacts, artifact_edges, llm_calls, validations, task_expectations")


def _terminate(signum, frame) -> None:
    from sopforge.orchestration.lifecycle import Terminated

    raise Terminated()


def _on_sigterm(handler):
    """Install ``handler`` for SIGTERM (a run's process is stopped as Ctrl-C stops it); the previous one."""
    import signal

    try:
        return signal.signal(signal.SIGTERM, handler if handler is not None else signal.SIG_DFL)
    except ValueError:  # not the main thread: leave signals to whoever owns it
        return None


def _interrupted(store: Store, run_id: str, stop: BaseException) -> None:
    """Record a run stopped by SIGINT or SIGTERM as interrupted and raise the one-line error that says
    how to resume it (any other BaseException goes on as it is)."""
    from sopforge.errors import Interrupted
    from sopforge.orchestration.lifecycle import interruption, stop_signal

    signal_name = stop_signal(stop)
    if signal_name is None:
        raise stop
    store.record_interruption(run_id, interruption(run_id, signal_name))  # when stopped outside the flow
    raise Interrupted(f"run {run_id} interrupted by {signal_name}; its finished stages are kept: resume it with "
                      f"`{_command_name()} rerun {run_id}`", signal_name=signal_name) from None


@handle_errors
def generate(
    theme_file: Optional[Path] = typer.Argument(None, help="Theme YAML file, e.g. examples/themes/pharmacy_refills.yaml."),
    theme: Optional[str] = typer.Option(None, "--theme", help="Business theme text (instead of a file)."),
    provider: Optional[str] = typer.Option(None, help="anthropic, openai, replay or exchange (overrides the file)."),
    model: Optional[str] = typer.Option(None, help="Model name for every stage (overrides the file)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI/Anthropic-compatible server URL (vLLM, Ollama…)."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature for every stage."),
    slug: Optional[str] = typer.Option(None, help="Short name of the domain, letters a-z, digits and _ (default: from the theme)."),
    rows: Optional[int] = typer.Option(None, help="Dataset rows (tasks) to generate (default 50)."),
    review: Optional[str] = typer.Option(None, help="auto (gates approve when every check passed) or ui (pause for a reviewer)."),
    family: list[str] = typer.Option([], "--family", help="Build this benchmark family (repeatable; default: the "
                                                          "theme file's families, else every one)."),
    gate: list[str] = typer.Option([], "--gate", help="Add a review gate after this stage (repeatable)."),
    no_gate: list[str] = typer.Option([], "--no-gate", help="Remove the review gate after this stage (repeatable)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Spending cap in USD: an estimate is printed "
                                             "first, and the run stops (resumable) before a call could pass it."),
    batch: Optional[bool] = typer.Option(None, "--batch/--no-batch", help="Send each stage's independent calls "
                                         "through the provider's batch API (half price, slower)."),
    waive: list[str] = typer.Option([], "--waive", help="Overrule a check that is wrong for this domain: "
                                    "CHECK=REASON (repeatable; recorded and exported, like the theme file's waive:)."),
    home: Optional[Path] = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
) -> None:
    """Generate benchmarks from a theme, each stage validated, reviewed at its gate and stored with its lineage.

    Stages: the shared business context, then each chosen family's own (∥: side by side).

    sop_tools: schema → SOP → API graph ∥ dataset → tools → reference → distractors ∥ manipulations → package.
    """
    from sopforge.settings import load_settings

    started = time.monotonic()
    settings = load_settings(home=home)
    from sopforge.store import Store

    store = Store(settings.db_path)
    store.verify()  # a damaged store is one line at once: before the families load or a server starts
    from sopforge.run_request import resolve_spec, run_config

    spec, base_dir = resolve_spec(theme_file, theme, {
        "provider": provider, "model": model, "base_url": base_url, "temperature": temperature, "slug": slug,
        "rows": rows, "review": review, "families": family or None, "max_cost": max_cost, "batch": batch},
        add_gates=gate, remove_gates=no_gate, waivers=parse_waivers(waive))
    store.check_writable()
    store.mark_interrupted()  # runs whose process was killed stop looking 'running' in plain SQL too
    config = run_config(spec, base_dir, settings)  # checks every provider can be built
    begin_run(settings, spec)
    execute_run(store, settings, spec, config, as_json=as_json, started=started)


def begin_run(settings: Settings, spec: ThemeSpec) -> None:
    """Check the sandbox, then let the home's Prefect server come up while the run is prepared.

    Generated code runs only inside the sandbox's OS boundary, so a machine that cannot set it up stops
    here, in one line naming the fix, before any model call and before a server is started that would
    then idle for half an hour.
    """
    from sopforge.orchestration.prefect_env import begin_prefect
    from sopforge.sandbox.boundary import ensure_available as ensure_sandbox

    ensure_sandbox()
    if spec.review != "ui":  # --review ui needs a server with its UI the user started (checked later)
        begin_prefect(settings)


def parse_waivers(items: list[str]) -> dict[str, str]:
    """``--waive CHECK=REASON`` options as a dict; a missing reason is a one-line error."""
    from sopforge.errors import UserError

    waivers = {}
    for item in items:
        name, _, reason = item.partition("=")
        if not name.strip() or not reason.strip():
            raise UserError(f"--waive {item!r}: write CHECK=REASON, e.g. --waive dataset.realism.numeric_spread="
                            "\"thresholds are fixed per country\"")
        waivers[name.strip()] = reason.strip()
    return waivers


def ways_out(error: Exception, run_id: str, upstream: list[str] | None = None, stage: str | None = None) -> Exception:
    """A stage that failed its checks after every ask: the same line, ending with what the user can do next.

    Args:
        error: The run's failure.
        run_id: The run.
        upstream: The stages the failed one reads, whose artifacts may be the cause (a check over the tools'
            results can fail because of the data); named so the user can sample them instead.
        stage: The failed stage (from the store); default: the message's ``stage:`` prefix.
    """
    from sopforge.errors import ValidationFailed

    if not isinstance(error, ValidationFailed):
        return error
    stage = stage or str(error).split(":", 1)[0].strip()
    checks = list(dict.fromkeys(r["name"] for r in error.report if r.get("name")))[:2]
    waive = " ".join(f'--waive {c}="why it is wrong here"' for c in checks) or '--waive CHECK="why"'
    earlier = f" or one it reads ({', '.join(upstream)}) when the cause is there" if upstream else ""
    command, guide = f"sopforge rerun {run_id} --from {stage}", ' (add --feedback "…" to guide it)'
    # A check that knows where its cause is (data that no tool can match) names that stage and what to ask it.
    sent_back = next((d for r in error.report if isinstance(d := r.get("details"), dict) and d.get("rerun_from")), None)
    if sent_back:
        command, earlier = f"sopforge rerun {run_id} --from {sent_back['rerun_from']}", ""
        if sent_back.get("feedback"):
            command, guide = f'{command} --feedback "{sent_back["feedback"]}"', ""
    hint = (f" — next: sample it again with `{command}`{earlier}{guide}, or, if a check is wrong for this domain, "
            f"`sopforge rerun {run_id} {waive}`")
    fresh = ValidationFailed(str(error).splitlines()[0] + hint, report=error.report)
    fresh.raw_texts = getattr(error, "raw_texts", [])  # type: ignore[attr-defined]
    return fresh


def _upstream(spec: ThemeSpec, stage: str) -> list[str]:
    """The stages ``stage`` reads, directly or not (besides the shared context), or [] for a name that is not a
    stage: the package's audit can fail on the data, which it reads only through the tools and the reference."""
    try:
        return [p for p in spec.plan().ancestors(stage) if p != "context"]
    except Exception:  # noqa: BLE001 - an error message, not a stage name: no hint
        return []


def execute_run(store: Store, settings: Settings, spec: ThemeSpec, config: dict[str, Any], *, as_json: bool,
                started: float) -> None:
    """Create the run, execute the generate-domain flow with progress, print the summary.

    Raises:
        SopforgeError: the flow failed; the summary of what did complete is printed first.
    """
    from sopforge.errors import NeedsReview, UserError
    from sopforge.orchestration import executor
    from sopforge.orchestration.flows import import_engine, load_flow
    from sopforge.llm.factory import import_sdks
    from sopforge.orchestration.prefect_env import configure_prefect, ready_prefect, starting_prefect
    from sopforge.orchestration.prefect_server import lease

    target = configure_prefect(settings, shared_server=spec.review != "ui")
    if spec.review == "ui" and not os.environ.get("PREFECT_API_URL"):
        raise UserError("--review ui pauses the flow run for a reviewer, which needs a Prefect server with its UI: "
                        "start `sopforge ui` in another terminal (or set PREFECT_API_URL), then run this again")
    from sopforge.orchestration.estimate import estimate_run
    from sopforge.prompts import default_registry

    estimate = estimate_run(spec, settings, default_registry(settings), store)
    if estimate.billed or spec.max_cost is not None:
        err.print(estimate.line(spec.max_cost), markup=False, highlight=False)
    flow = load_flow("generate_domain", settings)  # imports Prefect, while a server just started comes up
    import_engine()
    if starting_prefect():  # still seconds to wait: the first stage's SDK is imported in them
        import_sdks(spec.for_stage(stage).provider for stage in spec.llm_stages)
    ready_prefect(settings)  # the only wait for it: everything above overlapped its start-up
    run_id = store.create_run(spec.theme, spec.slug, config)
    progress = _Progress(quiet=as_json, stages=len(spec.plan().stages), expected_calls=estimate.calls)
    executor.add_listener(progress)
    failure: Exception | None = None
    from prefect import tags  # Prefect is configured above; importing it earlier would miss that

    from sopforge.run_request import run_tags

    previous = _on_sigterm(_terminate)
    try:
        # The tags make the Prefect runs list show which theme and families a run is.
        with lease(settings.prefect_home), tags(*run_tags(spec)):
            flow(run_id=run_id, home=str(settings.home))
    except Exception as error:  # reported after the summary of what did complete
        failure = error
    except BaseException as stop:  # Ctrl-C or SIGTERM: stored as interrupted, with the way to resume
        _interrupted(store, run_id, stop)
    finally:
        executor.remove_listener(progress)
        _on_sigterm(previous)
    run = store.get_run(run_id)
    if run.status == "needs_review":
        # A gate stopped the run. Prefect may report that as a failure of its own (a pause that
        # timed out can only end Failed on the server); the store says what happened.
        failure = NeedsReview(run.error or f"run {run_id} stopped at a review gate")
    summary = summary_dict(run_id, store, spec, progress, target, time.monotonic() - started)
    if as_json:
        print_json(summary)
    else:
        print_summary(summary)
    if failure is not None:
        failed = [r.stage for r in store.stage_runs_for(run_id) if r.status == "failed"]
        stage = failed[-1] if failed else str(failure).split(":", 1)[0].strip()
        raise ways_out(failure, run_id, _upstream(spec, stage), stage)
