# syntax=docker/dockerfile:1
# gitops-reloader controller image.
#
# Build: docker build -t gitops-reloader .   (context: the repository root)
# Runs as uid/gid 65532 on a read-only root filesystem: HOME=/tmp and the git cache
# /var/cache/gitops-reloader are expected to be emptyDir volumes (the Helm chart
# mounts both). Port 9090 serves /metrics, /live, /healthz and /readyz.

# ---- build: install the project into a virtualenv that the runtime stage copies ----
FROM python:3.11-slim AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
COPY pyproject.toml README.md ./
COPY gitops_reloader/ gitops_reloader/
# pip byte-compiles what it installs, so the read-only runtime never writes .pyc files.
RUN pip install --no-cache-dir .

# ---- runtime ----
FROM python:3.11-slim

LABEL org.opencontainers.image.title="gitops-reloader" \
      org.opencontainers.image.description="Reload Kubernetes workloads when ConfigMaps/Secrets change: live patches, git commits or pull requests. A drop-in replacement for Stakater Reloader." \
      org.opencontainers.image.licenses="Apache-2.0"

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

COPY --from=build /opt/venv /opt/venv

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
