# svclb — see README.md and TESTING.md. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
GO ?= go
REPO := $(shell pwd)
OUT := $(REPO)/_output
export SVCLB_K8S_BIN_DIR ?= $(OUT)/bin

# One cgo setting for every go test, go vet, go run, golangci-lint and the e2e
# suite binary (e2e/run.sh). CGO_ENABLED is part of every package's build key:
# two settings compile the whole dependency tree twice (the suite binary built
# with 0 after `make test` built with 1 cost 146 s of a fresh run). 1 because
# -race needs it. The shipped binaries do not use this build: images.sh and
# kindconfig.mk build them static with CGO_ENABLED=0 -trimpath.
export CGO_ENABLED ?= 1

# PKGS and GOTESTFLAGS narrow any test target: make test PKGS=./agent/ GOTESTFLAGS='-run TestX -v'
PKGS        ?= ./...
GOTESTFLAGS ?=

##@ Tests (TESTING.md)

# EXAMPLES are the modules under examples/ (suites of their own that import
# the framework, replace ../..): go test ./... does not reach them, so unit
# and test compile each and run its unit tests, when PKGS is the whole tree.
# GOWORK=off: each resolves from its own go.mod and go.sum.
EXAMPLES ?= $(if $(filter ./...,$(PKGS)),$(patsubst %/go.mod,%,$(wildcard examples/*/go.mod)))
define test-examples
	@set -e; for m in $(EXAMPLES); do echo "$$m:"; (cd $$m && GOWORK=off $(GO) test -count=1 $(GOTESTFLAGS) ./...); done
endef

.PHONY: unit
unit: ## No root, nothing built, no Docker: netns/nftables, envtest and kube-proxy tests skip, saying why
	SVCLB_UNIT=1 $(GO) test -count=1 $(GOTESTFLAGS) $(PKGS)
	$(test-examples)

.PHONY: test
test: k8s-test-bins ## As root, all that needs no cluster: netns/nftables, envtest, real kube-proxy; a missing prerequisite fails
	$(GO) test -count=1 $(GOTESTFLAGS) $(PKGS)
	$(test-examples)

# flake: COUNT runs of RUN in PKGS while one busy loop per core (LOAD of them)
# competes for the CPU, the way a loaded CI machine or a parallel build does.
COUNT ?= 20
RUN   ?= .
LOAD  ?= $(shell nproc)
.PHONY: flake
flake: ## Flake hunt: PKGS=./agent/ RUN=TestX [COUNT=20 LOAD=<cores>]: go test -count=COUNT under CPU load
	@set -u; pids=(); trap 'kill "$${pids[@]}" 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	for _ in $$(seq 1 $(LOAD)); do ( while :; do :; done ) & pids+=($$!); done; \
	echo "[flake] $(LOAD) busy loops; go test -count=$(COUNT) -run '$(RUN)' $(PKGS)"; \
	$(GO) test -count=$(COUNT) -run '$(RUN)' $(GOTESTFLAGS) $(PKGS)

##@ Lint

GOLANGCI_LINT_VERSION := v2.15.0
ACTIONLINT_VERSION    := v1.7.12
TOOLS         := $(OUT)/tools
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
ACTIONLINT    := $(TOOLS)/actionlint-$(ACTIONLINT_VERSION)/actionlint
# The repository's files, tracked or new (not ignored), that exist in the tree.
repo_files = $(sort $(wildcard $(shell git ls-files --cached --others --exclude-standard $(1))))
GO_FILES = $(call repo_files,'*.go')
SH_FILES = $(call repo_files,'*.sh' .ci/run)

.PHONY: lint
lint: lint-go lint-sh lint-actions ## gofmt, go vet, golangci-lint, shellcheck, actionlint (pinned, cached in _output/tools)

# All three run even when one fails: one pass lists every Go finding.
.PHONY: lint-go
lint-go: $(GOLANGCI_LINT)
	@rc=0; echo "gofmt -l"; out=$$(gofmt -l $(GO_FILES)); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; rc=1; fi; \
	echo "go vet ./..."; $(GO) vet ./... || rc=1; \
	echo "golangci-lint run ./..."; $(GOLANGCI_LINT) run ./... || rc=1; \
	for m in $(patsubst %/go.mod,%,$(wildcard examples/*/go.mod)); do \
	  echo "$$m: go vet, golangci-lint"; \
	  (cd $$m && GOWORK=off $(GO) vet ./... && GOWORK=off $(GOLANGCI_LINT) run ./...) || rc=1; \
	done; \
	exit $$rc

.PHONY: lint-sh
lint-sh:
	@command -v shellcheck >/dev/null || { echo "lint: shellcheck missing (Debian: apt-get install shellcheck)" >&2; exit 1; }
	shellcheck $(SH_FILES)

.PHONY: lint-actions
lint-actions: $(ACTIONLINT)
	$(ACTIONLINT)

# go install pkg@version builds outside the module; one directory per version,
# so a version bump rebuilds and an unchanged one costs nothing.
$(GOLANGCI_LINT):
	GOBIN=$(@D) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
$(ACTIONLINT):
	GOBIN=$(@D) $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

##@ Scale

.PHONY: scale
scale: k8s-test-bins ## Agent vs kube-proxy RSS at 10k Services / 100k endpoints (root, ~15 min; SVCLB_SCALE_SERVICES, SVCLB_SCALE_ENDPOINTS, SVCLB_SCALE_ONDEMAND=1)
	SVCLB_SCALE=1 $(GO) test -count=1 -v -timeout 55m -run TestRSS ./e2e/scale

# SCALE_STEPS: the Service counts to step through (the population only grows).
SCALE_STEPS ?= 1000,2000,5000,10000
.PHONY: scale-growth
scale-growth: k8s-test-bins ## How cost grows: agent/node proxy push time, pushes, RSS beside kube-proxy's at each of SCALE_STEPS Services (root, ~5 min; SVCLB_SCALE_PROFILE=1: node proxy heap profiles); growth.json in _artifacts/perf/
	SVCLB_SCALE=1 SVCLB_SCALE_STEPS=$(SCALE_STEPS) SVCLB_PERF_ARTIFACTS=$(PERF_ARTIFACTS) $(GO) test -count=1 -v -timeout 115m -run 'TestGrowth$$' ./e2e/scale

# HELD: the idle connections held open through the node proxy, step by step; CONNS new ones
# at CONN_RATE per second (open loop) at each.
HELD      ?= 0,100,1000
CONNS     ?= 2000
CONN_RATE ?= 100
.PHONY: scale-held
scale-held: k8s-test-bins ## New connections' setup-to-first-byte p50/p99/p99.9 through the node proxy with HELD idle connections open, CONNS at CONN_RATE/s; proxy RSS, fds (root, ~2 min); held.json in _artifacts/perf/
	SVCLB_SCALE=1 SVCLB_SCALE_HELD=$(HELD) SVCLB_SCALE_CONNS=$(CONNS) SVCLB_SCALE_CONN_RATE=$(CONN_RATE) SVCLB_PERF_ARTIFACTS=$(PERF_ARTIFACTS) $(GO) test -count=1 -v -timeout 55m -run 'TestHeld$$' ./e2e/scale

# DEMANDED: the Services already demanded at each level (a fresh agent and node proxy each);
# FIRST connections to Services not yet demanded, and as many to demanded ones, at FIRST_RATE/s.
DEMANDED   ?= 10,5000
FIRST      ?= 100
FIRST_RATE ?= 4
.PHONY: scale-ondemand
scale-ondemand: k8s-test-bins ## On-demand CDS: first connections' setup-to-first-byte p50/p99 with DEMANDED Services demanded, beside demanded ones' (root, ~4 min; SVCLB_SCALE_PROFILE=1: node proxy CPU profiles); ondemand.json in _artifacts/perf/
	SVCLB_SCALE=1 SVCLB_SCALE_DEMANDED=$(DEMANDED) SVCLB_SCALE_FIRST=$(FIRST) SVCLB_SCALE_FIRST_RATE=$(FIRST_RATE) SVCLB_PERF_ARTIFACTS=$(PERF_ARTIFACTS) $(GO) test -count=1 -v -timeout 55m -run 'TestOnDemand$$' ./e2e/scale

.PHONY: help
help:
	@echo "make <target>   (README.md; the test tiers: TESTING.md)"
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

# Each piece owns its own fragment.
include $(wildcard kindconfig/*.mk fixtures/*.mk e2e/*.mk e2e/conformance/*.mk e2e/perf/*.mk e2e/soak/*.mk)
