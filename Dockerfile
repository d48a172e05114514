# syntax=docker/dockerfile:1
# gitops-reloader controller image.
#
# Build: docker build -t gitops-reloader .   (context: the repository root)
# Release builds (.github/workflows/release.yml) run buildx for linux/amd64 and linux/arm64
# and pass VERSION (X.Y.Z of the tag) and REVISION (the commit) for the labels.
#
# Runs as uid/gid 65532 on a read-only root filesystem: HOME=/tmp and the git cache
# /var/cache/gitops-reloader are expected to be emptyDir volumes (the Helm chart
# mounts both). Port 9090 serves /metrics, /live, /healthz and /readyz; there is no
# HEALTHCHECK on purpose: the chart's probes check those endpoints.
#
# Base image: python:3.11-slim pinned by its multi-arch index digest (linux/amd64 and
# linux/arm64; Debian trixie, Python 3.11.16), the digest public Dockerfiles pinning
# python:3.11-slim used in 2026-08. Dependabot (.github/dependabot.yml, docker ecosystem)
# proposes each new digest; both FROM lines must name the same one.

# ---- build: the project's wheel, and a wheel of every locked dependency for this platform ----
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Every dependency at the version of the lock, each file checked against its sha256
# (requirements/runtime.txt); the build backend likewise (requirements/build.txt). The
# project's own wheel is built without build isolation and without dependencies, so the
# build never resolves a version by itself: two builds of one commit hold the same files.
COPY requirements/runtime.txt requirements/build.txt requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/build.txt \
    && pip wheel --no-cache-dir --require-hashes --no-deps --wheel-dir /wheels -r requirements/runtime.txt
COPY pyproject.toml README.md LICENSE ./
COPY gitops_reloader/ gitops_reloader/
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /dist .

# ---- runtime: installs the built wheel, never the source tree ----
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

ARG VERSION=dev
ARG REVISION=unknown

LABEL org.opencontainers.image.title="gitops-reloader" \
      org.opencontainers.image.description="Reload Kubernetes workloads when ConfigMaps/Secrets change: live patches, git commits or pull requests. A drop-in replacement for Stakater Reloader." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/gitops-reloader/gitops-reloader" \
      org.opencontainers.image.url="https://github.com/gitops-reloader/gitops-reloader" \
      org.opencontainers.image.documentation="https://github.com/gitops-reloader/gitops-reloader/tree/main/docs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim" \
      org.opencontainers.image.base.digest="sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7"

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# git and ssh for the git / pull-request sinks. Versions are not pinned: they follow
# the Debian release of the pinned base image, and pins break on every point release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git openssh-client \
    && rm -rf /var/lib/apt/lists/*

# A fixed non-root identity (the chart's runAsUser/fsGroup), and the directories the
# controller writes to or reads from; with a read-only root filesystem the writable
# ones come from emptyDir volumes mounted over them.
RUN groupadd --system --gid 65532 gitops-reloader \
    && useradd --system --uid 65532 --gid 65532 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin gitops-reloader \
    && mkdir -p /var/cache/gitops-reloader /etc/gitops-reloader \
    && chown 65532:65532 /var/cache/gitops-reloader

# The wheels are mounted from the build stage, not copied, so no layer keeps them. Only
# those wheels are used (--no-index), checked again against the lock's hashes; the
# project's wheel goes in with --no-deps. The venv has no pip of its own; pip
# byte-compiles what it installs, so the read-only runtime never writes .pyc files.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,from=build,source=/dist,target=/dist \
    --mount=type=bind,from=build,source=/src/requirements/runtime.txt,target=/tmp/runtime.txt \
    python -m venv --without-pip /opt/venv \
    && pip --python /opt/venv/bin/python install --no-cache-dir --no-index --find-links=/wheels \
       --require-hashes -r /tmp/runtime.txt \
    && pip --python /opt/venv/bin/python install --no-cache-dir --no-index --no-deps /dist/gitops_reloader-*.whl \
    && /opt/venv/bin/gitops-reloader --version

ENV PATH=/opt/venv/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GIT_TERMINAL_PROMPT=0

USER 65532:65532
WORKDIR /tmp
EXPOSE 9090

ENTRYPOINT ["gitops-reloader"]
CMD ["run"]
