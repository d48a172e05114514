#!/usr/bin/env bash
# Build the image for linux/arm64 on this amd64 machine and run `gitops-reloader --version`
# in it, both under qemu user emulation (binfmt_misc). Not part of .ci/run: it takes several
# minutes (docs/benchmarks.md has the time); release.yml builds arm64 with buildx and QEMU.
# Needs root: it mounts binfmt_misc and enables qemu-aarch64 when they are not there.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[check-image-arm64] %s\n' "$*" >&2; }

if ! command -v qemu-aarch64-static >/dev/null 2>&1 || ! command -v update-binfmts >/dev/null 2>&1; then
  log "installing qemu-user-static and binfmt-support with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static binfmt-support >/dev/null
fi
if [[ ! -e /proc/sys/fs/binfmt_misc/status ]]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
  update-binfmts --enable qemu-aarch64
fi
# F (fix binary): the interpreter is opened now, so it also runs inside containers.
grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 \
  || { log "qemu-aarch64 is registered without the F flag: containers cannot use it"; exit 1; }

started="$(date +%s)"
ARCH=arm64 IMAGE=localhost/gitops-reloader:ci-arm64 bash .ci/build-image.sh
built="$(date +%s)"
export CONTAINERS_CONF="${PWD}/.tools/podman/containers.conf"
arch="$(podman image inspect --format '{{.Architecture}}' localhost/gitops-reloader:ci-arm64)"
version="$(podman run --rm --platform=linux/arm64 --read-only --cap-drop=ALL \
  --security-opt=no-new-privileges --tmpfs=/tmp:rw,mode=1777 localhost/gitops-reloader:ci-arm64 --version)"
machine="$(podman run --rm --platform=linux/arm64 --entrypoint=uname localhost/gitops-reloader:ci-arm64 -m)"
log "image architecture ${arch}, uname -m in it: ${machine}, ${version}"
log "build $(( built - started )) s, --version $(( $(date +%s) - built )) s"
[[ "${arch}" == "arm64" && "${machine}" == "aarch64" && "${version}" == gitops-reloader\ * ]]
