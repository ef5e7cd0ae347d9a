# HCC — Host Context Controller. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := build

GO       ?= go
BIN_DIR  := bin
MODULE   := github.com/clerum/hcc
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --verify --quiet HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X $(MODULE)/pkg/version.Version=$(VERSION) -X $(MODULE)/pkg/version.Commit=$(COMMIT)
# How both binaries are built, by make build and for the images alike: static
# (no cgo), no path of the build machine (-trimpath), version and commit.
GO_BUILD  = CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'

# make images (docs/deploy.md, "The images"). The binaries are cross-built
# into IMAGES_BIN_DIR/<os>-<arch>/; the images, docker archives, digests and
# overlays go to IMAGES_DIR, which each run replaces.
IMAGES_DIR        ?= _output/images
IMAGES_BIN_DIR    ?= _output/bin
comma             := ,
IMAGE_PLATFORMS   := linux/amd64,linux/arm64
IMAGE_BINARIES    := hcc-controller,hcc-api
# Every timestamp in the images: the commit's time, so one commit always
# gives the same digests.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# Where the images live, without the binary's name. make images names the
# docker archives and the deploy overlay after it (ghcr.io/clerum, the
# committed trees' name, when empty); make push requires it.
REGISTRY          ?=

# Integration tests use etcd and kube-apiserver, and the end-to-end tests
# and make run the whole local cluster (kube-controller-manager,
# kube-scheduler, kwok too; docs/local-cluster.md), built from Go modules
# and cached outside the repository (hack/controlplane); the first run
# builds them (about 10 minutes on 2 cores), later runs reuse the cache.
CONTROLPLANE = cd hack/controlplane && $(GO) run . ensure --components etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kwok
# Every package with a test file tagged integration.
INTEGRATION_PKGS = $(shell grep -rl --include='*_test.go' '^//go:build integration' cmd pkg internal test | xargs -n1 dirname | sort -u | sed 's|^|./|')

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/hcc-controller and bin/hcc-api.
	$(GO_BUILD) -o $(BIN_DIR)/hcc-controller ./cmd/hcc-controller
	$(GO_BUILD) -o $(BIN_DIR)/hcc-api ./cmd/hcc-api

.PHONY: images
images: ## OCI images of both binaries (linux/amd64, linux/arm64) in _output/images: OCI layouts, docker archives, digests; no Docker daemon, reproducible.
	@for platform in $(subst $(comma), ,$(IMAGE_PLATFORMS)); do \
	  for binary in $(subst $(comma), ,$(IMAGE_BINARIES)); do \
	    echo "$(GO) build $$binary for $$platform"; \
	    GOOS=$${platform%/*} GOARCH=$${platform#*/} $(GO_BUILD) \
	      -o $(IMAGES_BIN_DIR)/$${platform/\//-}/$$binary ./cmd/$$binary; \
	  done; \
	done
	@# hack/images is a module of its own: go-containerregistry never enters
	@# the binaries' module graph.
	$(GO) -C hack/images run . build \
	  --bin-dir $(abspath $(IMAGES_BIN_DIR)) --out $(abspath $(IMAGES_DIR)) --deploy $(CURDIR)/deploy \
	  --binaries $(IMAGE_BINARIES) --platforms $(IMAGE_PLATFORMS) \
	  --registry '$(REGISTRY)' --version '$(VERSION)' --commit '$(COMMIT)' --source-date-epoch '$(SOURCE_DATE_EPOCH)'

.PHONY: push
push: ## Push the images of make images to REGISTRY=host/path (docker's credentials) and pin them by digest in _output/images/deploy.
	@if [[ -z "$(REGISTRY)" ]]; then echo "make push needs REGISTRY=host/path (the images go to REGISTRY/hcc-controller and REGISTRY/hcc-api)" >&2; exit 1; fi
	$(GO) -C hack/images run . push --out $(abspath $(IMAGES_DIR)) --deploy $(CURDIR)/deploy \
	  --binaries $(IMAGE_BINARIES) --registry '$(REGISTRY)'

# make install-plugin installs bin/hcc-controller as $(PREFIX)/bin/kubectl-hcc:
# by default ~/.local/bin, which needs no root; PREFIX=/usr/local for every
# user. Any directory on PATH will do: kubectl finds plugins there.
PREFIX ?= $(HOME)/.local

.PHONY: install-plugin
install-plugin: build ## Install the kubectl plugin `kubectl hcc` (render, census, diff) as PREFIX/bin/kubectl-hcc; PREFIX=~/.local unless set.
	install -d '$(PREFIX)/bin'
	install -m 0755 $(BIN_DIR)/hcc-controller '$(PREFIX)/bin/kubectl-hcc'
	@echo "installed $(PREFIX)/bin/kubectl-hcc; kubectl finds it when $(PREFIX)/bin is on PATH (kubectl plugin list)"

.PHONY: generate
generate: ## Regenerate clients, deepcopy, CRDs, docs/configuration.md and deploy/monitoring.
	hack/update-codegen.sh
	$(GO) run ./pkg/config/internal/gendocs
	cd hack/monitoring && $(GO) run .

.PHONY: verify
verify: ## Fail when generated code, CRDs, docs, deploy/monitoring, go.mod/go.sum or formatting are stale, on a forbidden import, or on vet or staticcheck findings.
	hack/verify-codegen.sh
	hack/verify-monitoring.sh
	hack/verify-gomod.sh
	hack/verify-render-deps.sh
	@# gofmt of the toolchain that runs everything else, not whichever is on PATH.
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l cmd pkg internal hack test); \
	  if [[ -n "$$unformatted" ]]; then echo "gofmt needed: $$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) vet -tags dataplane ./test/dataplane/...
	cd hack/controlplane && $(GO) vet ./...
	cd hack/images && $(GO) vet ./...
	cd hack/monitoring && $(GO) vet ./...
	@# The import guard (the layering of docs/style.md; it parses the sources,
	@# builds none of them) and staticcheck both run, so one pass reports both.
	@status=0; \
	  echo "$(GO) test -count=1 ./internal/guards/"; $(GO) test -count=1 ./internal/guards/ || status=1; \
	  echo "hack/verify-staticcheck.sh"; hack/verify-staticcheck.sh || status=1; \
	  exit $$status

.PHONY: staticcheck
staticcheck: ## staticcheck (pinned in hack/lib.sh) on every hand-written package: without tags, with -tags integration, and test/dataplane with -tags dataplane.
	hack/verify-staticcheck.sh

.PHONY: verify-fresh
verify-fresh: ## make verify in a clone of HEAD with empty module, build and tool caches (a fresh machine).
	hack/verify-fresh.sh

.PHONY: test-unit
test-unit: ## Unit tests (fake clientsets, no cluster), with the race detector; hack/images's (make images twice) and hack/monitoring's rule tests too.
	$(GO) test -race -count=1 ./...
	@# TestMakeImagesIsReproducible builds every package for arm64 on a cold
	@# build cache: more than go test's default 10 minutes on a slow machine.
	cd hack/images && $(GO) test -race -count=1 -timeout 30m ./...
	cd hack/monitoring && $(GO) test -race -count=1 ./...

.PHONY: test-integration
test-integration: ## Integration tests against a real etcd and kube-apiserver.
	@bin_dir=$$($(CONTROLPLANE)); \
	  HCC_CONTROLPLANE_BIN="$$bin_dir" $(GO) test -race -count=1 -tags integration -timeout 20m \
	    $(INTEGRATION_PKGS)

.PHONY: test-e2e
test-e2e: ## The end-to-end tests alone: both binaries as processes on the local cluster (test/e2e).
	@bin_dir=$$($(CONTROLPLANE)); \
	  HCC_CONTROLPLANE_BIN="$$bin_dir" $(GO) test -race -count=1 -tags integration -timeout 20m ./test/e2e/

.PHONY: test
# verify first: it fails fastest (stale generated code, formatting, vet).
test: verify test-unit test-integration ## Everything: generated-code checks, unit tests, integration and end-to-end tests.
	@# Never silent about the suite it leaves out, nor about whether this
	@# machine could run it.
	@echo "make test: dataplane suite SKIPPED: real packets take their own budget (docs/local-cluster.md#the-dataplane); make test-dataplane-suite runs it, as .ci/run does after make test"
	@$(GO) run ./test/dataplane/cmd/hcc-dataplane --check || true

# The dataplane: the local cluster in a network namespace of its own, each
# pod in one of its own, kube-router enforcing the NetworkPolicies
# (docs/local-cluster.md#the-dataplane). Needs root (network namespaces)
# and iptables, ipset and ip, which hack/dataplane-deps.sh installs;
# without them it skips, saying why.
.PHONY: test-dataplane
test-dataplane: ## FLOWS=path [OBJECTS=path] [RESOLVE=host=ip,...] [CONTROLLER_ENV='NAME=VALUE ...']: the flows of a flows file as real packets.
	@if [[ -z "$(FLOWS)" ]]; then echo "usage: make test-dataplane FLOWS=path [OBJECTS=path] [RESOLVE=host=ip,...]" >&2; exit 2; fi
	@hack/dataplane-deps.sh
	@$(GO) build -o $(BIN_DIR)/hcc-dataplane ./test/dataplane/cmd/hcc-dataplane
	@$(BIN_DIR)/hcc-dataplane --flows '$(FLOWS)' $(if $(OBJECTS),--objects '$(OBJECTS)') $(if $(RESOLVE),--resolve '$(RESOLVE)') $(foreach kv,$(CONTROLLER_ENV),--controller-env '$(kv)')

.PHONY: bench-dataplane
bench-dataplane: ## Revocation on the wire: from an edit (server removed from a Context, Context deleted, DNS answer changed) to the first dropped connection, beside a NetworkPolicy deleted by hand.
	@hack/dataplane-deps.sh
	@mkdir -p _output
	$(GO) test -count=1 -tags dataplane -timeout 30m -run '^$$' -bench Revocation -benchtime=1x ./test/dataplane/ | tee _output/bench-dataplane.txt

.PHONY: test-dataplane-suite
test-dataplane-suite: ## The dataplane's end-to-end tests: HCC's policies, revocation and the egress gate on the wire (skips, saying why, where it cannot run).
	@hack/dataplane-deps.sh
	$(GO) test -count=1 -tags dataplane -timeout 40m -v ./test/dataplane/

.PHONY: bench
bench: ## Benchmarks, with the ratios the issues ask for (hcc-api: x-plain).
	@mkdir -p _output
	$(GO) test -run '^$$' -bench . -benchmem ./... | tee _output/bench.txt
	@# Convergence against a real API server (one run each: minutes, not
	@# iterations); the ratios are in their x-plain metrics.
	@bin_dir=$$($(CONTROLPLANE)); \
	  HCC_CONTROLPLANE_BIN="$$bin_dir" $(GO) test -count=1 -tags integration -timeout 30m -run '^$$' \
	    -bench 'Convergence' -benchtime=1x ./pkg/controllers/mcpserver/ ./pkg/controllers/host/ | tee _output/bench-convergence.txt
	@# The shipped binaries as processes (test/bench): the fleet's convergence
	@# against a plain client, hcc-api at scale against a bare handler.
	@# Their progress lines (bench: ...) are kept in the file; the table skips them.
	@bin_dir=$$($(CONTROLPLANE)); \
	  HCC_CONTROLPLANE_BIN="$$bin_dir" $(GO) test -count=1 -tags integration -timeout 60m -run '^$$' \
	    -bench . -benchtime=1x ./test/bench/ | tee _output/bench-e2e.txt
	@# Revocation on the wire (docs/local-cluster.md#the-dataplane): skips,
	@# saying why, where network namespaces cannot be made.
	@$(MAKE) --no-print-directory bench-dataplane
	@# Every figure above as one table, each beside its same-run baseline.
	@$(GO) run ./hack/benchtable _output/bench*.txt

.PHONY: bench-large
bench-large: ## hcc-controller restarted on a converged fleet of 10,000 McpServers and 5,000 Hosts: RSS, CPU, a full resync's cost (test/bench: BenchmarkControllerFleetScale; docs/development.md).
	@mkdir -p _output
	@bin_dir=$$($(CONTROLPLANE)); \
	  HCC_BENCH_LARGE=1 HCC_CONTROLPLANE_BIN="$$bin_dir" $(GO) test -count=1 -tags integration -timeout 90m -run '^$$' \
	    -bench 'ControllerFleetScale' -benchtime=1x ./test/bench/ | tee _output/bench-large-controller.txt
	@$(GO) run ./hack/benchtable _output/bench-large-controller.txt

.PHONY: controlplane
controlplane: ## Build (or reuse) the cached local control-plane binaries; prints their directory.
	@$(CONTROLPLANE)

.PHONY: run
run: ## Local cluster, CRDs, RBAC, both binaries, the development Control API and deploy/examples; prints the API and a curl line; Ctrl-C stops all (HCC_KUBECONFIG: use that cluster, apply nothing).
	@$(GO) build -o $(BIN_DIR)/hcc-run ./hack/run
	@exec $(BIN_DIR)/hcc-run

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN_DIR)
