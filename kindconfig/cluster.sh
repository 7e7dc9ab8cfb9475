#!/usr/bin/env bash
# Create (or reuse) and delete the suite's kind cluster. Called by kindconfig.mk:
#   cluster.sh up     reuse the running cluster, or pick the node image
#                     (online: published kindest/node; offline: svclb/kind-node,
#                     built by $BUILD_NODE_IMAGE) and create it
#   cluster.sh mode   print online or offline, and why on stderr (KIND_NODE_MODE forces it)
#   cluster.sh down   delete the cluster, its kubeconfig, $STATE and an unused kind network
# Environment: KIND (kind binary), CLUSTER, CONFIG, KUBECONFIG_OUT, KIND_NODE_MODE,
# NODE_IMAGE_ONLINE, NODE_IMAGE_OFFLINE, BUILD_NODE_IMAGE, PULL_TIMEOUT, STATE.
#
# This is the one implementation of the cluster's lifecycle: e2e/run.sh calls it
# through `make cluster` / `make cluster-down` and learns what `up` did from
# $STATE (when set), rewritten by every `up`, one key=value a line, each written
# as soon as it is known (so a failed `up` still says whether it created):
#   cluster=reused|created     created: this run made it (written before kind create)
#   mode=online|offline        the node image path (not written when reused)
#   node_image_seconds=12.3    building or checking the offline node image (0 online)
set -euo pipefail
: "${KIND:?}" "${CLUSTER:?}" "${CONFIG:?}" "${KUBECONFIG_OUT:?}"
: "${NODE_IMAGE_ONLINE:?}" "${NODE_IMAGE_OFFLINE:?}"
PULL_TIMEOUT=${PULL_TIMEOUT:-600}
T0=$(date +%s)
step() { printf '[cluster %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() { echo "cluster: $*" >&2; exit 1; }
# since START: seconds since START (a `date +%s.%N`), one decimal.
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
state() { if [ -n "${STATE:-}" ]; then printf '%s=%s\n' "$1" "$2" >>"$STATE"; fi; }

exists() { "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; }

# in_cluster runs kubectl on the control-plane node, so the host needs none.
in_cluster() { docker exec "$CLUSTER-control-plane" kubectl --kubeconfig=/etc/kubernetes/admin.conf "$@"; }

# choose sets MODE (online or offline) and WHY: KIND_NODE_MODE forces it; else online when
# the published node image is here or its pull succeeds, offline only when the pull fails with
# an error of its own (no registry, no such host, refused: docker's words go into WHY). A pull
# still running after PULL_TIMEOUT seconds is an error, not a reason to build the node image
# for most of an hour: say which path to take.
choose() {
  case "${KIND_NODE_MODE:-}" in
  online | offline) MODE=$KIND_NODE_MODE WHY="KIND_NODE_MODE=$KIND_NODE_MODE"; return ;;
  "" | auto) ;;
  *) die "KIND_NODE_MODE must be online, offline or empty (auto), not '$KIND_NODE_MODE'" ;;
  esac
  if docker image inspect "$NODE_IMAGE_ONLINE" >/dev/null 2>&1; then
    MODE=online WHY="$NODE_IMAGE_ONLINE is in the local Docker"
    return
  fi
  local out rc=0
  out=$(timeout "$PULL_TIMEOUT" docker pull -q "$NODE_IMAGE_ONLINE" 2>&1) || rc=$?
  case $rc in
  0) MODE=online WHY="$NODE_IMAGE_ONLINE pulled" ;;
  124) die "pulling $NODE_IMAGE_ONLINE did not finish within ${PULL_TIMEOUT}s (a slow pull, not a failed one): KIND_NODE_MODE=online to wait for it, PULL_TIMEOUT=<seconds> to wait longer, or KIND_NODE_MODE=offline to build the node image" ;;
  *) MODE=offline WHY="$NODE_IMAGE_ONLINE cannot be pulled: $(printf '%s' "$out" | tail -n 1)" ;;
  esac
}

# mode prints online or offline, and why on stderr.
mode() {
  choose
  echo "$MODE"
  echo "cluster: $MODE: $WHY" >&2
}

wait_ready() {
  step "waiting for every node Ready and CoreDNS available"
  in_cluster wait --for=condition=Ready nodes --all --timeout=180s >/dev/null
  in_cluster -n kube-system wait --for=condition=Available deployment/coredns --timeout=180s >/dev/null
}

summary() {
  in_cluster get nodes -L topology.kubernetes.io/zone
  step "ready: export KUBECONFIG=$KUBECONFIG_OUT   (kind cluster '$CLUSTER', $("$KIND" version | cut -d' ' -f1-2))"
}

up() {
  docker info >/dev/null 2>&1 || die "no Docker engine: start a Docker engine (README.md, \"What you need\")"
  mkdir -p "$(dirname "$KUBECONFIG_OUT")"
  if [ -n "${STATE:-}" ]; then mkdir -p "$(dirname "$STATE")" && : >"$STATE"; fi
  if exists; then
    state cluster reused
    step "reusing kind cluster '$CLUSTER' as it was created ($CONFIG applies to a new cluster only: make cluster-down first to change it)"
    local n
    for n in $("$KIND" get nodes --name "$CLUSTER"); do
      if [ "$(docker inspect -f '{{.State.Running}}' "$n")" != true ]; then
        step "starting stopped node $n"
        docker start "$n" >/dev/null
      fi
    done
    "$KIND" export kubeconfig --name "$CLUSTER" --kubeconfig "$KUBECONFIG_OUT" 2>/dev/null
    wait_ready
    summary
    return
  fi
  local image s
  step "choosing the node image (KIND_NODE_MODE=${KIND_NODE_MODE:-auto}; pulling $NODE_IMAGE_ONLINE, at most ${PULL_TIMEOUT}s)"
  choose
  state mode "$MODE"
  if [ "$MODE" = online ]; then
    image=$NODE_IMAGE_ONLINE
    step "ONLINE path ($WHY): $image (CNI kindnetd)"
    state node_image_seconds 0
  else
    image=$NODE_IMAGE_OFFLINE
    step "OFFLINE path ($WHY): $image (CNI flannel host-gw), building it if needed"
    s=$(date +%s.%N)
    if [ -n "${BUILD_NODE_IMAGE:-}" ]; then
      bash -c "$BUILD_NODE_IMAGE"
    fi
    docker image inspect "$image" >/dev/null 2>&1 || die "node image $image is missing (make node-image)"
    state node_image_seconds "$(since "$s")"
  fi
  state cluster created
  step "kind create cluster --name $CLUSTER --image $image --config $CONFIG"
  "$KIND" create cluster --name "$CLUSTER" --image "$image" --config "$CONFIG" \
    --kubeconfig "$KUBECONFIG_OUT" --wait 180s </dev/null
  wait_ready
  summary
}

down() {
  if exists; then
    step "kind delete cluster --name $CLUSTER"
    "$KIND" delete cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG_OUT"
  else
    step "no kind cluster '$CLUSTER'"
  fi
  rm -f "$KUBECONFIG_OUT" ${STATE:+"$STATE"}
  # kind shares the docker network "kind" between clusters: remove it only when unused.
  if docker network inspect kind >/dev/null 2>&1; then
    if [ "$(docker network inspect -f '{{len .Containers}}' kind)" = 0 ]; then
      docker network rm kind >/dev/null && step "removed the unused docker network 'kind'"
    else
      step "docker network 'kind' still has containers of other clusters: kept"
    fi
  fi
}

case "${1:-}" in
up) up ;;
down) down ;;
mode) mode ;;
*) die "usage: cluster.sh up|down|mode" ;;
esac
