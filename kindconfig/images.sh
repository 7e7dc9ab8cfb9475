#!/usr/bin/env bash
# Build every cmd/svclb-<x> that exists into a FROM-scratch image svclb/<x>:dev
# (but svclb-e2e: the suite's CLI runs on the host, never in the cluster)
# (static, CGO_ENABLED=0) and load them into the kind cluster when it runs.
# Called by `make images`. Environment: KIND, CLUSTER, OUT (build context root), GO.
set -euo pipefail
: "${KIND:?}" "${CLUSTER:?}" "${OUT:?}"
GO=${GO:-go}
T0=$(date +%s)
step() { printf '[images %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }

shopt -s nullglob
cmds=()
for d in cmd/svclb-*/; do
  d=${d%/}
  if compgen -G "$d/*.go" >/dev/null; then cmds+=("${d#cmd/}"); else step "skip $d: no Go files yet"; fi
done
if [ ${#cmds[@]} -eq 0 ]; then
  step "no cmd/svclb-* yet: nothing to build"
  exit 0
fi

built=() failed=()
for c in "${cmds[@]}"; do
  name=${c#svclb-}
  image=svclb/$name:dev
  ctx=$OUT/$name
  mkdir -p "$ctx"
  if ! CGO_ENABLED=0 "$GO" build -trimpath -ldflags '-s -w' -o "$ctx/$c" "./cmd/$c"; then
    step "FAILED $image: ./cmd/$c does not build (see above)"
    failed+=("$image")
    continue
  fi
  printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"]\n' "$c" "$c" "$c" >"$ctx/Dockerfile"
  if ! out=$(docker build -q -t "$image" "$ctx" 2>&1); then
    echo "$out" >&2
    step "FAILED $image: docker build"
    failed+=("$image")
    continue
  fi
  step "built $image"
  built+=("$image")
done

if ! "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  step "kind cluster '$CLUSTER' is not running: ${#built[@]} images built, not loaded (make cluster images)"
elif [ ${#built[@]} -gt 0 ]; then
  step "kind load docker-image --name $CLUSTER ${built[*]}"
  "$KIND" load docker-image --name "$CLUSTER" "${built[@]}"
  step "done: ${#built[@]} of ${#cmds[@]} images built and loaded"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "images: ${failed[*]} failed to build" >&2
  exit 1
fi
