# e2e/perf/perf.mk: the agent side by side with kube-proxy on the kind cluster (docs/perf.md; e2e/perf/doc.go).
#   make perf                                     every measurement (base, new Service, each size)
#   make perf PERF_RUN=TestEndpointChange         one (a go test -run regexp)
#   make perf PERF_RUN=TestScale PERF_SIZES=1000
#   make perf DATA=1                              only what a connection costs: four data-plane paths (TestDataplane)
#   make perf DATA=1 PERF_RUN=.                   every measurement and the data plane
#   make perf-report                              re-render report.md/.html from the JSON results
# The root Makefile defines REPO, OUT and GO; kindconfig/kindconfig.mk the cluster's variables.
# It reuses the cluster and leaves it; where the cluster is shared, serialize runs (flock). Results: $(PERF_ARTIFACTS).

# DATA=1 adds TestDataplane (it skips without) and, unless PERF_RUN says otherwise, runs only it.
DATA              ?= 0
ifeq ($(DATA),1)
PERF_RUN          ?= TestDataplane
endif
PERF_RUN          ?= .
# The data plane's open loop, per path: connections and their rate (10,000 at 200/s: 50 s;
# at 500/s the node proxy's paths saturate a 2-core machine, docs/perf.md).
PERF_DATA_CONNS   ?= 10000
PERF_DATA_RATE    ?= 200
# 5000 takes about 11 minutes on 2 cores (docs/perf.md, "At scale on the cluster").
PERF_SIZES        ?= 1000
PERF_CHANGES      ?= 30
PERF_SCALE_CHANGES ?= 30
PERF_TRIALS       ?= 20
# Creating a size's objects may take this long, so that a run ends within about 12 min.
PERF_CREATE_WITHIN ?= 6m
# Services created per second at each size (0: as fast as the apiserver takes them).
PERF_CREATE_RATE  ?= 0
# 0: skip restarting kube-proxy and the node pod at each size.
PERF_RESTARTS     ?= 1
PERF_PROXY        ?= builtin
PERF_ARTIFACTS    ?= $(REPO)/_artifacts/perf
PERF_TIMEOUT      ?= 60m
PERF_CLIENT_IMAGE ?= svclb/perf-client:dev

##@ Performance beside kube-proxy (e2e/perf/)

.PHONY: perf
perf: ## The agent beside kube-proxy on kind: PERF_RUN=<test regexp> PERF_SIZES=1000[,5000] DATA=1 (the data plane); report in _artifacts/perf/
	@REPO=$(REPO) OUT=$(OUT) GO="$(GO)" MAKE="$(MAKE) --no-print-directory" \
	RUN="$(PERF_RUN)" SIZES="$(PERF_SIZES)" CHANGES=$(PERF_CHANGES) SCALE_CHANGES=$(PERF_SCALE_CHANGES) TRIALS=$(PERF_TRIALS) CREATE_WITHIN=$(PERF_CREATE_WITHIN) CREATE_RATE=$(PERF_CREATE_RATE) RESTARTS=$(PERF_RESTARTS) \
	DATA=$(DATA) DATA_CONNS=$(PERF_DATA_CONNS) DATA_RATE=$(PERF_DATA_RATE) \
	PROXY=$(PERF_PROXY) ARTIFACTS=$(PERF_ARTIFACTS) TIMEOUT=$(PERF_TIMEOUT) CLIENT_IMAGE=$(PERF_CLIENT_IMAGE) \
	KIND=$(KC_KIND) CLUSTER=$(KIND_CLUSTER) KUBECONFIG_FILE=$(KIND_KUBECONFIG) \
	bash $(REPO)/e2e/perf/run.sh

.PHONY: perf-report
perf-report: ## Re-render _artifacts/perf/report.md and report.html from the results there
	@$(GO) run ./e2e/perf/cmd/report -dir $(PERF_ARTIFACTS)
