# The sopforge image: the locked environment (uv.lock) plus the checkout the flows run from.
# One image serves the Prefect server and the workers (docker-compose.yml), so their Prefect
# versions always match.
#
#   docker build -t sopforge .
#   docker run --rm -v sopforge-data:/data sopforge sopforge generate examples/themes/pharmacy_refills.yaml
FROM python:3.11-slim

ARG UV_VERSION=0.13.8

# Prefect and Great Expectations phone home unless told not to.
ENV PREFECT_SERVER_ANALYTICS_ENABLED=false \
    GX_ANALYTICS_ENABLED=false \
    DO_NOT_TRACK=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/local/bin/python3.11 \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    UV_PROJECT_ENVIRONMENT=/app/.venv

# bubblewrap: generated tool code runs only inside it (src/sopforge/sandbox/boundary.py). It
# needs user namespaces, which Docker's default seccomp and AppArmor profiles refuse: run the
# image with --security-opt seccomp=unconfined --security-opt apparmor=unconfined (see
# docker-compose.yml), or generation and audit stop with one line saying so.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

RUN pip install --no-cache-dir "uv==${UV_VERSION}"

WORKDIR /app

# Dependencies first (a layer that changes only with the lock), then the project itself.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project

# What a run needs at run time (settings.project_root = /app): the package, the flows the
# deployments point at, the prompt templates, the example themes and recordings, and prefect.yaml.
COPY src/ src/
COPY flows/ flows/
COPY prompts/ prompts/
COPY schemas/ schemas/
COPY validation/ validation/
COPY examples/ examples/
COPY prefect.yaml ./
# Editable install (uv's default): the package stays in /app/src, so PROJECT_ROOT is /app.
RUN uv sync --frozen --no-dev && /app/.venv/bin/python -m compileall -q src flows

RUN useradd --create-home --uid 10001 sopforge \
    && mkdir -p /data \
    && chown sopforge:sopforge /data
USER sopforge

ENV PATH=/app/.venv/bin:$PATH \
    SOPFORGE_HOME=/data \
    SOPFORGE_PROJECT_ROOT=/app \
    PREFECT_HOME=/home/sopforge/.prefect

VOLUME ["/data"]

CMD ["sopforge", "--help"]
