#!/usr/bin/env bash
# Regenerates everything derived from pkg/apis: deepcopy and registration code
# next to the types, the typed clientset, listers, informers and apply
# configurations in pkg/generated, and the CRD manifests in deploy/crds.
#
# Usage: hack/update-codegen.sh [TREE]   (TREE defaults to this repository;
# hack/verify-codegen.sh passes a scratch copy.)
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TREE=${1:-${HCC_ROOT}}
cd "${TREE}"

MODULE=$(go list -m)
CODEGEN_PKG=$(hcc::go::module_dir k8s.io/code-generator)
CODEGEN_VERSION=$(go list -m -f '{{.Version}}' k8s.io/code-generator)
# kube_codegen.sh installs its generators into GOBIN; keep them in the cache,
# keyed by version, so they never mix with another project's.
export GOBIN="${HCC_CACHE_DIR}/tools/code-generator-${CODEGEN_VERSION}"
BOILERPLATE="${HCC_ROOT}/hack/boilerplate.go.txt"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

echo "generating helpers and registration (code-generator ${CODEGEN_VERSION})" >&2
kube::codegen::gen_helpers --boilerplate "${BOILERPLATE}" pkg/apis
kube::codegen::gen_register --boilerplate "${BOILERPLATE}" pkg/apis

echo "generating clientset, listers, informers and apply configurations" >&2
kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --output-dir pkg/generated \
  --output-pkg "${MODULE}/pkg/generated" \
  --boilerplate "${BOILERPLATE}" \
  pkg/apis

echo "generating CRDs (controller-gen ${CONTROLLER_TOOLS_VERSION})" >&2
CONTROLLER_GEN=$(hcc::tool::controller_gen)
# deploy/crds holds the generated CRDs and nothing else, so that
# `kubectl apply -f deploy/crds` applies exactly them (docs/deploy.md): the
# whole directory is regenerated, and hack/verify-codegen.sh reports any
# other file there as stale.
rm -rf deploy/crds
mkdir -p deploy/crds
"${CONTROLLER_GEN}" crd:crdVersions=v1 paths=./pkg/apis/... output:crd:artifacts:config=deploy/crds
