# e2e/soak/soak.mk: the soak (docs/soak.md). The root Makefile includes it, with
# REPO, OUT and GO, and kindconfig's cluster and images targets:
#   make soak                        4-minute soak, every fault, built-in proxy
#   make soak SOAK_DURATION=30m      the long form, for a person
#   make soak SOAK_FAULTS=none       steady load only
#   make soak SOAK_FAULTS="agent proxy"
#   make soak NODE_ACCESS=daemonset  read the nodes through the node-access DaemonSet, as on a
#                                    cluster that is not kind (empty: chosen, as the legs choose)
# Faults: rolling scale kube-proxy agent proxy apiserver recreate scan first-conn node-loss (all).

SOAK_DURATION  ?= 4m
SOAK_FAULTS    ?= all
SOAK_ARTIFACTS ?= $(REPO)/_artifacts/soak
# Empty: the load's duration plus 25 minutes (e2e/soak/run.sh).
SOAK_TEST_TIMEOUT ?=
SOAK_PROXY     ?= builtin
# The Envoy image fixtures/envoy pins, read from that one place.
SOAK_ENVOY_IMAGE ?= $(shell sed -n 's/^const Image = "\(.*\)"$$/\1/p' $(REPO)/fixtures/envoy/envoy.go)

##@ Soak (e2e/soak/)

.PHONY: soak
soak: ## Steady meshed traffic while faults run (SOAK_DURATION=4m SOAK_FAULTS=all|none|<list>, SOAK_PROXY=builtin|envoy); report in _artifacts/soak/
	@REPO=$(REPO) GO="$(GO)" MAKE="$(MAKE) --no-print-directory" \
	SOAK_DURATION=$(SOAK_DURATION) SOAK_FAULTS="$(SOAK_FAULTS)" SOAK_ARTIFACTS=$(SOAK_ARTIFACTS) SOAK_TEST_TIMEOUT=$(SOAK_TEST_TIMEOUT) \
	PROXY=$(SOAK_PROXY) ENVOY_IMAGE=$(SOAK_ENVOY_IMAGE) NODE_ACCESS="$(NODE_ACCESS)" \
	KIND=$(KC_KIND) CLUSTER=$(KIND_CLUSTER) KUBECONFIG_FILE=$(KIND_KUBECONFIG) \
	bash $(REPO)/e2e/soak/run.sh
