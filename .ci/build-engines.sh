#!/usr/bin/env bash
# Build the real engines the `-m engines` test tier runs (etcd, kube-apiserver,
# kube-controller-manager, kwok, Flux's source- and kustomize-controller, Argo CD) from the Go
# module proxy, by module name: one wrapper
# module per engine in .ci/engines/<engine> (go.mod + go.sum pin the release; `binaries` lists
# "<binary> <main package> [-ldflags ...]"; an optional `data` lists files taken as data from a
# module in the module cache, such as kwok's stages and the engines' CRDs). Each engine is built into
# $ENGINE_CACHE/<engine>-<hash of its wrapper>, linked as $ENGINE_CACHE/<engine>: a second run
# with the same wrappers costs nothing. An engine that fails to build (a module the proxy
# refuses) is reported and the others are built; the tier then fails for it under
# REQUIRE_ENGINE_TESTS=1.
set -uo pipefail
cd "$(dirname "$0")/engines" || exit 1
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE="${ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitops-reloader/engines}"
mkdir -p "${CACHE}"
# Argo CD's cache: Debian's redis-server, run by the tier on a free port.
if ! command -v redis-server >/dev/null && [[ "$(id -u)" == 0 ]]; then
  echo "redis-server missing: installing it with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi
export GOFLAGS="${GOFLAGS:--mod=readonly}" GOTOOLCHAIN=local CGO_ENABLED=0
failed=()
for engine in */; do
  engine="${engine%/}"
  key="$(cat "${engine}/go.mod" "${engine}/go.sum" "${engine}/binaries" "${engine}"/data 2>/dev/null \
    | sha256sum | cut -c1-16)"
  out="${CACHE}/${engine}-${key}"
  if [[ -f "${out}/.built" ]]; then
    ln -sfn "${out}" "${CACHE}/${engine}"
    echo "engine ${engine}: cached (${out})"
    continue
  fi
  rm -rf "${out}"
  mkdir -p "${out}"
  start=$(date +%s)
  ok=1
  while read -r binary package ldflags; do
    [[ -z "${binary}" || "${binary}" == \#* ]] && continue
    if ! (cd "${engine}" && "${GO}" build -trimpath -ldflags "-s -w ${ldflags}" -o "${out}/${binary}" "${package}"); then
      ok=0
      break
    fi
  done < "${engine}/binaries"
  if [[ "${ok}" == 1 && -f "${engine}/data" ]]; then
    while read -r module file dest; do
      [[ -z "${module}" || "${module}" == \#* ]] && continue
      dir="$(cd "${engine}" && "${GO}" list -m -f '{{.Dir}}' "${module}")" || { ok=0; break; }
      { cat "${dir}/${file}"; printf '\n---\n'; } >> "${out}/${dest}" || { ok=0; break; }
    done < "${engine}/data"
  fi
  if [[ "${ok}" == 1 ]]; then
    touch "${out}/.built"
    ln -sfn "${out}" "${CACHE}/${engine}"
    echo "engine ${engine}: built in $(( $(date +%s) - start )) s (${out})"
  else
    rm -rf "${out}"
    failed+=("${engine}")
    echo "engine ${engine}: NOT built (see the go error above)" >&2
  fi
done
if (( ${#failed[@]} )); then
  echo "engines not built: ${failed[*]}" >&2
fi
exit 0
