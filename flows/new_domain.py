"""Prefect flow: create a run from a theme, then generate its domain (the deployable entrypoint).

``sopforge generate`` creates the run in the terminal and calls ``generate-domain`` directly;
a run started from a work pool (``prefect deployment run 'new-domain/…'``, the UI's "Run"
button, ``sopforge serve``) has no terminal, so this flow does the same validation and run
creation inside the worker and then calls ``generate-domain`` as a subflow.
Deployment entrypoint: ``flows/new_domain.py:new_domain``.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, tags

from sopforge.gc_thresholds import collect_less_often
from sopforge.orchestration.flows import load_flow
from sopforge.run_request import resolve_spec, run_config, run_tags
from sopforge.settings import load_settings
from sopforge.store import Store

# A deployment's flow run process starts by importing this module (see sopforge.gc_thresholds).
collect_less_often()


@flow(name="new-domain", persist_result=False, log_prints=True)
def new_domain(theme_file: str | None = None, theme: str | None = None, provider: str | None = None,
               model: str | None = None, rows: int | None = None, review: str | None = None,
               home: str | None = None) -> dict[str, str]:
    """Validate the request, record a new run and generate it.

    Args:
        theme_file: Theme YAML, absolute or relative to the project root
            (e.g. ``examples/themes/pharmacy_refills.yaml``).
        theme: Business theme text, instead of a file.
        provider, model, rows, review: Override the theme file, as on the command line.
        home: SOPFORGE_HOME of the store, when not the worker's default.

    Returns:
        Artifact id per stage, plus ``run_id``.
    """
    settings = load_settings(home=home)
    path = None
    if theme_file is not None:
        path = Path(theme_file)
        if not path.is_absolute():
            path = settings.project_root / path
    spec, base_dir = resolve_spec(path, theme, {"provider": provider, "model": model, "rows": rows, "review": review},
                                  option_label="parameter {}")
    store = Store(settings.db_path)
    store.check_writable()
    run_id = store.create_run(spec.theme, spec.slug, run_config(spec, base_dir, settings))
    print(f"sopforge run {run_id} ({spec.slug})")
    generate_domain = load_flow("generate_domain", settings)
    with tags(*run_tags(spec)):
        return {"run_id": run_id, **generate_domain(run_id=run_id, home=str(settings.home))}
