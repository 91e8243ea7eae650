"""docker-compose.yml, Dockerfile and prefect.yaml agree with each other and with the code.

Each rule is a checker that returns the problems it finds; the real files must have none, and
every checker is also run on a copy broken in the way it guards against, so none of them can
pass vacuously. Nothing here needs Docker: the files are parsed, and the commands they run are
looked up in the installed environment (the image installs the same lock).
"""

from __future__ import annotations

import copy
import re
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

import pytest
import typer
import yaml

from sopforge.cli import app as cli_app
from sopforge.cli import serve as serve_cli

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
PREFECT_YAML = ROOT / "prefect.yaml"
DOCKERFILE = ROOT / "Dockerfile"
PROJECT_IMAGE = "sopforge:latest"
SERVICES = {"postgres", "prefect-server", "worker"}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY|AUTH", re.I)
# ${VAR}, ${VAR:?message} or ${VAR?message}: a value from the environment with no default.
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?::?\?)[^}]*)?\}")
DEFAULTED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-")


def split_url(value: str):
    """urlsplit for a URL holding ${VAR:?message} interpolations (their "?" would start a query):
    each one is replaced by a ``__VAR_<name>__`` marker first."""
    return urlsplit(INTERPOLATION.sub(lambda m: f"__VAR_{m.group('name')}__", value))


def is_marker(text: str | None) -> bool:
    return bool(text) and re.fullmatch(r"__VAR_[A-Za-z_][A-Za-z0-9_]*__", text) is not None


def load_compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def load_prefect_yaml() -> dict[str, Any]:
    return yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))


def env_of(service: dict[str, Any]) -> dict[str, str | None]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return {k: v for k, _, v in (item.partition("=") if "=" in item else (item, "", None) for item in env)}
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(c) for c in command]


def uses_project_image(service: dict[str, Any]) -> bool:
    return "build" in service or service.get("image") == PROJECT_IMAGE


def named_mounts(service: dict[str, Any]) -> dict[str, str]:
    """target -> named volume, for the service's volume mounts that are not host paths."""
    mounts = {}
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            source, target, kind = volume.get("source"), volume.get("target"), volume.get("type", "volume")
        else:
            source, _, rest = str(volume).partition(":")
            target, kind = rest.split(":")[0], "volume"
        if kind == "volume" and source and not source.startswith((".", "/", "~", "$")):
            mounts[target] = source
    return mounts


# --- checkers: each returns the problems it finds ----------------------------------------------

def check_services(compose: dict) -> list[str]:
    missing = SERVICES - set(compose.get("services") or {})
    return [f"missing services: {sorted(missing)}"] if missing else []


def check_volumes(compose: dict) -> list[str]:
    declared = set(compose.get("volumes") or {})
    used = {v for s in compose["services"].values() for v in named_mounts(s).values()}
    problems = [f"volume {v!r} is used but not declared" for v in sorted(used - declared)]
    problems += [f"volume {v!r} is declared but never mounted" for v in sorted(declared - used)]
    return problems


def check_builds(compose: dict) -> list[str]:
    problems = []
    for name, service in compose["services"].items():
        build = service.get("build")
        if build is None:
            continue
        context, dockerfile = (build, "Dockerfile") if isinstance(build, str) else (
            build.get("context", "."), build.get("dockerfile", "Dockerfile"))
        if not (ROOT / context).is_dir():
            problems.append(f"{name}: build context {context!r} does not exist")
        elif not (ROOT / context / dockerfile).is_file():
            problems.append(f"{name}: {dockerfile!r} does not exist in {context!r}")
    return problems


def _cli_problem(service: str, args: list[str]) -> str | None:
    group = typer.main.get_command(cli_app.app)
    if not args or args[0] not in group.commands:
        return f"{service}: `sopforge {' '.join(args[:1])}` is not a registered sopforge command"
    command = group.commands[args[0]]
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    unknown = [a.split("=")[0] for a in args[1:] if a.startswith("--") and a.split("=")[0] not in known]
    return f"{service}: `sopforge {args[0]}` has no option {unknown}" if unknown else None


def check_commands(compose: dict) -> list[str]:
    """Commands of services on the project image name console scripts the image installs; the
    sopforge ones name registered commands and options."""
    scripts = {e.name for e in entry_points(group="console_scripts")}
    problems = []
    for name, service in compose["services"].items():
        command = command_of(service)
        if not command or not uses_project_image(service):
            continue
        if command[0] not in scripts:
            problems.append(f"{name}: {command[0]!r} is not installed in the environment")
        elif command[0] == "sopforge" and (problem := _cli_problem(name, command[1:])):
            problems.append(problem)
    return problems


def check_ports(compose: dict) -> list[str]:
    problems = []
    for name, service in compose["services"].items():
        if service.get("network_mode") == "host":
            problems.append(f"{name}: network_mode host bypasses the port bindings")
        for port in service.get("ports") or []:
            host_ip = port.get("host_ip") if isinstance(port, dict) else (
                str(port).rsplit(":", 2)[0] if str(port).count(":") == 2 else None)
            if host_ip != "127.0.0.1":
                problems.append(f"{name}: port {port!r} is not bound to 127.0.0.1 only")
    return problems


def check_secrets(compose: dict) -> list[str]:
    """Secret-looking variables and URL credentials come from the environment, never literals or defaults."""
    problems = []
    for name, service in compose["services"].items():
        for key, value in env_of(service).items():
            if value is None:
                continue  # passed through from the host environment when set there
            if DEFAULTED.search(value):
                problems.append(f"{name}: {key} has a default value")
            if SECRET_NAME.search(key) and not INTERPOLATION.fullmatch(value):
                problems.append(f"{name}: {key} is not a ${{VAR}} from the environment")
            if "://" in value:
                password = split_url(value).password
                if password is not None and not is_marker(password):
                    problems.append(f"{name}: {key} holds a literal password")
    return problems


def check_auth(compose: dict) -> list[str]:
    services = compose["services"]
    server = env_of(services["prefect-server"]).get("PREFECT_SERVER_API_AUTH_STRING")
    worker = env_of(services["worker"]).get("PREFECT_API_AUTH_STRING")
    if not server:
        return ["prefect-server: PREFECT_SERVER_API_AUTH_STRING is not set: the API is open"]
    if not worker:
        return ["worker: PREFECT_API_AUTH_STRING is not set: the worker cannot reach a protected API"]
    names = [m.group("name") if (m := INTERPOLATION.fullmatch(v)) else None for v in (server, worker)]
    if None in names or names[0] != names[1]:
        return [f"server and worker auth strings come from different variables: {server!r} vs {worker!r}"]
    if ":?" not in server:
        return ["PREFECT_SERVER_API_AUTH_STRING is optional: use ${VAR:?message} so compose refuses to start without it"]
    return []


def check_wiring(compose: dict) -> list[str]:
    """The worker talks to the server service, the server to the postgres service, in start order."""
    services, problems = compose["services"], []
    api = split_url(env_of(services["worker"]).get("PREFECT_API_URL") or "")
    if api.hostname not in services or api.port != 4200 or api.path != "/api":
        problems.append(f"worker: PREFECT_API_URL {api.geturl()!r} is not the prefect-server service's API")
    server_cmd = command_of(services["prefect-server"])
    if server_cmd[:3] != ["prefect", "server", "start"] or "0.0.0.0" not in server_cmd:
        problems.append("prefect-server: must run `prefect server start --host 0.0.0.0` to be reachable by workers")
    db = split_url(env_of(services["prefect-server"]).get("PREFECT_API_DATABASE_CONNECTION_URL") or "")
    if db.scheme != "postgresql+asyncpg" or db.hostname != "postgres":
        problems.append("prefect-server: PREFECT_API_DATABASE_CONNECTION_URL must be postgresql+asyncpg://…@postgres")
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        for dep in depends:
            condition = depends[dep].get("condition") if isinstance(depends, dict) else None
            if condition != "service_healthy":
                problems.append(f"{name}: depends on {dep} without condition service_healthy")
            elif "healthcheck" not in services.get(dep, {}):
                problems.append(f"{name}: waits for {dep} to be healthy but {dep} has no healthcheck")
    return problems


def dockerfile_env() -> dict[str, str]:
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip().startswith("ENV "):
            env.update(re.findall(r"([A-Z_][A-Z0-9_]*)=(\S+)", line))
    return env


def check_data_volume(compose: dict) -> list[str]:
    """Run state lives on a named volume mounted exactly at the worker's SOPFORGE_HOME."""
    worker = compose["services"]["worker"]
    home = env_of(worker).get("SOPFORGE_HOME") or dockerfile_env().get("SOPFORGE_HOME")
    if home is None:
        return ["worker: SOPFORGE_HOME is set neither in compose nor in the Dockerfile"]
    if home not in named_mounts(worker):
        return [f"worker: no named volume is mounted at SOPFORGE_HOME ({home}); runs would be lost with the container"]
    return []


COMPOSE_CHECKS: list[Callable[[dict], list[str]]] = [
    check_services, check_volumes, check_builds, check_commands, check_ports, check_secrets, check_auth,
    check_wiring, check_data_volume,
]


# --- the real files ---------------------------------------------------------------------------

@pytest.mark.parametrize("check", COMPOSE_CHECKS, ids=lambda c: c.__name__)
def test_compose_file_passes(check):
    assert check(load_compose()) == []


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(compose: dict) -> None:
        *parents, last = path.split("/")
        node = compose
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return mutate


DELETE = object()
W, S = "services/worker", "services/prefect-server"

BROKEN = {
    "no worker": (check_services, _set(W, DELETE), "missing services"),
    "undeclared volume": (check_volumes, _set("volumes/sopforge-data", DELETE), "not declared"),
    "unused volume": (check_volumes, _set("volumes/spare", None), "never mounted"),
    "missing build context": (check_builds, _set(f"{W}/build", "no-such-dir"), "does not exist"),
    "missing Dockerfile": (check_builds, _set(f"{W}/build", {"context": ".", "dockerfile": "Nope"}), "does not exist"),
    "unknown executable": (check_commands, _set(f"{W}/command", ["sopforge-worker"]), "not installed"),
    "unknown sopforge command": (check_commands, _set(f"{W}/command", ["sopforge", "work"]), "not a registered"),
    "unknown sopforge option": (check_commands, _set(f"{W}/command", ["sopforge", "ui", "--pool", "x"]), "no option"),
    "port on all interfaces": (check_ports, _set(f"{S}/ports", ["4200:4200"]), "not bound to 127.0.0.1"),
    "port on 0.0.0.0": (check_ports, _set(f"{S}/ports", ["0.0.0.0:4200:4200"]), "not bound to 127.0.0.1"),
    "host network": (check_ports, _set(f"{W}/network_mode", "host"), "network_mode host"),
    "literal password": (check_secrets, _set("services/postgres/environment/POSTGRES_PASSWORD", "hunter2"),
                         "not a ${VAR}"),
    "defaulted key": (check_secrets, _set(f"{W}/environment/ANTHROPIC_API_KEY", "${ANTHROPIC_API_KEY:-sk-test}"),
                      "default value"),
    "password in URL": (check_secrets, _set(f"{S}/environment/PREFECT_API_DATABASE_CONNECTION_URL",
                                            "postgresql+asyncpg://prefect:hunter2@postgres:5432/prefect"),
                        "literal password"),
    "open API": (check_auth, _set(f"{S}/environment/PREFECT_SERVER_API_AUTH_STRING", DELETE), "the API is open"),
    "worker without auth": (check_auth, _set(f"{W}/environment/PREFECT_API_AUTH_STRING", DELETE), "cannot reach"),
    "auth from two variables": (check_auth, _set(f"{W}/environment/PREFECT_API_AUTH_STRING", "${OTHER:?x}"),
                                "different variables"),
    "optional auth": (check_auth, lambda c: (_set(f"{S}/environment/PREFECT_SERVER_API_AUTH_STRING", "${A}")(c),
                                             _set(f"{W}/environment/PREFECT_API_AUTH_STRING", "${A}")(c)),
                      "is optional"),
    "worker on localhost": (check_wiring, _set(f"{W}/environment/PREFECT_API_URL", "http://127.0.0.1:4200/api"),
                            "not the prefect-server"),
    "server on loopback": (check_wiring, _set(f"{S}/command", ["prefect", "server", "start", "--host", "127.0.0.1"]),
                           "0.0.0.0"),
    "server on sqlite": (check_wiring, _set(f"{S}/environment/PREFECT_API_DATABASE_CONNECTION_URL",
                                            "sqlite+aiosqlite:///x.db"), "postgresql+asyncpg"),
    "start order without health": (check_wiring, _set(f"{W}/depends_on", {"prefect-server": {"condition": "service_started"}}),
                                   "without condition service_healthy"),
    "healthy without healthcheck": (check_wiring, _set(f"{S}/healthcheck", DELETE), "has no healthcheck"),
    "state in the container": (check_data_volume, _set(f"{W}/volumes", []), "no named volume"),
    "state on a host path": (check_data_volume, _set(f"{W}/volumes", ["./data:/data"]), "no named volume"),
}


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_each_compose_checker_catches_its_defect(case):
    check, mutate, expected = BROKEN[case]
    compose = copy.deepcopy(load_compose())
    mutate(compose)
    problems = check(compose)
    assert any(expected in p for p in problems), problems


def test_compose_file_interpolates_every_secret_with_no_default():
    text = COMPOSE.read_text(encoding="utf-8")
    assert not DEFAULTED.search(text), "a ${VAR:-default} in docker-compose.yml"
    for var in ("POSTGRES_PASSWORD", "PREFECT_AUTH_STRING"):
        assert re.search(rf"\$\{{{var}:\?[^}}]+\}}", text), f"{var} is not required (${{{var}:?message}})"


# --- prefect.yaml -----------------------------------------------------------------------------

def check_prefect_yaml(config: dict) -> list[str]:
    from prefect.exceptions import MissingFlowError
    from prefect.flows import Flow, load_flow_from_entrypoint

    problems = []
    if config.get("build") or config.get("push"):
        problems.append("build/push steps: workers run the checkout (or the image) as it is")
    pull = config.get("pull") or []
    directories = [step.get("prefect.deployments.steps.set_working_directory", {}).get("directory") for step in pull]
    if directories != ["{{ $SOPFORGE_PROJECT_ROOT }}"]:
        problems.append(f"pull must be one set_working_directory to {{{{ $SOPFORGE_PROJECT_ROOT }}}}, not {directories}")
    flows = set()
    for deployment in config.get("deployments") or []:
        entrypoint = deployment.get("entrypoint", "")
        path, _, function = entrypoint.partition(":")
        if not (ROOT / path).is_file():
            problems.append(f"entrypoint {entrypoint!r}: {path} does not exist")
            continue
        try:
            flow = load_flow_from_entrypoint(f"{ROOT / path}:{function}")
        except MissingFlowError as error:
            what = "is not decorated with @flow" if "is not a flow" in str(error) else f"does not load: {error}"
            problems.append(f"entrypoint {entrypoint!r} {what}")
            continue
        except Exception as error:  # noqa: BLE001 - the message names what is wrong
            problems.append(f"entrypoint {entrypoint!r} does not load: {error.__class__.__name__}: {error}")
            continue
        if not isinstance(flow, Flow):
            problems.append(f"entrypoint {entrypoint!r} is not decorated with @flow")
            continue
        flows.add(flow.name)
        pool = (deployment.get("work_pool") or {}).get("name")
        if pool != serve_cli.DEFAULT_POOL:
            problems.append(f"{flow.name}/{deployment.get('name')}: work pool {pool!r}, but sopforge serve defaults "
                            f"to {serve_cli.DEFAULT_POOL!r}")
    if not {"new-domain", "generate-domain"} <= flows:
        problems.append(f"deployments for new-domain and generate-domain expected, found {sorted(flows)}")
    return problems


def test_prefect_yaml_deploys_the_two_flows_on_the_serve_pool():
    assert check_prefect_yaml(load_prefect_yaml()) == []


@pytest.mark.parametrize("mutate, expected", [
    (lambda c: c["deployments"][0].update(entrypoint="flows/nope.py:new_domain"), "does not exist"),
    (lambda c: c["deployments"][0].update(entrypoint="flows/new_domain.py:Path"), "not decorated with @flow"),
    (lambda c: c["deployments"][0].update(entrypoint="flows/new_domain.py:missing"), "does not load"),
    (lambda c: c["deployments"][1]["work_pool"].update(name="default"), "sopforge serve defaults"),
    (lambda c: c["deployments"].pop(1), "generate-domain expected"),
    (lambda c: c.update(pull=[{"prefect.deployments.steps.set_working_directory": {"directory": "/work/main"}}]),
     "SOPFORGE_PROJECT_ROOT"),
    (lambda c: c.update(push=[{"prefect_docker.deployments.steps.push_docker_image": {}}]), "build/push"),
], ids=["missing file", "not a flow", "missing function", "other pool", "one flow only", "fixed dir", "push step"])
def test_prefect_yaml_checker_catches_its_defect(mutate, expected):
    config = copy.deepcopy(load_prefect_yaml())
    mutate(config)
    problems = check_prefect_yaml(config)
    assert any(expected in p for p in problems), problems


def test_pool_is_the_same_in_prefect_yaml_serve_and_compose():
    worker = command_of(load_compose()["services"]["worker"])
    compose_pool = worker[worker.index("--pool") + 1] if "--pool" in worker else serve_cli.DEFAULT_POOL
    yaml_pools = {(d.get("work_pool") or {}).get("name") for d in load_prefect_yaml()["deployments"]}
    assert yaml_pools == {serve_cli.DEFAULT_POOL} == {compose_pool}


# --- Dockerfile -------------------------------------------------------------------------------

def dockerignored() -> set[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return {line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")}


def test_dockerfile_copies_what_a_run_needs_from_the_checkout():
    text = DOCKERFILE.read_text(encoding="utf-8")
    copied = [src.rstrip("/") for line in text.splitlines() if line.startswith("COPY ")
              for src in line.split()[1:-1] if not src.startswith("--")]
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the checkout"
        assert source not in dockerignored(), f"COPY {source}: excluded by .dockerignore"
    # settings.project_root must hold these at run time (flows by path, prompts, replay recordings).
    assert {"pyproject.toml", "uv.lock", "README.md", "src", "flows", "prompts", "examples", "prefect.yaml"} <= set(copied)
    assert "uv sync --frozen" in text


def test_dockerfile_environment_matches_compose_and_the_makefile():
    env = dockerfile_env()
    workdir = re.search(r"(?m)^WORKDIR (\S+)", DOCKERFILE.read_text(encoding="utf-8")).group(1)
    assert env["SOPFORGE_PROJECT_ROOT"] == workdir  # prefect.yaml's pull step moves flow runs there
    assert env["SOPFORGE_HOME"] == env_of(load_compose()["services"]["worker"])["SOPFORGE_HOME"]
    assert re.search(rf'(?m)^VOLUME \["?{re.escape(env["SOPFORGE_HOME"])}"?\]', DOCKERFILE.read_text(encoding="utf-8"))
    assert {k: env.get(k) for k in ("PREFECT_SERVER_ANALYTICS_ENABLED", "GX_ANALYTICS_ENABLED", "DO_NOT_TRACK")} == {
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "GX_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    uv = re.search(r"(?m)^ARG UV_VERSION=(\S+)", DOCKERFILE.read_text(encoding="utf-8")).group(1)
    make_uv = re.search(r"(?m)^UV_VERSION\s*:?=\s*(\S+)", (ROOT / "Makefile").read_text(encoding="utf-8")).group(1)
    assert uv == make_uv
    users = re.findall(r"(?m)^USER (\S+)", DOCKERFILE.read_text(encoding="utf-8"))
    assert users and users[-1] not in ("root", "0"), "the image must not run as root"
