# syntax=docker/dockerfile:1
# gitops-reloader controller image.
#
# Build: docker build -t gitops-reloader .   (context: the repository root)
# Release builds (.github/workflows/release.yml) run buildx for linux/amd64 and linux/arm64
# and pass VERSION (X.Y.Z of the tag) and REVISION (the commit) for the labels.
# CI (.ci/build-image.sh) builds the same file with podman on a Debian bookworm base made
# from Debian's packages (--build-arg BASE_IMAGE=...), because no image registry is
# reachable there: docs/releasing.md says what differs.
#
# Runs as uid/gid 65532 on a read-only root filesystem: HOME=/tmp and the git cache
# /var/cache/gitops-reloader are expected to be emptyDir volumes (the Helm chart
# mounts both). Port 9090 serves /metrics, /live, /healthz and /readyz; there is no
# HEALTHCHECK on purpose: the chart's probes check those endpoints.
#
# Base image: python:3.11-slim pinned by its multi-arch index digest (linux/amd64 and
# linux/arm64; Debian trixie, Python 3.11.16), the digest public Dockerfiles pinning
# python:3.11-slim used in 2026-08. Both stages start FROM ${BASE_IMAGE}, that image unless
# a build passes another base (CI: .ci/build-image.sh); any base works that has python3
# with its venv module, and apt-get unless it already has git and ssh.
# Dependabot (.github/dependabot.yml, docker ecosystem) updates FROM lines but not ARG
# defaults (dependabot-core issue 2057): the `release-base` stage names the same digest for
# it, and nothing builds from that stage. tests/unit/test_dockerfile.py fails while the two
# differ, so a Dependabot pull request says which line to bump with it.
ARG BASE_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS release-base

# ---- build: a wheel of every locked dependency and of the project, installed into /opt/venv ----
FROM ${BASE_IMAGE} AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# pip runs from a venv of its own (/opt/build), never in the base's system Python: a
# Debian python3 refuses root installs there (EXTERNALLY-MANAGED), and the tools of the
# build stay out of the runtime's venv. Every dependency at the version of the lock, each
# file checked against its sha256 (requirements/runtime.txt); the build backend likewise
# (requirements/build.txt). The project's own wheel is built without build isolation and
# without dependencies, so the build never resolves a version by itself: two builds of one
# commit hold the same files.
COPY requirements/runtime.txt requirements/build.txt requirements/
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip install --no-cache-dir --require-hashes -r requirements/build.txt \
    && /opt/build/bin/pip wheel --no-cache-dir --require-hashes --no-deps --wheel-dir /wheels \
       -r requirements/runtime.txt
COPY pyproject.toml README.md LICENSE ./
COPY gitops_reloader/ gitops_reloader/
# The runtime venv has no pip, setuptools or wheels of its own: the build venv's pip fills
# it (--python), only from the wheels above (--no-index), checked again against the
# lock's hashes; the project's wheel goes in with --no-deps. pip byte-compiles what it
# installs, so the read-only runtime never writes .pyc files. The venv's interpreter link
# points at the base's python3, which is at the same path in the runtime stage.
RUN /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /dist . \
    && python3 -m venv --without-pip /opt/venv \
    && /opt/build/bin/pip --python /opt/venv/bin/python install --no-cache-dir --no-index \
       --find-links=/wheels --require-hashes -r requirements/runtime.txt \
    && /opt/build/bin/pip --python /opt/venv/bin/python install --no-cache-dir --no-index --no-deps \
       /dist/gitops_reloader-*.whl \
    && /opt/venv/bin/gitops-reloader --version

# ---- runtime: the base, git and ssh clients, and the venv; no compiler, pip or source tree ----
FROM ${BASE_IMAGE}

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

# git and ssh for the git / pull-request sinks, gpg and gpg-agent for OpenPGP-signed commits
# (SSH signing uses ssh-keygen, from openssh-client), from the base's Debian release unless the
# base already has them (CI's bookworm base is made with them, and has no registry to fetch from).
# Versions are not pinned: they follow the Debian release of the pinned base image, and pins
# break on every point release.
# hadolint ignore=DL3008
RUN if command -v git >/dev/null && command -v ssh >/dev/null && command -v gpg-agent >/dev/null; then \
        echo "git, ssh and gpg come with the base image"; \
    else \
        apt-get update \
        && apt-get install -y --no-install-recommends git openssh-client gpg gpg-agent \
        && rm -rf /var/lib/apt/lists/*; \
    fi

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
