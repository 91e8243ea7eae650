"""Turn a request (theme file or text plus overrides) into a validated run configuration.

Shared by ``sopforge generate`` and the deployable ``new-domain`` flow, so a run started from
a work pool is checked exactly like one started from the terminal: the spec is validated, the
replay folder exists and every provider can be built before anything is written.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sopforge.errors import UserError
from sopforge.llm.factory import DEFAULT_MODELS, build_provider
from sopforge.settings import Settings
from sopforge.theme import ThemeSpec, build_spec, load_theme_file

# Where an override came from, for error messages; ``new-domain`` passes its parameter names instead.
CLI_OPTIONS = {"base_url": "--base-url", "families": "--family"}


def resolve_spec(theme_file: Path | None, theme: str | None, overrides: dict[str, Any], *,
                 add_gates: list[str] = (), remove_gates: list[str] = (),
                 option_label: str | None = None, waivers: dict[str, str] | None = None) -> tuple[ThemeSpec, Path | None]:
    """Build the ThemeSpec from a file or ``--theme``; command-line options win over the file.

    An invalid option is reported as that option (``--rows -5: ...``), not as an error in the file;
    ``option_label`` spells an override's origin otherwise (``"parameter {}"`` for a flow).
    """
    if theme_file is not None and theme is not None:
        raise UserError("give either a theme file or --theme, not both")
    if theme_file is None and theme is None:
        raise UserError("no theme given: pass --theme \"…\" or a theme file such as examples/themes/pharmacy_refills.yaml")
    base_dir: Path | None = None
    if theme_file is not None:
        data, base_dir = load_theme_file(theme_file)
        source = str(theme_file)
    else:
        data, source = {"theme": theme}, "--theme"
    given = {k: v for k, v in overrides.items() if v is not None}
    data.update(given)
    if waivers:
        data["waive"] = {**(data.get("waive") or {}), **waivers}
        given["waive"] = waivers
    sources = {k: option_label.format(k) if option_label else CLI_OPTIONS.get(k, f"--{k}") for k in given}
    spec = build_spec(data, source=source, sources=sources)
    if add_gates or remove_gates:
        stages = spec.plan().names
        for stage in (*add_gates, *remove_gates):
            if stage not in stages:
                raise UserError(f"unknown gate stage {stage!r} in --gate/--no-gate: choose from {', '.join(stages)}")
        gates = list(spec.gates or []) + list(add_gates)
        spec = build_spec({**data, "gates": [g for g in dict.fromkeys(gates) if g not in remove_gates]}, source=source)
    return spec, base_dir


def recordings_dir(spec: ThemeSpec, base_dir: Path | None, settings: Settings) -> Path | None:
    """Absolute replay folder: the theme file's ``recordings`` or examples/recordings/<slug>."""
    uses_replay = any(spec.for_stage(s).provider == "replay" for s in spec.llm_stages)
    if not uses_replay:
        return None
    folder = (base_dir / spec.recordings) if spec.recordings and base_dir else (
        Path(spec.recordings) if spec.recordings else settings.resolved_recordings_dir / spec.slug)
    folder = folder.resolve()
    if not folder.is_dir():
        raise UserError(f"replay folder {folder} does not exist: set 'recordings:' in the theme file or record with --provider exchange")
    return folder


def preflight(spec: ThemeSpec, settings: Settings) -> None:
    """Fail before anything is written when a provider cannot be built (unknown name, missing key),
    a replay stage names a model it would ignore, or a local server's port is closed."""
    probed: set[str] = set()
    for stage in spec.llm_stages:
        cfg = spec.for_stage(stage)
        build_provider(cfg.provider, settings=settings, base_url=cfg.base_url, check_only=True)
        if cfg.provider == "replay" and cfg.model not in (None, DEFAULT_MODELS["replay"]):
            raise UserError(f"the replay provider answers from recordings and would ignore model {cfg.model!r} "
                            f"(stage {stage}): drop --model (or the theme's model:), or add --provider anthropic or openai "
                            f"to ask {cfg.model}")
        url = cfg.base_url or {"openai": settings.openai_base_url,
                               "anthropic": settings.anthropic_base_url}.get(cfg.provider)
        if url and url not in probed:
            probed.add(url)
            check_local_server(cfg.provider, url)


def check_local_server(provider: str, url: str) -> None:
    """A base URL on this machine whose port refuses connections fails now, in one line, instead of
    after the Prefect server has started and the first stage has asked (remote hosts are not probed).

    Raises:
        UserError: Nothing listens at ``url``.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return
    if not local:
        return
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except ConnectionRefusedError:
        raise UserError(f"{provider}: nothing is listening at {url} (connection refused): start the server "
                        f"or fix --base-url") from None
    except OSError:
        return  # slow or unusual: the provider's own retries decide



def run_tags(spec: ThemeSpec) -> list[str]:
    """Tags of the run's flow run in Prefect (its runs list shows them): ``sopforge``, the slug, the families."""
    return list(dict.fromkeys(["sopforge", spec.slug, *(spec.families or [])]))


def run_config(spec: ThemeSpec, base_dir: Path | None, settings: Settings) -> dict[str, Any]:
    """The ``runs.config`` of a new run, after the preflight checks (nothing is written here)."""
    replay_dir = recordings_dir(spec, base_dir, settings)
    preflight(spec, settings.model_copy(update={"recordings_dir": replay_dir}))
    return {"spec": spec.model_dump(mode="json"), "plan": spec.plan().names,
            "recordings_dir": str(replay_dir) if replay_dir else None,
            "max_tokens": settings.max_tokens, "max_attempts": settings.max_attempts}
