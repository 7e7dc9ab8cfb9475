#!/usr/bin/env bash
# The body of `make e2e-peer` (e2e/conformance/conformance.mk has the
# variables): the cluster and the tree's images (kindconfig's targets, as
# e2e/run.sh), the agnhost image loaded into the nodes, then peer's runner
# (e2e/conformance/cmd/conformance): enrollment, the phases, the cluster
# restored, the report in $ARTIFACTS.
set -uo pipefail
: "${REPO:?}" "${GO:?}" "${MAKE:?}" "${ARTIFACTS:?}" "${KIND:?}" "${CLUSTER:?}" "${KUBECONFIG_FILE:?}"
: "${E2E_TEST:?}" "${KUBECTL:?}" "${AGNHOST_IMAGE:?}" "${ENVOY_IMAGE:?}"
cd "$REPO" || exit
# shellcheck source=e2e/internal/kit/kit.sh
. "$REPO/e2e/internal/kit/kit.sh"
kit_init e2e-peer "$ARTIFACTS"

kit_proxy
step "node proxy: $PROXY ($PROXY_CHOICE); phases: $PHASES; KEEP_CLUSTER=${KEEP_CLUSTER:-0}"

# cluster.sh writes whether it created the cluster: then this run deletes it
# at the end, unless KEEP_CLUSTER=1.
state=$(mktemp)
trap 'rm -f "$state"' EXIT
step "make cluster"
KIND_STATE="$state" "${make_cmd[@]}" cluster KIND_STATE="$state" || { step "FAILED: make cluster"; exit 1; }
created=0
grep -qx 'cluster=created' "$state" && created=1
cluster_down() {
  if [ "$created" = 1 ] && [ "${KEEP_CLUSTER:-}" != 1 ]; then "${make_cmd[@]}" cluster-down || true; fi
}

step "make images (the tree's agent, proxy, guard, svclb-cni)"
"${make_cmd[@]}" images || { cluster_down; step "FAILED: make images"; exit 1; }
if [ "${AGNHOST_SOURCE:-build}" = build ]; then
  step "kind load $AGNHOST_IMAGE (built by make peer-image)"
  "$KIND" load docker-image --name "$CLUSTER" "$AGNHOST_IMAGE" >/dev/null || { cluster_down; step "FAILED: kind load $AGNHOST_IMAGE"; exit 1; }
else
  step "$AGNHOST_IMAGE: upstream's, pulled by the nodes (AGNHOST_SOURCE=$AGNHOST_SOURCE)"
fi
if [ "$PROXY" = envoy ]; then
  "$KIND" load docker-image --name "$CLUSTER" "$ENVOY_IMAGE" >/dev/null || { cluster_down; step "FAILED: kind load $ENVOY_IMAGE"; exit 1; }
fi

runner=$REPO/_output/bin/svclb-peer
step "go build ./e2e/conformance/cmd/conformance"
"${go_cmd[@]}" build -o "$runner" ./e2e/conformance/cmd/conformance || { cluster_down; step "FAILED: the runner does not build"; exit 1; }
args=(-kubeconfig "$KUBECONFIG_FILE" -cluster "$CLUSTER" -e2e-test "$E2E_TEST" -kubectl "$KUBECTL"
  -artifacts "$ARTIFACTS" -phases "$PHASES" -proxy "$PROXY" -envoy-image "$ENVOY_IMAGE")
[ -n "${SET:-}" ] && args+=(-set "$SET")
[ -n "${FOCUS:-}" ] && args+=(-focus "$FOCUS")
[ -n "${CUT:-}" ] && args+=(-cut "$CUT")
[ -n "${GUARD_CUT:-}" ] && args+=(-guard-cut "$GUARD_CUT")
[ -n "${PHASE_TIMEOUT:-}" ] && args+=(-phase-timeout "$PHASE_TIMEOUT")
[ -n "${SHARDS:-}" ] && args+=(-shards "$SHARDS")
# The report links docs/peer.md relative to where it lands.
args+=(-docs-link "$(realpath --relative-to="$ARTIFACTS" "$REPO/docs/peer.md" 2>/dev/null || echo "$REPO/docs/peer.md")")
SVCLB_PEER_START="$T0" "$runner" "${args[@]}"
rc=$?
cluster_down
if [ $rc -ne 0 ]; then step "FAILED (runner exit $rc); report in $ARTIFACTS"; exit 1; fi
step "PASSED; report in $ARTIFACTS"
