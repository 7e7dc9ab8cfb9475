#!/usr/bin/env bash
# The body of `make e2e-svc` (see e2e/e2e.mk for the variables): the kind cluster and
# the images (kindconfig's targets: the cluster's lifecycle lives in
# kindconfig/cluster.sh alone), then the suite through svclb-e2e run (e2e/cmd/svclb-e2e:
# the suite binary, its signal path, docs/cli.md), then the report and its verdict
# table. Every phase prints its elapsed time and lands in $ARTIFACTS/phases.tsv for
# report.md.
#
# SIGINT or SIGTERM: during the cluster or images phases the run stops there and
# writes its report; during the suite svclb-e2e forwards it to the suite once, which
# stops its leg and writes its reports, then removes the guard and puts kube-proxy's
# cuts back on every node; then this script still deletes a cluster it created
# (unless KEEP_CLUSTER=1) and writes the report.
set -uo pipefail
: "${REPO:?}" "${GO:?}" "${MAKE:?}" "${ARTIFACTS:?}" "${KIND:?}" "${CLUSTER:?}" "${KUBECONFIG_FILE:?}" "${CLUSTER_STATE:?}"
cd "$REPO" || exit
# shellcheck source=e2e/internal/kit/kit.sh
. "$REPO/e2e/internal/kit/kit.sh"
kit_init e2e-svc "$ARTIFACTS"
# The suite's CLI (e2e/cmd/svclb-e2e), built first below.
CLI=$REPO/_output/svclb-e2e
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

# report [failure]: report.md and report.html, then the one-screen verdict table.
report() {
  local failure=${1:-}
  phase "total" "$(($(date +%s) - T0))"
  step "rendering reports into $ARTIFACTS"
  if [ -x "$CLI" ]; then
    "$CLI" report --repo "$REPO" --go "$GO" --artifacts "$ARTIFACTS" ${failure:+--failure "$failure"}
  else
    "${go_cmd[@]}" run ./e2e/cmd/report -dir "$ARTIFACTS" -summary ${failure:+-failure "$failure"}
  fi
}

# The signals: noted, and forwarded to svclb-e2e while it runs (it takes a second
# copy of a terminal's Ctrl-C, which reaches it too, as the same interrupt).
interrupted="" cli_pid=""
on_signal() {
  interrupted=$1
  step "SIG$1: stopping"
  if [ -n "$cli_pid" ]; then kill -s "$1" "$cli_pid" 2>/dev/null || true; fi
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
# stop_if_interrupted PHASE: a signal during PHASE ends the run there, with its report.
stop_if_interrupted() {
  if [ -n "$interrupted" ]; then fail_early "interrupted by SIG$interrupted during $1"; fi
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

# svclb-e2e first: it renders the report even when the cluster phase fails.
timed "cli build" "${go_cmd[@]}" build -o "$CLI" ./e2e/cmd/svclb-e2e || fail_early "cmd/svclb-e2e does not compile"
stop_if_interrupted "the cli build"
cluster_up || fail_early "make cluster failed"
stop_if_interrupted "the cluster phase"
timed "images" "${make_cmd[@]}" images || fail_early "make images failed"
stop_if_interrupted "the images phase"
if [ "$PROXY" = envoy ]; then
  timed "envoy image load" "$KIND" load docker-image --name "$CLUSTER" "$ENVOY_IMAGE" || fail_early "kind load $ENVOY_IMAGE failed"
  stop_if_interrupted "the envoy image load"
fi

# The suite: svclb-e2e run builds it (go test -c ./e2e, phase "suite build"), runs it
# with the environment it reads, and on a signal restores the cluster. LEGS is taken
# as make takes it (LEGS="reach affinity": either; else a Ginkgo label filter; empty:
# every leg and figure but the opt-in ones, label opt-in). This script renders the
# report (it may delete the cluster first); svclb-e2e leaves in $failure_file what the
# report must say about an interrupted run.
kind_version=$("$KIND" version 2>/dev/null | awk '{print $2}')
failure_file=$(mktemp)
cli_args=(run --repo "$REPO" --go "$GO" --kubeconfig "$KUBECONFIG_FILE" --cluster "$CLUSTER"
  --proxy "$PROXY" --proxy-choice "$PROXY_CHOICE" --node-access "${NODE_ACCESS:-}" --envoy-image "$ENVOY_IMAGE" --kind-version "${kind_version:-unknown}"
  --artifacts "$ARTIFACTS" --legs "${LEGS:-}" --timeout "${TIMEOUT:-45m}" --start "$T0"
  --report=false --failure-file "$failure_file")
[ "${KEEP_CLUSTER:-}" = 1 ] && cli_args+=(--keep)
step "svclb-e2e ${cli_args[*]}"
# In the background, so that the traps run (and forward) while it runs.
"$CLI" "${cli_args[@]}" &
cli_pid=$!
while :; do
  wait "$cli_pid"
  suite_rc=$?
  kill -0 "$cli_pid" 2>/dev/null || break
done
wait "$cli_pid" 2>/dev/null
rc=$?
[ "$rc" -ne 127 ] && suite_rc=$rc
cli_pid=""
failure=$(cat "$failure_file")
rm -f "$failure_file"

if [ "$suite_rc" -ne 0 ]; then cluster_down failed; else cluster_down; fi

report "$failure"
rc=$?
if [ -n "$interrupted" ]; then
  step "INTERRUPTED (SIG$interrupted): ${failure:-svclb-e2e exited $suite_rc}; artifacts in $ARTIFACTS"
  exit 130
fi
if [ "$suite_rc" -ne 0 ] || [ "$rc" -ne 0 ]; then
  step "FAILED (svclb-e2e exit $suite_rc, report verdict exit $rc); artifacts in $ARTIFACTS"
  exit 1
fi
step "PASSED; artifacts in $ARTIFACTS"
