#!/usr/bin/env bash
# The body of `make e2e-svc` (see e2e/e2e.mk for the variables): cluster and
# images (kindconfig's targets: the cluster's lifecycle lives in
# kindconfig/cluster.sh alone), the Ginkgo suite, then the reports. Every phase
# prints its elapsed time and lands in $ARTIFACTS/phases.tsv for report.md.
set -uo pipefail
: "${REPO:?}" "${GO:?}" "${MAKE:?}" "${ARTIFACTS:?}" "${KIND:?}" "${CLUSTER:?}" "${KUBECONFIG_FILE:?}" "${CLUSTER_STATE:?}"
cd "$REPO" || exit
# shellcheck source=e2e/internal/kit/kit.sh
. "$REPO/e2e/internal/kit/kit.sh"
kit_init e2e-svc "$ARTIFACTS"
phase() { printf '%s\t%s\n' "$1" "$2" >>"$ARTIFACTS/phases.tsv"; }
# since START: seconds since START (a `date +%s.%N`), one decimal.
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
# timed NAME CMD...: run CMD, record its wall time as phase NAME.
timed() {
  local name=$1 s rc d
  shift
  s=$(date +%s.%N)
  step "$name: $*"
  "$@"
  rc=$?
  d=$(since "$s")
  phase "$name" "$d"
  if [ $rc -eq 0 ]; then step "$name: done in ${d}s"; else step "$name: FAILED (exit $rc) after ${d}s"; fi
  return $rc
}

report() {
  local failure=${1:-}
  phase "total" "$(($(date +%s) - T0))"
  step "rendering reports into $ARTIFACTS"
  "${go_cmd[@]}" run ./e2e/cmd/report -dir "$ARTIFACTS" ${failure:+-failure "$failure"} >/dev/null
  local rc=$?
  [ -f "$ARTIFACTS/report.md" ] && cat "$ARTIFACTS/report.md"
  return $rc
}

# created: 1 once cluster.sh says this run created the cluster; then this run
# deletes it at the end, unless KEEP_CLUSTER=1.
created=0
# cluster_down [failed]: delete the cluster this run created (kind logs first when
# something failed).
cluster_down() {
  if [ "$created" != 1 ] || [ "${KEEP_CLUSTER:-}" = 1 ]; then return 0; fi
  if [ -n "${1:-}" ]; then
    step "exporting kind logs to $ARTIFACTS/kind-logs"
    "$KIND" export logs --name "$CLUSTER" "$ARTIFACTS/kind-logs" >/dev/null 2>&1 || true
  fi
  timed "cluster delete" "${make_cmd[@]}" cluster-down || true
}

fail_early() {
  cluster_down failed
  report "$1"
  step "FAILED: $1"
  exit 1
}

# cluster_up: `make cluster` (kindconfig/cluster.sh up), then its state file
# ($CLUSTER_STATE) says whether it created the cluster and how long the node
# image took; the rest of make's wall time (kind CLI, image probe, create or
# restart, Ready) is the cluster phase.
cluster_up() {
  local s rc d how="" node=0 k v
  rm -f "$CLUSTER_STATE"
  s=$(date +%s.%N)
  step "cluster: make cluster"
  "${make_cmd[@]}" cluster
  rc=$?
  d=$(since "$s")
  if [ -f "$CLUSTER_STATE" ]; then
    while IFS='=' read -r k v; do
      case $k in
      cluster) how=$v ;;
      node_image_seconds) node=$v ;;
      esac
    done <"$CLUSTER_STATE"
  fi
  if [ "$how" = reused ]; then
    phase "node image (cluster reused)" 0
    phase "cluster (reused)" "$d"
  else
    [ "$how" = created ] && created=1
    phase "node image" "$node"
    phase "cluster create" "$(awk -v d="$d" -v n="$node" 'BEGIN { printf "%.1f", d - n }')"
  fi
  if [ $rc -eq 0 ]; then step "cluster: ${how:-?} in ${d}s (node image ${node}s)"; else step "cluster: FAILED (exit $rc) after ${d}s"; fi
  return $rc
}

# Only what an earlier run wrote: ARTIFACTS may be a directory the user owns.
rm -rf "$ARTIFACTS"/legs "$ARTIFACTS"/failures "$ARTIFACTS"/kind-logs
rm -f "$ARTIFACTS"/{report.md,report.html,ginkgo.json,junit.xml,phases.tsv,env.json,programming.json,cni-latency.json,failure.txt,e2e.log}

# The node proxy. Envoy where its image can be had (CI), else the built-in one.
kit_proxy
step "node proxy: $PROXY ($PROXY_CHOICE); legs: ${LEGS:-all but the opt-in figures}; KEEP_CLUSTER=${KEEP_CLUSTER:-0}"
if [ "$PROXY" = envoy ] && ! docker image inspect "$ENVOY_IMAGE" >/dev/null 2>&1; then
  timed "envoy image" docker pull -q "$ENVOY_IMAGE" || fail_early "PROXY=envoy but $ENVOY_IMAGE cannot be pulled"
fi

cluster_up || fail_early "make cluster failed"
timed "images" "${make_cmd[@]}" images || fail_early "make images failed"
if [ "$PROXY" = envoy ]; then
  timed "envoy image load" "$KIND" load docker-image --name "$CLUSTER" "$ENVOY_IMAGE" || fail_early "kind load $ENVOY_IMAGE failed"
fi

# LEGS is a Ginkgo label filter; a plain list of leg names (LEGS="reach affinity")
# means any of them: Ginkgo would read it as one label and run nothing. Without
# LEGS every leg and figure runs except the opt-in ones (label opt-in: the
# cni-latency figure starts 100 pods), which run when LEGS names them.
legs_filter=${LEGS:-'!opt-in'}
case "$legs_filter" in
*[\&\|\!\(\),/:]*) ;;
*)
  read -ra names <<<"$legs_filter"
  legs_filter=$(IFS=,; echo "${names[*]}")
  ;;
esac

# The suite: a go test binary (no ginkgo CLI needed; Ginkgo's flags are the same).
kind_version=$("$KIND" version 2>/dev/null | awk '{print $2}')
envoy_version=n/a
[ "$PROXY" = envoy ] && envoy_version=${ENVOY_IMAGE##*:}
# Compiled apart so its time is not counted as deploy time. CGO_ENABLED comes
# from the Makefile, the same as `make test`'s: the dependencies are cache hits.
timed "suite build" "${go_cmd[@]}" test -c -o "$REPO/_output/e2e.test" ./e2e/ || fail_early "the e2e suite does not compile"
# The suite itself: deploy (guard, node DaemonSet, clients), then the legs. It
# runs in e2e/ like go test would.
(
  cd "$REPO/e2e" &&
    SVCLB_E2E=1 SVCLB_KUBECONFIG="$KUBECONFIG_FILE" SVCLB_CLUSTER="$CLUSTER" \
      SVCLB_ARTIFACTS="$ARTIFACTS" SVCLB_PROXY="$PROXY" SVCLB_PROXY_CHOICE="$PROXY_CHOICE" SVCLB_ENVOY_IMAGE="$ENVOY_IMAGE" SVCLB_E2E_START="$T0" \
      SVCLB_KIND_VERSION="$kind_version" SVCLB_ENVOY_VERSION="$envoy_version" KEEP_CLUSTER="${KEEP_CLUSTER:-}" \
      "$REPO/_output/e2e.test" -test.run '^TestE2E$' -test.count=1 -test.timeout "${TIMEOUT:-45m}" -test.v \
      -ginkgo.v -ginkgo.label-filter="$legs_filter" \
      -ginkgo.junit-report="$ARTIFACTS/junit.xml" -ginkgo.json-report="$ARTIFACTS/ginkgo.json"
) 2>&1 | tee "$ARTIFACTS/e2e.log"
suite_rc=${PIPESTATUS[0]}

if [ "$suite_rc" -ne 0 ]; then cluster_down failed; else cluster_down; fi

failure=""
[ "$suite_rc" -ne 0 ] && [ ! -s "$ARTIFACTS/ginkgo.json" ] && failure="the suite exited $suite_rc before Ginkgo wrote a report (see e2e.log)"
report "$failure"
rc=$?
if [ "$suite_rc" -ne 0 ] || [ "$rc" -ne 0 ]; then
  step "FAILED (suite exit $suite_rc, report verdict exit $rc); artifacts in $ARTIFACTS"
  exit 1
fi
step "PASSED; artifacts in $ARTIFACTS"
