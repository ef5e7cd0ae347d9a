# Shared helpers for hack/ scripts. Source it; it defines paths and functions.

HCC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Tools and binaries are cached outside the repository, keyed by version.
HCC_CACHE_DIR=${HCC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcc}

CONTROLLER_TOOLS_VERSION=v0.23.0

# hcc::tool::controller_gen prints the path of controller-gen, installing the
# pinned version into the cache on first use.
hcc::tool::controller_gen() {
  local dir="${HCC_CACHE_DIR}/tools/controller-tools-${CONTROLLER_TOOLS_VERSION}"
  if [[ ! -x "${dir}/controller-gen" ]]; then
    echo "installing controller-gen ${CONTROLLER_TOOLS_VERSION} into ${dir}" >&2
    GOBIN="${dir}" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" >&2
  fi
  echo "${dir}/controller-gen"
}
