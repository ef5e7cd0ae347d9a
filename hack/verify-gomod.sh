#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum of the main module,
# of hack/controlplane, hack/images or hack/monitoring (modules of their own):
# a dependency the code imports must be listed as direct, and nothing unused
# may linger.
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

status=0
for module in . hack/controlplane hack/images hack/monitoring; do
  # -diff (Go 1.23+) prints what tidy would change and exits non-zero,
  # without writing anything.
  if ! (cd "${HCC_ROOT}/${module}" && go mod tidy -diff); then
    echo "${module}/go.mod or go.sum is not tidy: run 'go mod tidy' in ${module} and commit the result" >&2
    status=1
  fi
done
exit "${status}"
