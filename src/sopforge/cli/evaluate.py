"""``sopforge eval RUN``: run agents on a generated domain and score them; ``sopforge eval report [EVAL]``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from sopforge.cli.output import err, handle_errors, out, print_json
from sopforge.errors import SopforgeError, UserError

REPORT = "report"


def print_tables(summary: dict[str, Any]) -> None:
    """Every family's metric tables, the baselines beside the agent, then one line of totals."""
    from rich.table import Table

    options = summary["options"]
    for name, report in summary["families"].items():
        for t in report["tables"]:
            table = Table(title=f"{name}: {t['title']}", title_justify="left")
            for col in t["columns"]:
                table.add_column(col)
            for row in t["rows"]:
                table.add_row(*row)
            out.print(table)
        for problem in report.get("facts", {}).get("problems", []):
            out.print(f"[yellow]not evaluated:[/] {problem}", highlight=False)
    out.print(f"evaluation {summary['eval_id']} of run {summary['run_id']} ({summary['status']}): "
              f"{options['provider']}/{options['model']}, agent {options['agent']}; {summary['items']} items "
              f"({summary['item_errors']} with errors); {summary['llm_calls']} model calls, "
              f"{summary['input_tokens']:,} / {summary['output_tokens']:,} tokens, ${summary['cost_usd']:.4f}",
              highlight=False)
    if summary.get("results_file"):
        out.print(f"results: {summary['results_file']}", highlight=False)


def _report(eval_id: str | None, home: Path | None, as_json: bool) -> None:
    from sopforge.cli.inspect import existing_store
    from sopforge.evaluation.runner import Evaluation

    _, store = existing_store(home)
    record = store.get_eval(eval_id) if eval_id else store.latest_eval()
    if record is None:
        raise UserError("no evaluation yet: run `sopforge eval RUN --provider P --model M` first")
    summary = Evaluation.open(record.id, str(home) if home else None).summary()
    print_json(summary) if as_json else print_tables(summary)


@handle_errors
def evaluate(
    run: str = typer.Argument(..., help="Run id (or prefix) to evaluate; or `report` to print an evaluation."),
    eval_id: Optional[str] = typer.Argument(None, help="With `report`: the evaluation (default: the newest)."),
    provider: Optional[str] = typer.Option(None, help="anthropic, openai, replay or exchange."),
    model: Optional[str] = typer.Option(None, help="The model under evaluation (default: the provider's)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI/Anthropic-compatible server URL."),
    family: list[str] = typer.Option([], "--family", help="Evaluate this family (repeatable; default: every one "
                                                          "the run built that can be evaluated)."),
    agent: str = typer.Option("fc", help="fc (native function calling) or react (ReAct text agent)."),
    limit: Optional[int] = typer.Option(None, help="Only the first N tasks of each suite."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Model turns per task (default 10 fc, 15 react)."),
    temperature: float = typer.Option(0.5, help="Sampling temperature (SOP-Bench: 0.5)."),
    ablations: bool = typer.Option(False, "--ablations", help="Also run each SOP variant and the minimal registry."),
    judge_model: Optional[str] = typer.Option(None, "--judge-model",
                                              help="Model of the LLM judges (TOD task 3, PROBE T24 and T25)."),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="Run again the items stored with an error."),
    home: Optional[Path] = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
) -> None:
    """Run agents on a generated domain (through its MCP environment) and score them with each paper's
    metrics, every baseline beside them. Resumes an unfinished evaluation with the same options."""
    if run == REPORT:
        _report(eval_id, home, as_json)
        return
    if eval_id is not None:
        raise UserError(f"unexpected argument {eval_id!r}: options start with --, e.g. --provider replay")
    from sopforge.cli.inspect import existing_store
    from sopforge.evaluation.protocol import AGENT_KINDS, EvalOptions
    from sopforge.families import evaluable
    from sopforge.llm import build_provider, default_model
    from sopforge.orchestration.prefect_env import begin_prefect

    settings, store = existing_store(home)
    record = store.get_run(run)
    if agent not in AGENT_KINDS:
        raise UserError(f"unknown agent {agent!r}: choose fc or react")
    choices = evaluable()
    # By default, the evaluable families this run built (a sop_tools-only run has no PROBE export to evaluate).
    built = ((record.config or {}).get("spec") or {}).get("families") or list(choices)
    families = family or [f for f in choices if f in built]
    unknown = [f for f in families if f not in choices]
    if unknown:
        raise UserError(f"the {', '.join(unknown)} family has no evaluation yet: choose from {', '.join(choices)}")
    if not families:
        raise UserError(f"run {record.id} built none of the families that can be evaluated ({', '.join(choices)})")
    provider = provider or settings.provider
    build_provider(provider, settings=settings, base_url=base_url, check_only=True)  # unknown name, missing key
    options = EvalOptions(families=families, provider=provider, model=model or settings.model or default_model(provider),
                          base_url=base_url, agent=agent, limit=limit, max_steps=max_steps, temperature=temperature,
                          ablations=ablations, judge_model=judge_model)
    export_dir = settings.exports_dir / record.id
    if not export_dir.is_dir():
        raise UserError(f"run {record.id} has no export at {export_dir} (status {record.status}): "
                        f"finish it with `sopforge rerun {record.id}` first")
    from sopforge.sandbox.boundary import ensure_available

    ensure_available()
    begin_prefect(settings)
    resumed = store.resumable_eval(record.id, options.key())
    if resumed is not None:
        eval_run = resumed.id
        err.print(f"resuming evaluation {eval_run} (same options; finished items are kept)", highlight=False)
        store.set_eval_status(eval_run, "running")
    else:
        package = [a.id for a in store.artifacts_for_run(record.id) if a.stage in ("package", "reference", "manipulations",
                                                                               "api_graph")]
        eval_run = store.create_eval(record.id, options.model_dump(), options.key(), artifacts=package,
                                     export_dir=str(export_dir))
    summary = _execute(settings, eval_run, retry_errors)
    print_json(summary) if as_json else print_tables(summary)
    if summary["status"] == "pending":
        raise SopforgeError(f"{summary['error']}; answer it and run the same command again to go on")


def _execute(settings: Any, eval_id: str, retry_errors: bool) -> dict[str, Any]:
    """Run the evaluate flow (items as task runs); a Ctrl-C leaves a resumable evaluation."""
    from sopforge.orchestration.flows import load_flow
    from sopforge.orchestration.prefect_env import configure_prefect, ready_prefect
    from sopforge.orchestration.prefect_server import lease
    from sopforge.store import Store

    configure_prefect(settings, shared_server=True)
    from prefect.task_runners import ThreadPoolTaskRunner  # Prefect reads the environment set just above

    flow = load_flow("evaluate", settings).with_options(
        task_runner=ThreadPoolTaskRunner(max_workers=settings.max_concurrency))
    ready_prefect(settings)  # a server begin_prefect started came up while the flow was imported
    store = Store(settings.db_path)
    try:
        with lease(settings.prefect_home):
            return flow(eval_id=eval_id, home=str(settings.home), retry_errors=retry_errors)
    except KeyboardInterrupt:
        store.set_eval_status(eval_id, "interrupted", error="interrupted: run the same command to resume")
        raise
    except Exception as error:
        line = str(error).splitlines()[0] if str(error) else type(error).__name__
        store.set_eval_status(eval_id, "failed", error=line)
        if os.environ.get("SOPFORGE_DEBUG"):
            raise
        raise SopforgeError(f"evaluation {eval_id} failed: {line}; finished items are kept, run the same command "
                            "to resume") from error
