#!/usr/bin/env bash
# Release checks, run by .ci/run before the tests: everything release.yml publishes is
# built and checked here, except the container image (.ci/run lints the Dockerfile with
# hadolint and builds it with .ci/build-image.sh on a Debian base; tests/container run it).
#   1. actionlint (with shellcheck on every `run:` script) over every workflow
#   2. the versions agree: package, chart version/appVersion, top CHANGELOG entry
#   3. `python -m build --no-isolation`: wheel + sdist (the wheel is built from the sdist) with
#      the build backend locked in requirements/test.txt, so nothing is resolved at build time
#   4. `twine check --strict` on both
#   5. the wheel in a fresh venv as the image installs it: the runtime lock with
#      --no-deps --require-hashes, then the wheel with --no-deps; `gitops-reloader --help`,
#      `--version` and `demo` run from outside the checkout, and the package is imported
#      from the venv
#   6. `helm package` of the chart
# Needs requirements/test.txt installed (the release extra and the build backend) and helm on PATH
# (.ci/install-tools.sh). Artifacts go to a temporary directory that is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
started="$(date +%s%N)"
last="${started}"

seconds_since() {  # seconds_since NANOSECONDS: elapsed seconds, one decimal
  printf '%.1f' "$(( ($(date +%s%N) - $1) / 1000000 ))e-3"
}
step() {  # step NAME: announce a check and start its clock
  printf '[check-release] %-44s' "$1" >&2
  last="$(date +%s%N)"
}
done_step() {
  printf ' %5s s\n' "$(seconds_since "${last}")" >&2
}

scripts="$("${PYTHON}" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
version="$("${PYTHON}" -c 'import gitops_reloader; print(gitops_reloader.__version__)')"

step "actionlint .github/workflows/*.yml"
"${scripts}/actionlint" -no-color -shellcheck "${scripts}/shellcheck" .github/workflows/*.yml
done_step

step "versions agree (.ci/release_notes.py)"
"${PYTHON}" .ci/release_notes.py >/dev/null
done_step

step "python -m build (sdist, wheel from it)"
"${PYTHON}" -m build --no-isolation --outdir "${tmp}/dist" . >"${tmp}/build.log" 2>&1 \
  || { cat "${tmp}/build.log" >&2; exit 1; }
wheel="${tmp}/dist/gitops_reloader-${version}-py3-none-any.whl"
sdist="${tmp}/dist/gitops_reloader-${version}.tar.gz"
[[ -f "${wheel}" && -f "${sdist}" ]] || { ls -l "${tmp}/dist" >&2; echo "expected ${wheel##*/} and ${sdist##*/}" >&2; exit 1; }
done_step

step "twine check --strict"
"${PYTHON}" -m twine check --strict "${wheel}" "${sdist}" >"${tmp}/twine.log" \
  || { cat "${tmp}/twine.log" >&2; exit 1; }
done_step

runtime_lock="${PWD}/requirements/runtime.txt"
step "runtime lock + wheel in a fresh venv: --help, demo"
(
  # Away from the checkout and its PYTHONPATH: pip must not take the checkout's
  # egg-info for an installed gitops-reloader, and the commands must run the wheel.
  cd "${tmp}"
  unset PYTHONPATH
  "${PYTHON}" -m venv --without-pip "${tmp}/venv"
  "${PYTHON}" -m pip --python "${tmp}/venv/bin/python" install --quiet --no-compile \
    --no-deps --require-hashes -r "${runtime_lock}" \
    >"${tmp}/pip.log" 2>&1 || { cat "${tmp}/pip.log" >&2; exit 1; }
  "${PYTHON}" -m pip --python "${tmp}/venv/bin/python" install --quiet --no-compile --no-deps "${wheel}" \
    >"${tmp}/pip.log" 2>&1 || { cat "${tmp}/pip.log" >&2; exit 1; }
  "${PYTHON}" -m pip --python "${tmp}/venv/bin/python" check >"${tmp}/check.log" \
    || { cat "${tmp}/check.log" >&2; exit 1; }
  "${tmp}/venv/bin/gitops-reloader" --help >/dev/null
  "${tmp}/venv/bin/gitops-reloader" demo >"${tmp}/demo.log" 2>&1 || { cat "${tmp}/demo.log" >&2; exit 1; }
  [[ "$("${tmp}/venv/bin/gitops-reloader" --version)" == "gitops-reloader ${version}" ]]
  "${tmp}/venv/bin/python" -c 'import gitops_reloader, sys; assert gitops_reloader.__file__.startswith(sys.prefix), gitops_reloader.__file__'
)
done_step

step "helm package helm/gitops-reloader"
helm package helm/gitops-reloader --destination "${tmp}/chart" >/dev/null
[[ -f "${tmp}/chart/gitops-reloader-${version}.tgz" ]] || { ls -l "${tmp}/chart" >&2; exit 1; }
done_step

printf '[check-release] gitops-reloader %s: all release checks passed in %s s\n' "${version}" \
  "$(seconds_since "${started}")" >&2
