# kindconfig/kindconfig.mk: Kubernetes binaries, the offline kind node image, the
# suite's kind cluster and the project's images. Included by the root Makefile
# (which defines REPO, OUT and GO). See kindconfig/README.md.

# K8S_VERSION stamps the binaries; it must match k8s.io/kubernetes in k8sbuild/go.mod.
K8S_VERSION      ?= v1.34.4
ETCD_VERSION     ?= v3.6.5
COREDNS_VERSION  ?= v1.12.1
FLANNEL_VERSION  ?= v0.28.10
KIND_CLUSTER     ?= svclb
# The cluster's kind config: cluster.yaml, or perf.yaml (the same cluster, its control plane
# sized for `make perf` at 5,000 Services; docs/perf.md).
KIND_CONFIG      ?= $(REPO)/kindconfig/cluster.yaml
KIND_KUBECONFIG  ?= $(OUT)/kubeconfig
# What the last `make cluster` did (created or reused, node image time): see cluster.sh.
KIND_STATE       ?= $(OUT)/cluster.state
KIND_NODE_MODE   ?=
KIND_NODE_IMAGE  ?= svclb/kind-node:$(K8S_VERSION)
# The published node image, by digest (kind v0.30.0's release notes list this one for v1.34.0):
# a tag can be moved, a digest cannot.
KIND_NODE_IMAGE_ONLINE ?= kindest/node:v1.34.0@sha256:7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a
KIND_WORK        ?= $(REPO)/_work/kind
DEBIAN_MIRROR    ?= $(or $(shell awk '/^URIs:/{print $$2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null),http://deb.debian.org/debian)

# The names kubeadm v1.34 and kind's containerd config (sandbox_image) ask for.
KC_ETCD_TAG    := $(patsubst v%,%,$(ETCD_VERSION))-0
KC_PAUSE_TAGS  := 3.10 3.10.1
KC_DIR         := $(REPO)/kindconfig
KC_K8S_MOD     := $(KC_DIR)/k8sbuild
KC_ADDONS_MOD  := $(KC_K8S_MOD)/addons
KC_FLANNEL_MOD := $(KC_K8S_MOD)/flannel
KC_BIN         := $(OUT)/bin
KC_KIND        := $(KC_BIN)/kind
KC_K8S_CMDS    := kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl
KC_CNI         := bridge ptp host-local loopback portmap
KC_CNI_PKG_bridge     := main/bridge
KC_CNI_PKG_ptp        := main/ptp
KC_CNI_PKG_loopback   := main/loopback
KC_CNI_PKG_host-local := ipam/host-local
KC_CNI_PKG_portmap    := meta/portmap
KC_GOBUILD     := CGO_ENABLED=0 $(GO) build -trimpath
# kubeadm refuses v0.0.0: stamp the version the way Kubernetes' own build does.
KC_K8S_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 \
	-X $(p).gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) -X $(p).gitTreeState=clean \
	-X $(p).gitCommit=0000000000000000000000000000000000000000 -X $(p).buildDate=2026-01-01T00:00:00Z)
# kc_timed runs a command and prints how long it took: `$(call kc_timed,label,command)`.
kc_timed = { s=$$(date +%s); if $(2); then echo "[$(1)] built in $$(( $$(date +%s) - s ))s"; \
	else echo "[$(1)] FAILED after $$(( $$(date +%s) - s ))s" >&2; exit 1; fi; }

# kube-proxy: pkg/kubeproxyguard runs a real kube-proxy against envtest in a netns.
KC_TEST_BINS := $(addprefix $(KC_BIN)/,kube-apiserver etcd kubectl kube-proxy)
KC_ALL_BINS  := $(addprefix $(KC_BIN)/,$(KC_K8S_CMDS) etcd coredns pause flanneld) $(addprefix $(KC_BIN)/cni/,$(KC_CNI))

##@ Kubernetes binaries and the kind cluster (kindconfig/)

.PHONY: k8s-test-bins
k8s-test-bins: $(KC_TEST_BINS) ## kube-apiserver, etcd, kubectl, kube-proxy into _output/bin (envtest, guard test); cached, cold ≈15 min
.PHONY: k8s-bins
k8s-bins: $(KC_ALL_BINS) ## All Kubernetes binaries (K8S_VERSION=v1.34.4) + etcd, CoreDNS, pause, flanneld, CNI plugins into _output/bin

$(addprefix $(KC_BIN)/,$(KC_K8S_CMDS)): $(KC_BIN)/%: $(KC_K8S_MOD)/go.mod $(KC_K8S_MOD)/go.sum
	@echo "[k8s-bins] go build k8s.io/kubernetes/cmd/$* $(K8S_VERSION)"
	@cd $(KC_K8S_MOD) && $(call kc_timed,$*,$(KC_GOBUILD) -ldflags '$(KC_K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/$*)

$(KC_BIN)/etcd: $(KC_ADDONS_MOD)/go.mod $(KC_ADDONS_MOD)/go.sum
	@echo "[k8s-bins] go build etcd $(ETCD_VERSION)"
	@cd $(KC_ADDONS_MOD) && $(call kc_timed,etcd,$(KC_GOBUILD) -ldflags '-s -w' -o $@ go.etcd.io/etcd/server/v3)

$(KC_BIN)/coredns: $(KC_ADDONS_MOD)/go.mod $(KC_ADDONS_MOD)/go.sum
	@echo "[k8s-bins] go build coredns $(COREDNS_VERSION)"
	@cd $(KC_ADDONS_MOD) && $(call kc_timed,coredns,$(KC_GOBUILD) -ldflags '-s -w' -o $@ github.com/coredns/coredns)

$(KC_BIN)/pause: $(KC_ADDONS_MOD)/go.mod $(KC_ADDONS_MOD)/pause/main.go
	@cd $(KC_ADDONS_MOD) && $(call kc_timed,pause,$(KC_GOBUILD) -ldflags '-s -w' -o $@ ./pause)

$(addprefix $(KC_BIN)/cni/,$(KC_CNI)): $(KC_BIN)/cni/%: $(KC_ADDONS_MOD)/go.mod $(KC_ADDONS_MOD)/go.sum
	@cd $(KC_ADDONS_MOD) && $(call kc_timed,cni $*,$(KC_GOBUILD) -ldflags '-s -w' -o $@ github.com/containernetworking/plugins/plugins/$(KC_CNI_PKG_$*))

# flanneld is flannel's upstream main.go with every backend but host-gw dropped
# (tencentvpc needs a module the proxy does not serve); see k8sbuild/flannel/tools.go.
$(KC_BIN)/flanneld: $(KC_FLANNEL_MOD)/go.mod $(KC_FLANNEL_MOD)/go.sum
	@echo "[k8s-bins] go build flanneld $(FLANNEL_VERSION) (host-gw backend only)"
	@set -e; cd $(KC_FLANNEL_MOD); src=$$($(GO) mod download -json github.com/flannel-io/flannel | sed -n 's/.*"Dir": "\(.*\)",/\1/p'); \
	test -f "$$src/main.go"; mkdir -p $(OUT)/flanneld-src; \
	grep -v -E '^\s*_ "github.com/flannel-io/flannel/pkg/backend/' "$$src/main.go" > $(OUT)/flanneld-src/main.go; \
	sed -i 's|^\(\s*"github.com/flannel-io/flannel/pkg/backend"\)$$|\1\n\t_ "github.com/flannel-io/flannel/pkg/backend/hostgw"|' $(OUT)/flanneld-src/main.go; \
	grep -q 'pkg/backend/hostgw"' $(OUT)/flanneld-src/main.go; \
	$(call kc_timed,flanneld,$(KC_GOBUILD) -ldflags '-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$(FLANNEL_VERSION)' -o $@ $(OUT)/flanneld-src/main.go)

# The kind CLI at the version the root module pins (sigs.k8s.io/kind in go.mod).
$(KC_KIND): $(REPO)/go.mod $(REPO)/go.sum
	@$(call kc_timed,kind CLI,$(KC_GOBUILD) -o $@ sigs.k8s.io/kind)

.PHONY: node-image
node-image: $(KC_ALL_BINS) ## Offline kind node image KIND_NODE_IMAGE=svclb/kind-node:v1.34.4 (debootstrap + kind base files + the binaries); cached
	@set -e; base=$$($(GO) mod download -json sigs.k8s.io/kind | sed -n 's/.*"Dir": "\(.*\)",/\1/p')/images/base/files; \
	BIN_DIR=$(KC_BIN) WORK=$(KIND_WORK) IMAGE=$(KIND_NODE_IMAGE) KIND_BASE=$$base K8S_VERSION=$(K8S_VERSION) \
	ETCD_TAG=$(KC_ETCD_TAG) COREDNS_TAG=$(COREDNS_VERSION) PAUSE_TAGS="$(KC_PAUSE_TAGS)" \
	FLANNEL_VERSION=$(FLANNEL_VERSION) DEBIAN_MIRROR=$(DEBIAN_MIRROR) bash $(KC_DIR)/nodeimage/build.sh

KC_CLUSTER_ENV = KIND=$(KC_KIND) CLUSTER=$(KIND_CLUSTER) CONFIG=$(KIND_CONFIG) KUBECONFIG_OUT=$(KIND_KUBECONFIG) STATE=$(KIND_STATE) \
	KIND_NODE_MODE=$(KIND_NODE_MODE) NODE_IMAGE_ONLINE=$(KIND_NODE_IMAGE_ONLINE) NODE_IMAGE_OFFLINE=$(KIND_NODE_IMAGE)

.PHONY: cluster
cluster: $(KC_KIND) ## Create or reuse kind cluster svclb (kubeconfig _output/kubeconfig); KIND_NODE_MODE=online|offline forces a path, default: online unless the pull fails (not when it is slow)
	@$(KC_CLUSTER_ENV) BUILD_NODE_IMAGE='$(MAKE) --no-print-directory node-image' bash $(KC_DIR)/cluster.sh up

.PHONY: cluster-down
cluster-down: $(KC_KIND) ## Delete kind cluster svclb, its kubeconfig and the unused docker network
	@$(KC_CLUSTER_ENV) bash $(KC_DIR)/cluster.sh down

.PHONY: images
images: $(KC_KIND) ## Build every cmd/svclb-<x> into FROM-scratch image svclb/<x>:dev and kind-load them into svclb when it runs
	@KIND=$(KC_KIND) CLUSTER=$(KIND_CLUSTER) OUT=$(OUT)/images GO="$(GO)" bash $(KC_DIR)/images.sh
