#!/usr/bin/env bash
# The body of `make soak` (e2e/soak/soak.mk has the variables): reuse or create
# the kind cluster and load this tree's images (kindconfig's targets), build
# the soak's test binary, run it. The soak deploys the guard and the node
# DaemonSet from this tree itself and leaves the cluster as it found it.
set -uo pipefail
: "${REPO:?}" "${GO:?}" "${MAKE:?}" "${SOAK_ARTIFACTS:?}" "${KIND:?}" "${CLUSTER:?}" "${KUBECONFIG_FILE:?}" "${PROXY:?}"
cd "$REPO" || exit
# shellcheck source=e2e/internal/kit/kit.sh
. "$REPO/e2e/internal/kit/kit.sh"
kit_init soak "$SOAK_ARTIFACTS"
rm -f "$SOAK_ARTIFACTS"/{report.md,report.html,soak.json,soak.log}

kit_proxy
if [ "$PROXY" = envoy ] && ! kit_envoy_image 60; then
  step "PROXY=envoy but $ENVOY_IMAGE cannot be pulled"
  exit 1
fi

step "cluster: make cluster"
"${make_cmd[@]}" cluster || { step "make cluster failed"; exit 1; }
step "images: make images"
"${make_cmd[@]}" images || { step "make images failed"; exit 1; }
if [ "$PROXY" = envoy ]; then
  "$KIND" load docker-image --name "$CLUSTER" "$ENVOY_IMAGE" || { step "kind load $ENVOY_IMAGE failed"; exit 1; }
fi
step "build: go test -c ./e2e/soak/"
"${go_cmd[@]}" test -c -o "$REPO/_output/soak.test" ./e2e/soak/ || { step "the soak does not compile"; exit 1; }
# The test binary's own bound: the load's duration plus 25 minutes for the
# setup, the faults that outlast it and the collection (SOAK_TEST_TIMEOUT
# overrides it). A fixed bound would end a long soak mid-run.
if [ -z "${SOAK_TEST_TIMEOUT:-}" ]; then
  minutes=$(awk -v d="$SOAK_DURATION" 'BEGIN {
    t = 0
    while (match(d, /^[0-9]+(\.[0-9]+)?[hms]/)) {
      n = substr(d, 1, RLENGTH - 1); u = substr(d, RLENGTH, 1)
      t += (u == "h") ? n * 3600 : (u == "m") ? n * 60 : n
      d = substr(d, RLENGTH + 1)
    }
    if (d != "" || t == 0) exit 1
    print int(t / 60) + 25
  }') || { echo "soak: SOAK_DURATION='$SOAK_DURATION' is not a duration such as 4m or 1h30m" >&2; exit 2; }
  SOAK_TEST_TIMEOUT="${minutes}m"
fi
step "run: SOAK_DURATION=$SOAK_DURATION SOAK_FAULTS=$SOAK_FAULTS PROXY=$PROXY node access ${NODE_ACCESS:-chosen} (test timeout $SOAK_TEST_TIMEOUT)"
(
  cd "$REPO/e2e/soak" &&
    SVCLB_SOAK=1 SVCLB_KUBECONFIG="$KUBECONFIG_FILE" SVCLB_CLUSTER="$CLUSTER" SVCLB_PROXY="$PROXY" SVCLB_ENVOY_IMAGE="${ENVOY_IMAGE:-}" \
      SVCLB_NODE_ACCESS="${NODE_ACCESS:-}" \
      SOAK_ARTIFACTS="$SOAK_ARTIFACTS" SOAK_START="$T0" \
      "$REPO/_output/soak.test" -test.run '^TestSoak$' -test.count=1 -test.timeout "$SOAK_TEST_TIMEOUT" -test.v
) 2>&1 | tee "$SOAK_ARTIFACTS/soak.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  step "FAILED (exit $rc); report in $SOAK_ARTIFACTS"
  exit 1
fi
step "PASSED; report in $SOAK_ARTIFACTS"
