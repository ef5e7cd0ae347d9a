#!/usr/bin/env bash
# Runs `make verify` as a fresh machine would: in a clone of the committed
# HEAD (uncommitted changes are not part of it), with empty Go module and
# build caches, an empty HCC tool cache (HCC_CACHE_DIR) and a GOPATH of its
# own, so nothing installed on this machine outside hack/ can stand in for
# what the scripts should fetch themselves. It catches a script that reads a
# module's directory before the module is downloaded, or that calls a tool
# only this machine has.
#
# Usage: hack/verify-fresh.sh
#   HCC_VERIFY_FRESH_GOCACHE=DIR  reuse a build cache (only the module and
#                                 tool caches start empty); faster, but no
#                                 longer a fresh machine.
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/hcc-verify-fresh.XXXXXX")
# The module cache is read-only unless -modcacherw; restore write access so
# rm can delete it. Only ever touches SCRATCH.
trap 'chmod -R u+w "${SCRATCH}" 2>/dev/null; rm -rf "${SCRATCH}"' EXIT

git clone --quiet "${HCC_ROOT}" "${SCRATCH}/src"
echo "verify-fresh: $(git -C "${SCRATCH}/src" log -1 --format='%h %s') in ${SCRATCH}/src" >&2

# GOFLAGS is set (not merely empty) so that a GOFLAGS from `go env -w` on
# this machine does not leak in; -modcacherw keeps the scratch cache
# deletable.
start=${SECONDS}
env \
  GOMODCACHE="${SCRATCH}/gomodcache" \
  GOCACHE="${HCC_VERIFY_FRESH_GOCACHE:-${SCRATCH}/gocache}" \
  GOPATH="${SCRATCH}/gopath" \
  GOBIN= \
  GOFLAGS=-modcacherw \
  HCC_CACHE_DIR="${SCRATCH}/hcc-cache" \
  make -C "${SCRATCH}/src" --no-print-directory verify
echo "verify-fresh: make verify passed on empty caches in $((SECONDS - start))s" >&2
