# Shared helpers for hack/ scripts. Source it; it defines paths and functions.

HCC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Tools and binaries are cached outside the repository, keyed by version.
HCC_CACHE_DIR=${HCC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcc}

CONTROLLER_TOOLS_VERSION=v0.23.0
# honnef.co/go/tools v0.8.2 is staticcheck 2026.2.2, built for Go 1.26 (the
# go directive of go.mod); a staticcheck older than the toolchain cannot
# type-check the code.
STATICCHECK_VERSION=v0.8.2

# hcc::go::module_dir prints the directory of module $1, at the version the
# module in the current directory requires, downloading it first. `go list -m
# -f '{{.Dir}}'` alone prints an empty line, and succeeds, for a module that
# is not in the module cache yet, which on a fresh machine turned
# "${dir}/kube_codegen.sh" into "/kube_codegen.sh". Fails loudly instead.
hcc::go::module_dir() {
  local module=$1 dir
  if ! go mod download "${module}" >&2; then
    echo "error: go mod download ${module} failed" >&2
    return 1
  fi
  dir=$(go list -m -f '{{.Dir}}' "${module}")
  if [[ -z "${dir}" || ! -d "${dir}" ]]; then
    echo "error: ${module} has no directory in the module cache ($(go env GOMODCACHE)) even after go mod download" >&2
    return 1
  fi
  echo "${dir}"
}

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

# hcc::tool::staticcheck prints the path of staticcheck, installing the
# pinned version into the cache on first use.
hcc::tool::staticcheck() {
  local dir="${HCC_CACHE_DIR}/tools/staticcheck-${STATICCHECK_VERSION}"
  if [[ ! -x "${dir}/staticcheck" ]]; then
    echo "installing staticcheck ${STATICCHECK_VERSION} into ${dir}" >&2
    GOBIN="${dir}" go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}" >&2
  fi
  echo "${dir}/staticcheck"
}
