"""``sopforge rerun``: a new run from an earlier one, reusing every upstream artifact.

Without ``--from`` the run resumes at its first incomplete stage: completed stages are found in
the store by their input key and cost nothing. With ``--from STAGE`` that stage samples the model
again (bypassing the response cache), with the reviewer's ``--feedback`` in its prompt and
``--model`` for it and its descendants. A descendant whose inputs come out unchanged is reused.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from typing import TYPE_CHECKING

import typer

from sopforge.cli.output import handle_errors

if TYPE_CHECKING:
    from sopforge.theme import ThemeSpec


def with_model(spec: ThemeSpec, stages: list[str], model: str) -> ThemeSpec:
    from sopforge.theme import StageModelConfig

    overrides = dict(spec.stages)
    for stage in stages:
        if stage in spec.llm_stages:  # deterministic stages have no model
            current = overrides.get(stage, StageModelConfig())
            overrides[stage] = current.model_copy(update={"model": model})
    return spec.model_copy(update={"stages": overrides})


@handle_errors
def rerun(
    run: str = typer.Argument(..., help="Run to start from (id or unique prefix)."),
    from_stage: Optional[str] = typer.Option(None, "--from", help="Regenerate this stage (and what depends on it)."),
    feedback: Optional[str] = typer.Option(None, help="Reviewer feedback added to the regenerated stage's prompt."),
    model: Optional[str] = typer.Option(None, help="Model for the regenerated stage and its descendants."),
    review: Optional[str] = typer.Option(None, help="auto or ui: how this rerun's review gates decide (default: as RUN)."),
    force: bool = typer.Option(False, help="Rerun even while its process still runs it (a run whose process is gone "
                                           "shows as interrupted and needs no --force)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Spending cap in USD for this run (default: as RUN)."),
    waive: list[str] = typer.Option([], "--waive", help="Overrule a check that is wrong for this domain: CHECK=REASON "
                                    "(repeatable; added to RUN's waivers, recorded and exported)."),
    home: Optional[Path] = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
) -> None:
    """Start a new run from RUN: reuse every upstream artifact, regenerate from a stage or resume."""
    from sopforge.cli.generate import begin_run, execute_run
    from sopforge.cli.inspect import existing_store
    from sopforge.errors import UserError
    from sopforge.run_request import preflight
    from sopforge.theme import build_spec, build_stored_spec

    started = time.monotonic()
    settings, store = existing_store(home, mark_interrupted=False)
    store.verify()  # a damaged store is one line now, before anything is written or a server starts
    store.mark_interrupted()
    previous = store.get_run(run)
    spec, dropped = build_stored_spec(previous.config["spec"], source=f"the configuration of run {previous.id}")
    if dropped:
        typer.echo(f"note: run {previous.id} was made by an older sopforge; options this version no longer has are "
                   f"left out: {', '.join(dropped)}", err=True)
    if from_stage is not None:
        spec.plan().get(from_stage)  # unknown stage -> one-line UserError listing the run's stages
    elif feedback is not None or model is not None:
        raise UserError("--feedback and --model apply to a regenerated stage: add --from STAGE")
    if previous.status in ("running", "awaiting_review") and not force:
        owner = f" (pid {previous.owner_pid} on {previous.owner_host})" if previous.owner_pid else ""
        what = ("is still running" if previous.status == "running"
                else "is paused at a review gate (answer it with `sopforge review`)")
        raise UserError(f"run {previous.id} {what}{owner}: wait for it to finish, or pass --force if you know its process is gone")
    if review is not None:
        spec = build_spec({**spec.model_dump(), "review": review}, source="--review")
    if max_cost is not None:
        spec = build_spec({**spec.model_dump(), "max_cost": max_cost}, source="--max-cost")
    if waive:
        from sopforge.cli.generate import parse_waivers

        spec = build_spec({**spec.model_dump(), "waive": {**spec.waive, **parse_waivers(waive)}}, source="--waive")
    if model is not None:
        spec = with_model(spec, spec.plan().descendants(from_stage), model)
    config = {**previous.config, "spec": spec.model_dump(mode="json"),
              "rerun": {"from_run": previous.id, "force": [from_stage] if from_stage else [],
                        "feedback": {from_stage: feedback} if feedback else {}}}
    store.check_writable()
    preflight(spec, settings.model_copy(update={"recordings_dir": config.get("recordings_dir")}))
    begin_run(settings, spec)
    execute_run(store, settings, spec, config, as_json=as_json, started=started)
