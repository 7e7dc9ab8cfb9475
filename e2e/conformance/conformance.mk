# e2e/conformance/conformance.mk: Kubernetes' own sig-network Service specs
# (test/e2e, v1.34.4) run red then green through the agent. Included by the
# root Makefile (REPO, OUT, GO; kindconfig.mk's K8S_VERSION, KC_BIN,
# KC_K8S_LDFLAGS, kc_timed). See docs/peer.md.
#   make e2e-peer                        tools, agnhost image, the set red then green; report in _artifacts/peer/
#   make e2e-peer PEER_SET=services      every spec of test/e2e/network/service.go and traffic_distribution.go
#                                        (listed by e2e.test --list-tests); PEER_SET=core (default): e2e/conformance/focus.txt
#   make e2e-peer FOCUS='<regex>'        another --ginkgo.focus (the report still lists the set)
#   make e2e-peer PEER_PHASES=green      the phases to run: kube-proxy (baseline), red, green; the
#                                        report holds every phase found in _artifacts/peer/
#   make e2e-peer KEEP_CLUSTER=1 PROXY=builtin|envoy KIND_NODE_MODE=offline   as make e2e-svc
#   make e2e-peer PEER_AGNHOST_SOURCE=pull   online: the nodes pull upstream's agnhost image
#   make e2e-peer PEER_GUARD_CUT=all     the guard cuts kube-proxy's entries for everyone (default proxy)
#   make peer-tools                      only build k8s-e2e.test, agnhost (and kubectl)

PEER_DIR        := $(REPO)/e2e/conformance
PEER_TOOLS_MOD  := $(PEER_DIR)/tools
# Names of our own: _output/e2e.test is the suite's, _output/bin/kubectl kindconfig's.
PEER_E2E_TEST   := $(KC_BIN)/k8s-e2e.test
PEER_AGNHOST    := $(KC_BIN)/agnhost
PEER_KUBECTL    := $(KC_BIN)/kubectl
# The tag test/utils/image asks for at K8S_VERSION (test/images/agnhost/VERSION;
# e2e/conformance/image.sh checks it).
PEER_AGNHOST_VERSION ?= 2.56
PEER_AGNHOST_IMAGE   ?= registry.k8s.io/e2e-test-images/agnhost:$(PEER_AGNHOST_VERSION)
# build: the image peer-image builds, kind-loaded (offline); pull: upstream's
# own image, pulled by the nodes (online, e.g. GitHub's runners).
PEER_AGNHOST_SOURCE ?= build
PEER_WORK       ?= $(REPO)/_work/peer
PEER_ARTIFACTS  ?= $(REPO)/_artifacts/peer
FOCUS           ?=
# core: e2e/conformance/focus.txt, CI-sized; services: every spec of
# Kubernetes' Service files, derived from the e2e binary; or a file's path.
PEER_SET        ?= core
PEER_PHASES     ?= red green
# Who cuts the enrolled namespaces' Services: guard (the guard's
# namespace-selector mode; empty: the runner's default) or label (the runner
# labels them for the guard's label mode).
PEER_CUT        ?=
# The guard's cut mode (PEER_CUT=guard): proxy (default: only the node proxy's
# connections are refused, the framework's own clients keep kube-proxy) or all
# (kube-proxy's entries cut for everyone, as in the legs).
PEER_GUARD_CUT  ?= proxy
# e2e.test processes per phase, each running a share of the set (empty: the runner's 5).
PEER_SHARDS     ?=
# Bound of one phase's e2e.test runs (empty: the runner's 8m for core, 40m otherwise).
PEER_PHASE_TIMEOUT ?=
# Kubernetes-sized builds run niced, leaving the CPU to whatever else runs on a small host.
PEER_NICE       ?= nice -n 10
PEER_GO         := CGO_ENABLED=0 $(PEER_NICE) $(GO)

##@ Kubernetes' own Service specs through the agent (e2e/conformance/, docs/peer.md)

.PHONY: peer-tools
peer-tools: $(PEER_E2E_TEST) $(PEER_AGNHOST) $(PEER_KUBECTL) ## k8s-e2e.test + agnhost (K8S_VERSION) into _output/bin; cached (cold ≈6+2 min idle, 22+4 min on a loaded machine)

# -vet=off: test/e2e's own vet findings are upstream's, not ours. The same
# version stamp as kindconfig's binaries (the framework logs and compares it).
$(PEER_E2E_TEST): $(PEER_TOOLS_MOD)/go.mod $(PEER_TOOLS_MOD)/go.sum
	@echo "[peer-tools] go test -c k8s.io/kubernetes/test/e2e $(K8S_VERSION)"
	@cd $(PEER_TOOLS_MOD) && $(call kc_timed,k8s-e2e.test,$(PEER_GO) test -c -vet=off -trimpath -ldflags '$(KC_K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/test/e2e)

$(PEER_AGNHOST): $(PEER_TOOLS_MOD)/go.mod $(PEER_TOOLS_MOD)/go.sum
	@echo "[peer-tools] go build k8s.io/kubernetes/test/images/agnhost $(K8S_VERSION)"
	@cd $(PEER_TOOLS_MOD) && $(call kc_timed,agnhost,$(PEER_GO) build -trimpath -ldflags '-s -w' -o $@ k8s.io/kubernetes/test/images/agnhost)

.PHONY: peer-image
peer-image: $(PEER_AGNHOST) ## $(PEER_AGNHOST_IMAGE) built offline (agnhost on a debootstrap'd Debian rootfs); cached
	@AGNHOST=$(PEER_AGNHOST) AGNHOST_VERSION=$(PEER_AGNHOST_VERSION) IMAGE=$(PEER_AGNHOST_IMAGE) WORK=$(PEER_WORK)/agnhost DEBIAN_MIRROR=$(DEBIAN_MIRROR) \
	AGNHOST_SRC=$$(cd $(PEER_TOOLS_MOD) && $(GO) list -f '{{.Dir}}' k8s.io/kubernetes/test/images/agnhost) \
	bash $(PEER_DIR)/image.sh

.PHONY: e2e-peer
e2e-peer: $(PEER_E2E_TEST) $(PEER_KUBECTL) $(if $(filter build,$(PEER_AGNHOST_SOURCE)),peer-image) $(KC_KIND) ## Kubernetes' own Service specs red then green through the agent; PEER_SET=core|services FOCUS=<regex> PEER_PHASES="red green" KEEP_CLUSTER=1 PROXY=; report in _artifacts/peer/
	@REPO=$(REPO) GO="$(GO)" MAKE="$(MAKE) --no-print-directory" PHASES="$(PEER_PHASES)" SET="$(PEER_SET)" FOCUS="$(FOCUS)" CUT="$(PEER_CUT)" GUARD_CUT="$(PEER_GUARD_CUT)" PHASE_TIMEOUT="$(PEER_PHASE_TIMEOUT)" SHARDS="$(PEER_SHARDS)" \
	PROXY="$(PROXY)" KEEP_CLUSTER="$(KEEP_CLUSTER)" ENVOY_IMAGE=$(ENVOY_IMAGE) ARTIFACTS=$(PEER_ARTIFACTS) \
	KIND=$(KC_KIND) CLUSTER=$(KIND_CLUSTER) KUBECONFIG_FILE=$(KIND_KUBECONFIG) \
	E2E_TEST=$(PEER_E2E_TEST) KUBECTL=$(PEER_KUBECTL) AGNHOST_IMAGE=$(PEER_AGNHOST_IMAGE) AGNHOST_SOURCE=$(PEER_AGNHOST_SOURCE) \
	bash $(PEER_DIR)/run.sh

.PHONY: peer-report
peer-report: ## Rebuild _artifacts/peer/report.md, report.html and peer.json from the phases found there
	@$(GO) run ./e2e/conformance/cmd/conformance -report-only -set $(PEER_SET) -e2e-test $(PEER_E2E_TEST) -artifacts $(PEER_ARTIFACTS) \
	-docs-link $$(realpath --relative-to=$(PEER_ARTIFACTS) $(REPO)/docs/peer.md)
