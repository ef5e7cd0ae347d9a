#!/usr/bin/env bash
# Fails when the generated files of deploy/monitoring (the ServiceMonitors,
# the PrometheusRules, the Grafana dashboard and metrics.txt) differ from
# what hack/monitoring writes: regenerate with
# `cd hack/monitoring && go run .` and commit the result.
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "${HCC_ROOT}/hack/monitoring"
go run . -check -out "${HCC_ROOT}/deploy/monitoring"
