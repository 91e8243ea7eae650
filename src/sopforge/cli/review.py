"""``sopforge review``: list runs waiting for review, show the artifact, decide from a terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from sopforge.cli.inspect import existing_store
from sopforge.cli.output import handle_errors, out, print_json
from sopforge.errors import UserError

if TYPE_CHECKING:  # the review machinery loads the families: only when a command needs it
    from sopforge.store import ReviewRecord

review_app = typer.Typer(help="Review gates: list runs waiting for review, show, approve, reject, edit or waive.",
                         no_args_is_help=True)

HOME = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts).")
STAGE = typer.Option(None, help="Stage under review (checked against the gate the run waits at).")
REVIEWER = typer.Option("", help="Your name or handle, stored with the decision.")


@review_app.command("list")
@handle_errors
def list_waiting(home: Optional[Path] = HOME, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Runs waiting for a decision: paused at a gate (awaiting_review) or stopped by one (needs_review)."""
    from sopforge.review.submit import WAITING, pending_review

    _, store = existing_store(home)
    rows = []
    for run in store.list_runs(limit=500):
        if run.status in WAITING:
            try:
                p = pending_review(store, run.id)
            except UserError as err:
                rows.append({"run": run.id, "slug": run.theme_slug, "status": run.status, "stage": "-",
                             "version": None, "artifact": None, "since": str(run.updated_at), "note": str(err)})
                continue
            rows.append({"run": run.id, "slug": run.theme_slug, "status": run.status, "stage": p.stage,
                         "version": p.artifact.version, "artifact": p.artifact.id, "since": str(run.updated_at),
                         "note": run.error or ""})
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no run is waiting for review")
        return
    table = Table(title="runs waiting for review", title_justify="left")
    for col in ("run", "slug", "status", "gate", "artifact", "since", "note"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["run"], r["slug"], r["status"], f"{r['stage']} v{r['version']}" if r["version"] else r["stage"],
                      r["artifact"] or "-", r["since"][:19], r["note"])
    out.print(table)


@review_app.command("show")
@handle_errors
def show(run: str = typer.Argument(..., help="Run id (or unique prefix)."), stage: Optional[str] = STAGE,
         raw: bool = typer.Option(False, "--raw", help="Print only the editable text (for `review edit --file`)."),
         home: Optional[Path] = HOME, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The artifact a run waits on, its checks (failures first) and the run's earlier decisions."""
    from rich.markdown import Markdown

    from sopforge.render import artifact_markdown, checks_markdown
    from sopforge.review.edits import review_text
    from sopforge.review.submit import pending_review

    _, store = existing_store(home)
    p = pending_review(store, run, stage)
    if raw:
        out.print(review_text(p.stage, p.artifact.content), markup=False, highlight=False, soft_wrap=True)
        return
    checks = store.validations_for(p.artifact.id)
    reviews = store.reviews_for_run(p.run.id)
    if as_json:
        print_json({"run_id": p.run.id, "status": p.run.status, "stage": p.stage,
                    "artifact": p.artifact.model_dump(mode="json"),
                    "checks": [c.model_dump(mode="json") for c in checks],
                    "reviews": [r.model_dump(mode="json") for r in reviews]})
        return
    out.rule(f"run {p.run.id} ({p.run.status}): {p.stage} v{p.artifact.version}  {p.artifact.id}")
    out.print(Markdown(checks_markdown(checks)))
    out.print(Markdown(artifact_markdown(p.stage, p.artifact.content, p.artifact.family)))
    if reviews:
        out.print("decisions so far: " + "; ".join(_describe(r) for r in reviews))
    out.print(f"decide: sopforge review approve {p.run.id} | reject {p.run.id} --feedback \"…\" | "
              f"edit {p.run.id} --file F  (sopforge review show {p.run.id} --raw > F gives the editable text)")


def _describe(r: ReviewRecord) -> str:
    who = r.reviewer or r.source or "?"
    return f"{r.stage} v{r.artifact_version} {r.decision} by {who}" + (f" ({r.comment})" if r.comment else "")


def _decide(run: str, stage: str | None, home: Path | None, *, decision: str, feedback: str = "",
            edited: str = "", reviewer: str = "", waive: str = "") -> None:
    from sopforge.orchestration.prefect_env import configure_prefect
    from sopforge.review.submit import pending_review, submit

    settings, store = existing_store(home)
    pending = pending_review(store, run, stage)
    if pending.request_id is not None:
        configure_prefect(settings)  # resuming talks to the Prefect server the paused run uses
    review = submit(store, settings, pending, decision=decision, feedback=feedback, edited=edited, reviewer=reviewer,
                    waive=waive)
    run_id = pending.run.id
    if review.decision == "refused":
        raise UserError(f"the flow refused the decision: {review.comment}")
    paused = pending.request_id is not None
    if review.decision == "approve":
        out.print(f"approved {pending.stage} v{pending.artifact.version} of run {run_id}; "
                  + ("the run continues" if paused else f"continue it with `sopforge rerun {run_id}`"))
    elif review.decision == "reject":
        out.print(f"rejected {pending.stage} v{pending.artifact.version} of run {run_id}; "
                  + (f"the flow regenerates {pending.stage} with your feedback and waits at this gate again" if paused
                     else f"regenerate it with `sopforge rerun {run_id} --from {pending.stage} --feedback \"{feedback}\"`"))
    elif review.decision == "waive":
        waived = [r.comment.split(": ", 1)[0] for r in store.reviews_for_run(run_id)
                  if r.decision == "waive" and r.artifact_id == pending.artifact.id and r.comment]
        out.print(f"approved {pending.stage} v{pending.artifact.version} of run {run_id}, overruling "
                  f"{', '.join(waived)}; " + ("the run continues" if paused else f"continue it with `sopforge rerun {run_id}`"))
    elif review.decision == "edit":
        new = store.get_artifact(review.result_artifact_id)
        changed = sum(1 for line in (review.edit_diff or "").splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        out.print(f"stored your edit as {pending.stage} v{new.version} ({new.id}, approved, {changed} changed lines); "
                  + ("the run continues with it" if paused else f"continue with `sopforge rerun {run_id}`"))


@review_app.command("approve")
@handle_errors
def approve(run: str = typer.Argument(..., help="Run id (or unique prefix)."), stage: Optional[str] = STAGE,
            reviewer: str = REVIEWER, home: Optional[Path] = HOME) -> None:
    """Approve the artifact the run waits on."""
    _decide(run, stage, home, decision="approve", reviewer=reviewer)


@review_app.command("reject")
@handle_errors
def reject(run: str = typer.Argument(..., help="Run id (or unique prefix)."), stage: Optional[str] = STAGE,
           feedback: str = typer.Option(..., help="What to change; added to the regenerated stage's prompt."),
           reviewer: str = REVIEWER, home: Optional[Path] = HOME) -> None:
    """Reject the artifact: the stage is regenerated with your feedback in its prompt."""
    _decide(run, stage, home, decision="reject", feedback=feedback, reviewer=reviewer)


@review_app.command("waive")
@handle_errors
def waive(run: str = typer.Argument(..., help="Run id (or unique prefix)."), stage: Optional[str] = STAGE,
          check: Optional[list[str]] = typer.Option(None, "--check", help="A failed check to overrule (repeat it; "
                                                   "default: every failed check of the artifact)."),
          reason: str = typer.Option(..., help="Why the check is wrong for this domain; recorded and exported."),
          reviewer: str = REVIEWER, home: Optional[Path] = HOME) -> None:
    """Approve the artifact, overruling failed checks that are wrong for this domain (recorded with the reason)."""
    _decide(run, stage, home, decision="waive", feedback=reason, reviewer=reviewer, waive=",".join(check or []))


@review_app.command("edit")
@handle_errors
def edit(run: str = typer.Argument(..., help="Run id (or unique prefix)."), stage: Optional[str] = STAGE,
         file: Path = typer.Option(..., "--file", help="The corrected artifact (JSON/YAML; the SOP may be plain text)."),
         comment: str = typer.Option("", help="Why you edited it."),
         reviewer: str = REVIEWER, home: Optional[Path] = HOME) -> None:
    """Replace the artifact with your corrected version (re-validated, stored as a new approved version)."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read {file} ({err.__class__.__name__}): pass a UTF-8 text file") from None
    _decide(run, stage, home, decision="edit", edited=text, feedback=comment, reviewer=reviewer)
