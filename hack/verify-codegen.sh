#!/usr/bin/env bash
# Fails when generated code, CRDs or docs/configuration.md are stale:
# regenerates everything `make generate` writes into a scratch copy of the
# working tree and compares the generated paths with the originals.
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# deploy/crds is compared whole: a file there that update-codegen.sh does not
# write (a kustomization.yaml, say) is reported as stale.
GENERATED=(pkg/apis pkg/generated deploy/crds docs/configuration.md)

SCRATCH=$(mktemp -d)
trap 'rm -rf "${SCRATCH}"' EXIT

cd "${HCC_ROOT}"
# Tracked and new (not ignored) files: exactly what a commit would hold.
# A tracked file deleted in the working tree is left out (and is no error).
git ls-files -z --cached --others --exclude-standard | \
  xargs -0 sh -c 'for f; do if test -e "$f"; then printf "%s\n" "$f"; fi; done' _ | \
  tar -cf - -T - | tar -xf - -C "${SCRATCH}"

"${HCC_ROOT}/hack/update-codegen.sh" "${SCRATCH}" >/dev/null
(cd "${SCRATCH}" && go run ./pkg/config/internal/gendocs)

status=0
for path in "${GENERATED[@]}"; do
  if ! diff -ruN "${HCC_ROOT}/${path}" "${SCRATCH}/${path}"; then
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo "generated code is stale: run 'make generate' and commit the result" >&2
  exit 1
fi
echo "generated code is up to date" >&2
