# shellcheck shell=bash
# kit.sh: what the suites' run.sh scripts share, sourced by them (e2e/run.sh,
# e2e/soak/run.sh, e2e/perf/run.sh, e2e/conformance/run.sh): the progress lines
# and the node proxy's choice. The Go side is package kit beside it.
# The variables it sets (make_cmd, go_cmd, PROXY_CHOICE) are the sourcing script's:
# shellcheck disable=SC2034

# kit_init SUITE ARTIFACTS: T0 (now, in Unix seconds: the suite is passed it so
# that its lines count from here), make_cmd and go_cmd (MAKE and GO may carry
# flags: "make --no-print-directory"), and the artifacts directory with a fresh
# progress.log, which step appends to as the suite's own progress lines do.
kit_init() {
  KIT_SUITE=$1
  KIT_LOG=$2/progress.log
  T0=$(date +%s)
  read -ra make_cmd <<<"$MAKE"
  read -ra go_cmd <<<"$GO"
  mkdir -p "$2"
  rm -f "$KIT_LOG"
}

# step TEXT...: one progress line, "[SUITE <seconds since T0>s] TEXT", on stdout
# and in progress.log.
step() {
  local line
  line=$(printf '[%s %5ss] %s' "$KIT_SUITE" "$(($(date +%s) - T0))" "$*")
  printf '%s\n' "$line"
  printf '%s\n' "$line" >>"$KIT_LOG" 2>/dev/null || true
}

# kit_envoy_image SECONDS: ENVOY_IMAGE is in the local Docker, or is pulled
# within SECONDS.
kit_envoy_image() {
  docker image inspect "$ENVOY_IMAGE" >/dev/null 2>&1 || timeout "$1" docker pull -q "$ENVOY_IMAGE" >/dev/null 2>&1
}

# kit_proxy: the node proxy. PROXY=envoy or builtin is taken as given; empty,
# Envoy where ENVOY_IMAGE can be had (CI), else the built-in one. PROXY_CHOICE
# says why, for the report. Any other PROXY exits 2.
kit_proxy() {
  case "${PROXY:-}" in
  envoy | builtin) PROXY_CHOICE="PROXY=$PROXY" ;;
  "")
    if kit_envoy_image 20; then
      PROXY=envoy PROXY_CHOICE="default: $ENVOY_IMAGE available"
    else
      PROXY=builtin PROXY_CHOICE="default: $ENVOY_IMAGE cannot be pulled"
    fi
    ;;
  *)
    echo "$KIT_SUITE: PROXY must be envoy, builtin or empty, not '$PROXY'" >&2
    exit 2
    ;;
  esac
}
