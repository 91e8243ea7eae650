"""Load the Prefect flows defined in the top-level ``flows/`` folder.

``flows/`` is not an import package (generic names collide in site-packages), so flows are
loaded by path, exactly as a Prefect deployment entrypoint would load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sopforge.errors import UserError
from sopforge.settings import Settings

if TYPE_CHECKING:
    from prefect.flows import Flow


def load_flow(name: str, settings: Settings) -> "Flow":
    """Import ``flows/<name>.py`` and return its flow (imports Prefect: call after configure_prefect)."""
    from prefect.flows import load_flow_from_entrypoint

    path = settings.project_root / "flows" / f"{name}.py"
    if not path.is_file():
        raise UserError(f"flow file {path} is missing: run sopforge from a complete checkout (SOPFORGE_PROJECT_ROOT)")
    return load_flow_from_entrypoint(f"{path}:{name}")


def import_engine() -> None:
    """Import what Prefect imports only when the first flow run starts (its engines; FastAPI's encoder
    for the parameters: ~2 s here): called while a starting server comes up, it costs nothing there."""
    import fastapi.encoders  # noqa: F401
    import prefect.flow_engine  # noqa: F401
    import prefect.task_engine  # noqa: F401
