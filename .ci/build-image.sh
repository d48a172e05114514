#!/usr/bin/env bash
# Build the controller image from the Dockerfile with podman, as CI and the container tests
# (tests/container/) use it. No image registry is reachable here, so the base is made from
# Debian's packages instead of the release base python:3.11-slim (docs/releasing.md says
# what differs):
#   1. podman, buildah, mmdebstrap, runc and uidmap from apt when one is missing
#   2. .tools/podman/containers.conf (CONTAINERS_CONF points at it): runc with cgroupfs, and
#      nofile/nproc limits this VM can set (it lacks CAP_SYS_RESOURCE, podman's defaults fail)
#   3. the base: mmdebstrap bookworm with BASE_PACKAGES, tagged by a key over everything it
#      is made from, so it is made once and reused while that key holds
#   4. `podman build --build-arg BASE_IMAGE=<base>` with cached layers: a second run of an
#      unchanged tree rebuilds nothing (the script counts the steps taken from the cache)
#   5. the image size: total and the layers above the base; images of builds older than a
#      day are pruned
# The image is tagged IMAGE (default localhost/gitops-reloader:ci). ARCH (default: the
# machine's, as dpkg names it) builds for another architecture, e.g. ARCH=arm64 under qemu
# user emulation (.ci/check-image-arm64.sh). Safe to run again.
# Runs as root (podman with runc and overlay storage; apt-get).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${REPO_ROOT}"
IMAGE="${IMAGE:-localhost/gitops-reloader:ci}"
STATE_DIR="${REPO_ROOT}/.tools/podman"
export CONTAINERS_CONF="${STATE_DIR}/containers.conf"
SUITE="bookworm"
ARCH="${ARCH:-$(dpkg --print-architecture)}"
# The release base python:3.11-slim has python3 with venv and apt; git, ssh and gpg are what the
# Dockerfile adds; passwd gives useradd; ca-certificates the trust store.
BASE_PACKAGES="python3,python3-venv,git,openssh-client,gpg,gpg-agent,ca-certificates,passwd"
# CI's own base trusts the machine's extra CAs (the registries are reached through a proxy
# that re-signs TLS, and the build stage pip-installs from PyPI). Only this base has them:
# nothing copies them into an image built from the release base.
LOCAL_CA_DIR="/usr/local/share/ca-certificates"

log() { printf '[build-image] %s\n' "$*" >&2; }

install_tools() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v buildah >/dev/null 2>&1 || missing+=(buildah)
  command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
  if ((${#missing[@]})); then
    log "installing ${missing[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

write_containers_conf() {
  mkdir -p "${STATE_DIR}"
  cat > "${CONTAINERS_CONF}" <<'EOF'
# Written by .ci/build-image.sh: podman as it works on the CI machines.
[containers]
# The VM lacks CAP_SYS_RESOURCE: podman's default limits cannot be set there.
default_ulimits = ["nofile=20000:20000", "nproc=20000:20000"]

[engine]
# crun refuses the mixed cgroup layout of these machines.
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
}

local_cas() {  # the machine's extra CA files, sorted
  find "${LOCAL_CA_DIR}" -maxdepth 2 -name '*.crt' -type f 2>/dev/null | sort
}

base_key() {  # a digest of everything the base is made from
  {
    printf '%s\n' "${SUITE}" "${ARCH}" "${BASE_PACKAGES}"
    sed -n '/^make_base()/,/^}/p' "${BASH_SOURCE[0]}"
    local ca
    while read -r ca; do [[ -n "${ca}" ]] && sha256sum < "${ca}"; done < <(local_cas)
  } | sha256sum | cut -c1-16
}

# shellcheck disable=SC2016  # mmdebstrap's hooks expand "$1" (the new root) themselves
make_base() {  # make_base TAG: mmdebstrap SUITE with BASE_PACKAGES, imported as TAG
  local tag="$1" tar cas=()
  mapfile -t cas < <(local_cas)
  tar="$(mktemp --suffix=.tar)"
  local hooks=()
  if ((${#cas[@]})); then
    hooks+=(--customize-hook='mkdir -p "$1/usr/local/share/ca-certificates/ci"'
            --customize-hook="copy-in ${cas[*]} /usr/local/share/ca-certificates/ci/"
            --customize-hook='chroot "$1" update-ca-certificates >/dev/null')
  fi
  # Like python:3.11-slim: no manual pages, documentation (copyright files kept) or
  # translations, and no apt lists.
  mmdebstrap --quiet --architectures="${ARCH}" --variant=apt --include="${BASE_PACKAGES}" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    "${hooks[@]}" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    "${SUITE}" "${tar}"
  # pip inside the build reads the trust store, not its own certifi bundle.
  podman import --quiet --arch="${ARCH}" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["python3"]' \
    "${tar}" "${tag}" >/dev/null
  rm -f "${tar}"
}

size_mb() {  # size_mb BYTES
  printf '%.1f MB' "$(( $1 / 1000 ))e-3"
}

main() {
  install_tools
  write_containers_conf
  local base started log_file
  base="localhost/gitops-reloader-ci-base:$(base_key)-${ARCH}"
  started="$(date +%s)"
  if podman image exists "${base}"; then
    log "base ${base} exists: reused"
  else
    log "making base ${base} (mmdebstrap ${SUITE} ${ARCH}: ${BASE_PACKAGES})"
    make_base "${base}"
    log "base made in $(( $(date +%s) - started )) s"
  fi
  started="$(date +%s)"
  log_file="${STATE_DIR}/build-${ARCH}.log"
  log "podman build -t ${IMAGE} (log: ${log_file})"
  if ! podman build --layers --pull=never --platform="linux/${ARCH}" --build-arg BASE_IMAGE="${base}" \
      --label org.opencontainers.image.base.name="${base}" \
      --label org.opencontainers.image.base.digest="$(podman image inspect --format '{{.Digest}}' "${base}")" \
      -t "${IMAGE}" . > "${log_file}" 2>&1; then
    tail -n 40 "${log_file}" >&2
    log "podman build failed (whole log: ${log_file})"
    exit 1
  fi
  # Each change of the tree leaves the layers of the build before: those older than a day
  # go, today's stay as the layer cache of the next build.
  podman image prune --force --filter until=24h >/dev/null
  local steps cached
  steps="$(grep -E '^\[[0-9]+/[0-9]+\] STEP ' "${log_file}" | grep -c -v -E ': FROM ' || true)"
  cached="$(grep -c -E '^--> Using cache ' "${log_file}" || true)"
  log "built ${IMAGE} in $(( $(date +%s) - started )) s: ${cached} of ${steps} steps from the layer cache"
  local total base_size
  total="$(podman image inspect --format '{{.Size}}' "${IMAGE}")"
  base_size="$(podman image inspect --format '{{.Size}}' "${base}")"
  log "image size: $(size_mb "${total}") total, $(size_mb $(( total - base_size ))) in the layers above the base ($(size_mb "${base_size}"))"
}

main "$@"
