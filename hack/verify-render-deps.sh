#!/usr/bin/env bash
# Fails when the offline renderer (pkg/render, behind `hcc-controller
# render`) links client-go or a controller package other than the pure
# subpackages, by any path: `go list -deps` follows every module, where the
# import guard in internal/guards follows only this module's packages
# (docs/style.md, "Layering, enforced").
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "${HCC_ROOT}"
module=$(go list -m)
deps=$(go list -deps ./pkg/render)
bad=$({
  grep -E '^k8s\.io/client-go(/|$)' <<<"${deps}" || true
  grep -E "^${module}/pkg/controllers/" <<<"${deps}" |
    grep -vE "^${module}/pkg/controllers/[^/]+/resources$|^${module}/pkg/controllers/(egress/resolve|netpol/planopts)$" || true
})
if [[ -n "${bad}" ]]; then
  echo "pkg/render links what the offline renderer must not (client-go, or a controller package that is not pure):" >&2
  echo "${bad}" >&2
  exit 1
fi
