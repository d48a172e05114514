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
# Stakater Reloader (the anchor): its controller, its own end-to-end suites (each beside its source:
# a suite finds its chart by walking up to go.mod) and the Ginkgo CLI that runs them in parallel,
# from the vendored source in ../shared/anchors (the module proxy refuses it; docs/real-engines.md
# says how to get it elsewhere), built with no network into $CACHE/stakater-<hash of the tarball
# and this recipe>.
STAKATER_TARBALL="${STAKATER_TARBALL:-$(cd .. && pwd)/../../shared/anchors/stakater-reloader-655a2b38-vendored.tar.gz}"
STAKATER_SUITES="core annotations advanced flags argo"
STAKATER_RECIPE="2: ginkgo CLI; suites beside their source"  # change it when the recipe below changes
STAKATER_LDFLAGS="-s -w -X github.com/stakater/Reloader/pkg/common.Version=v1.4.21-2-g655a2b38 \
-X github.com/stakater/Reloader/pkg/common.Commit=655a2b3814baadb69d3d1e105242d6cc8875d7cb"
if [[ -f "${STAKATER_TARBALL}" ]]; then
  key="$( { sha256sum < "${STAKATER_TARBALL}"; echo "${STAKATER_SUITES} ${STAKATER_LDFLAGS} ${STAKATER_RECIPE}"; } | sha256sum | cut -c1-16)"
  out="${CACHE}/stakater-${key}"
  if [[ -f "${out}/.built" ]]; then
    ln -sfn "${out}" "${CACHE}/stakater"
    echo "engine stakater: cached (${out})"
  else
    rm -rf "${out}" && mkdir -p "${out}"
    start=$(date +%s)
    if tar -xzf "${STAKATER_TARBALL}" -C "${out}" \
      && (cd "${out}/stakater-reloader" \
          && GOFLAGS=-mod=vendor GOPROXY=off "${GO}" build -trimpath -ldflags "${STAKATER_LDFLAGS}" -o "${out}/reloader" . \
          && GOFLAGS=-mod=vendor GOPROXY=off "${GO}" build -trimpath -ldflags "-s -w" -o "${out}/ginkgo" \
               github.com/onsi/ginkgo/v2/ginkgo \
          && for suite in ${STAKATER_SUITES}; do
               GOFLAGS=-mod=vendor GOPROXY=off "${GO}" test -c -trimpath \
                 -o "${out}/stakater-reloader/test/e2e/${suite}/${suite}.test" "./test/e2e/${suite}" || exit 1
             done); then
      touch "${out}/.built"
      ln -sfn "${out}" "${CACHE}/stakater"
      echo "engine stakater: built in $(( $(date +%s) - start )) s (${out})"
    else
      rm -rf "${out}"
      failed+=("stakater")
      echo "engine stakater: NOT built (see the go error above)" >&2
    fi
  fi
else
  echo "engine stakater: no source (${STAKATER_TARBALL} missing): the stakater_e2e tier skips" >&2
fi
if (( ${#failed[@]} )); then
  echo "engines not built: ${failed[*]}" >&2
fi
exit 0
