# svclb — see README.md. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export CGO_ENABLED ?= 0
GO ?= go
REPO := $(shell pwd)
OUT := $(REPO)/_output
export SVCLB_K8S_BIN_DIR ?= $(OUT)/bin

##@ Tests

.PHONY: test
test: k8s-test-bins ## Unit + integration tests that need no cluster (root: netns/nftables tests run for real)
	CGO_ENABLED=1 $(GO) test -count=1 ./...

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

##@ Help

.PHONY: help
help: ## This list
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

# Each piece owns its own fragment.
include $(wildcard kindconfig/*.mk fixtures/*.mk e2e/*.mk)
