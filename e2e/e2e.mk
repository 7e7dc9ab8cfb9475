# e2e/e2e.mk: the acceptance legs. Included by the root Makefile (REPO, OUT, GO).
# e2e/run.sh makes the cluster and the images, then runs the suite through svclb-e2e run
# (e2e/cmd/svclb-e2e, docs/cli.md: Ctrl-C restores the cluster and still writes the report).
#   make e2e-svc                      cluster + images + every leg, red then green, and the
#                                     programming figure; reports in _artifacts/
#   make e2e-svc LEGS=reach           only the legs whose label matches (Ginkgo label filter;
#                                     LEGS="reach affinity" means either)
#   make e2e-svc LEGS=cni-latency     the opt-in figure (label opt-in, never in a run without
#                                     LEGS): svclb-cni's pod start latency over 100 pods
#   make e2e-svc KEEP_CLUSTER=1       reuse the cluster and leave it (and the legs' namespace) running
#   make e2e-svc PROXY=builtin|envoy  node proxy; default: Envoy if its image can be pulled, else built-in
#   make e2e-svc KIND_NODE_MODE=offline  kindconfig's cluster variables reach `make cluster` unchanged
#   make e2e-svc NODE_ACCESS=daemonset   how the suite reaches a node's root (svclb-e2e run --node-access):
#                                     docker or daemonset; default: docker when every node is a running
#                                     container of the local Docker engine (kind), else daemonset
#   make legs-doc                     docs/legs.md from the legs (TestLegsDoc fails while it is stale)
#   make envoy-validate               the representative xDS set through Envoy's --mode validate

LEGS         ?=
PROXY        ?=
KEEP_CLUSTER ?=
NODE_ACCESS  ?=
# The image fixtures/envoy pins (envoy.Image): read from that one place, never repeated here.
ENVOY_IMAGE  ?= $(shell sed -n 's/^const Image = "\(.*\)"$$/\1/p' $(REPO)/fixtures/envoy/envoy.go)
E2E_ARTIFACTS ?= $(REPO)/_artifacts
E2E_TIMEOUT  ?= 45m

##@ Acceptance legs (e2e/)

.PHONY: e2e-svc
e2e-svc: ## Every leg red (agent off) then green (on) on kind; LEGS=<label filter> (LEGS=cni-latency: opt-in figure) KEEP_CLUSTER=1 PROXY=envoy|builtin; reports in _artifacts/
	@REPO=$(REPO) GO="$(GO)" MAKE="$(MAKE) --no-print-directory" LEGS="$(LEGS)" PROXY="$(PROXY)" KEEP_CLUSTER="$(KEEP_CLUSTER)" NODE_ACCESS="$(NODE_ACCESS)" \
	ENVOY_IMAGE=$(ENVOY_IMAGE) ARTIFACTS=$(E2E_ARTIFACTS) TIMEOUT=$(E2E_TIMEOUT) \
	KIND=$(KC_KIND) CLUSTER=$(KIND_CLUSTER) KUBECONFIG_FILE=$(KIND_KUBECONFIG) CLUSTER_STATE=$(KIND_STATE) \
	bash $(REPO)/e2e/run.sh

# legs-doc is TestLegsDoc with -update (the legs live in _test.go files);
# SVCLB_E2E=0 keeps TestMain from setting the cluster up around it.
.PHONY: legs-doc
legs-doc: ## Rewrite docs/legs.md from the legs (legOrder and each leg's value); make unit fails while it is stale
	SVCLB_E2E=0 $(GO) test -count=1 -run '^TestLegsDoc$$' ./e2e -update

.PHONY: e2e-report
e2e-report: ## Re-render _artifacts/report.md and report.html from the evidence of the last run
	@$(GO) run ./e2e/cmd/report -dir $(E2E_ARTIFACTS)

##@ Envoy's own check (fixtures/envoy)

# fixtures/envoy/validate.sh: a local envoy binary, else ENVOY_IMAGE if Docker already has it,
# else one line saying why it skipped. ENVOY_PULL=1 pulls the image first (the workflow) and
# fails where it cannot be had.
ENVOY_PULL ?=
.PHONY: envoy-validate
envoy-validate: ## The representative xDS set (both CDS modes) as static resources through Envoy's --mode validate; ENVOY_PULL=1 pulls the image; without envoy or its image it skips, saying why
	@REPO=$(REPO) GO="$(GO)" ENVOY_IMAGE=$(ENVOY_IMAGE) ENVOY_PULL="$(ENVOY_PULL)" bash $(REPO)/fixtures/envoy/validate.sh
