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

##@ Scale

.PHONY: scale
scale: k8s-test-bins ## Agent vs kube-proxy RSS at 10k Services / 100k endpoints (root, ~15 min; SVCLB_SCALE_SERVICES, SVCLB_SCALE_ENDPOINTS, SVCLB_SCALE_ONDEMAND=1)
	SVCLB_SCALE=1 CGO_ENABLED=1 $(GO) test -count=1 -v -timeout 55m -run TestRSS ./internal/scale

##@ Help

.PHONY: help
help: ## This list
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

# Each piece owns its own fragment.
include $(wildcard kindconfig/*.mk fixtures/*.mk e2e/*.mk)
