#!/usr/bin/env bash
# Runs staticcheck (the version pinned in hack/lib.sh, installed into the HCC
# tool cache) on every hand-written package: the main module without
# pkg/generated, and hack/controlplane, hack/images and hack/monitoring
# (modules of their own). The main module is checked three times, because
# each run sees only the files its build tags select: without tags (what
# ships), with -tags integration (adds the integration tests), and
# test/dataplane with -tags dataplane (adds the dataplane suite's tests; no
# file outside test/dataplane has that tag). Every run completes, so one
# report lists every finding; the script fails when any found one.
#
# The checks are staticcheck's defaults. Silence a finding at its line with
# `//lint:ignore CHECK reason`, never by dropping a check for everyone.
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

staticcheck=$(hcc::tool::staticcheck)
# The analysis cache (default: the user cache directory) lives in the HCC
# cache, so hack/verify-fresh.sh's empty HCC_CACHE_DIR empties it too.
export STATICCHECK_CACHE=${STATICCHECK_CACHE:-${HCC_CACHE_DIR}/staticcheck-cache}

status=0
# check DIR [FLAG...]: staticcheck the packages of the module in DIR, minus
# generated clients, with FLAGs given to both go list and staticcheck.
check() {
  local dir=$1
  shift
  local -a pkgs
  mapfile -t pkgs < <(cd "${dir}" && go list "$@" ./... | grep -v '/pkg/generated/')
  local where=${dir#"${HCC_ROOT}"}
  echo "staticcheck ${*:-(no tags)} in ./${where#/}: ${#pkgs[@]} packages"
  if ! (cd "${dir}" && "${staticcheck}" "$@" "${pkgs[@]}"); then
    status=1
  fi
}

check "${HCC_ROOT}"
check "${HCC_ROOT}" -tags integration
check "${HCC_ROOT}/hack/controlplane"
check "${HCC_ROOT}/hack/images"
check "${HCC_ROOT}/hack/monitoring"
echo "staticcheck -tags dataplane in ./test/dataplane"
if ! (cd "${HCC_ROOT}" && "${staticcheck}" -tags dataplane ./test/dataplane/...); then
  status=1
fi

if [[ ${status} -ne 0 ]]; then
  echo "staticcheck found problems (above); fix them or, for a false positive, add //lint:ignore CHECK reason at the line" >&2
fi
exit "${status}"
