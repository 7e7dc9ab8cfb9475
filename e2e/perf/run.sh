#!/usr/bin/env bash
# The body of `make perf` (e2e/perf/perf.mk has the variables): reuse the kind
# cluster (make cluster never deletes it), load this tree's images and the
# perf client's, compile the suite and run it. The suite deploys the guard and
# the node DaemonSet from this tree, measures, cleans up and renders the
# report into $ARTIFACTS.
set -uo pipefail
: "${REPO:?}" "${OUT:?}" "${GO:?}" "${MAKE:?}" "${ARTIFACTS:?}" "${KIND:?}" "${CLUSTER:?}" "${KUBECONFIG_FILE:?}" "${CLIENT_IMAGE:?}"
cd "$REPO" || exit
# shellcheck source=e2e/internal/kit/kit.sh
. "$REPO/e2e/internal/kit/kit.sh"
kit_init perf "$ARTIFACTS"
fail() { step "FAILED: $*"; exit 1; }

step "machine: $(nproc) cores, $(uptime)"
"${make_cmd[@]}" cluster || fail "make cluster"
"${make_cmd[@]}" images || fail "make images"

# The client image: perf-client (svclb-echo's client plus dial-every and load), FROM
# scratch like images.sh builds every cmd/svclb-*.
ctx=$OUT/images/perf-client
mkdir -p "$ctx"
CGO_ENABLED=0 "${go_cmd[@]}" build -trimpath -ldflags '-s -w' -o "$ctx/perf-client" ./e2e/perf/cmd/perf-client || fail "perf-client does not build"
printf 'FROM scratch\nCOPY perf-client /perf-client\nENTRYPOINT ["/perf-client"]\n' >"$ctx/Dockerfile"
docker build -q -t "$CLIENT_IMAGE" "$ctx" >/dev/null || fail "docker build $CLIENT_IMAGE"
"$KIND" load docker-image --name "$CLUSTER" "$CLIENT_IMAGE" || fail "kind load $CLIENT_IMAGE"
step "built and loaded $CLIENT_IMAGE"

"${go_cmd[@]}" test -c -o "$OUT/perf.test" ./e2e/perf/ || fail "the perf suite does not compile"
step "suite: -run '${RUN:-.}', sizes ${SIZES:-}, node access ${NODE_ACCESS:-chosen}, $(uptime)"
(
  cd "$REPO/e2e/perf" &&
    SVCLB_PERF=1 SVCLB_PERF_START="$T0" SVCLB_KUBECONFIG="$KUBECONFIG_FILE" SVCLB_CLUSTER="$CLUSTER" SVCLB_PERF_ARTIFACTS="$ARTIFACTS" \
      SVCLB_PROXY="${PROXY:-builtin}" SVCLB_PERF_CLIENT_IMAGE="$CLIENT_IMAGE" SVCLB_PERF_SIZES="${SIZES:-}" \
      SVCLB_PERF_CHANGES="${CHANGES:-}" SVCLB_PERF_SCALE_CHANGES="${SCALE_CHANGES:-}" SVCLB_PERF_TRIALS="${TRIALS:-}" SVCLB_PERF_CREATE_WITHIN="${CREATE_WITHIN:-}" SVCLB_PERF_CREATE_RATE="${CREATE_RATE:-}" SVCLB_PERF_RESTARTS="${RESTARTS:-1}" \
      SVCLB_PERF_DATA="${DATA:-0}" SVCLB_PERF_DATA_CONNS="${DATA_CONNS:-}" SVCLB_PERF_DATA_RATE="${DATA_RATE:-}" \
      SVCLB_NODE_ACCESS="${NODE_ACCESS:-}" \
      "$OUT/perf.test" -test.run "${RUN:-.}" -test.count=1 -test.timeout "${TIMEOUT:-60m}" -test.v
) 2>&1 | tee "$ARTIFACTS/perf-$(date +%Y%m%d-%H%M%S).log"
rc=${PIPESTATUS[0]}
step "suite exit $rc; $(uptime)"
[ -f "$ARTIFACTS/report.md" ] && cat "$ARTIFACTS/report.md"
exit "$rc"
