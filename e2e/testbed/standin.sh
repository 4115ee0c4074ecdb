#!/usr/bin/env bash
# The kubelet stand-in (e2e/kubelet-standin) for the bed's Kafka pods: one local process.
#
#   standin.sh up       build if needed, write the pods file, start (or restart when its flags
#                       changed), wait for the Node, create the Pods, wait for their volumes
#   standin.sh down     stop the stand-in (it stops its sidecars), then any sidecar it left behind
#   standin.sh status   process, flags, Node
#
# Environment (recorded; a change restarts the stand-in at the next `up`):
#   KOO_STANDIN_SYNC_PERIOD  periodic pod sync, the kubelet's syncFrequency (60s)
#   KOO_STANDIN_JITTER       extra random delay as a fraction of the period (0.5 = up to +50 %)
#   KOO_AGENT_IMAGE          image of the observer-agent sidecar (kafka-observer-operator:dev)
#   KOO_AGENT_BIN            local binary standing for it ($CARGO_TARGET_DIR/release/kafka-observer-operator)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/e2e/versions.env"
tb="$root/.testbed"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$KOO_CACHE/target}"
bin="$CARGO_TARGET_DIR/release/kubelet-standin"
pidfile="$tb/pids/kubelet-standin.pid"
logfile="$tb/logs/kubelet-standin.log"
NODE_NAME="${KOO_STANDIN_NODE:-testbed-node}"
AGENT_IMAGE="${KOO_AGENT_IMAGE:-kafka-observer-operator:dev}"
AGENT_BIN="${KOO_AGENT_BIN:-$CARGO_TARGET_DIR/release/kafka-observer-operator}"
timeout_s="${KOO_STANDIN_TIMEOUT:-120}"

say() { echo "standin.sh: $*" >&2; }
log() { say "$@"; }
die() { say "error: $*"; exit 1; }
kubectl() { "$tb/bin/kubectl" "$@"; }

source "$here/process.sh"
# True when the process runs an older build than the binary on disk.
stale() { [[ "$(readlink "/proc/$1/exe" 2>/dev/null)" == *" (deleted)" ]]; }

standin_args() {
  printf '%s\n' --kubeconfig "$tb/kubeconfig" --pods-file "$tb/standin/pods.json" \
    --sync-period "${KOO_STANDIN_SYNC_PERIOD:-60s}" --jitter "${KOO_STANDIN_JITTER:-0.5}" \
    --node-name "$NODE_NAME" --node-ip 127.0.0.1 --image-bin "$AGENT_IMAGE=$AGENT_BIN"
}

build() {
  # The Makefile's `build` compiles the whole workspace; this covers a direct call.
  if [[ ! -x "$bin" ]] || [[ -n "$(find "$root/e2e/kubelet-standin" -newer "$bin" -type f -print -quit)" ]]; then
    say "building kubelet-standin (cargo build --release -p kubelet-standin)"
    (cd "$root" && cargo build --quiet --release -p kubelet-standin) || die "kubelet-standin does not build"
  fi
}

start() {
  local args pid
  mapfile -t args < <(standin_args)
  if pid="$(live_pid "$pidfile" "$bin")"; then
    if stale "$pid"; then
      say "kubelet-standin was rebuilt: restarting it"
    elif [[ "$(cat "$tb/standin/args" 2>/dev/null)" != "$(standin_args)" ]]; then
      say "kubelet-standin flags changed: restarting it"
    else
      say "kubelet-standin already running (pid $pid)"
      return
    fi
    stop
  fi
  standin_args > "$tb/standin/args"
  echo "==== $(date -u +%FT%TZ) standin.sh: starting ${args[*]}" >> "$logfile"
  # setsid: outlives this shell. The inner shell writes its pid, then execs the stand-in.
  # shellcheck disable=SC2016
  RUST_LOG="${RUST_LOG:-info}" setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "$bin" "${args[@]}" \
    >> "$logfile" 2>&1 < /dev/null &
  for _ in $(seq 50); do live_pid "$pidfile" "$bin" >/dev/null && break; sleep 0.1; done
  pid="$(live_pid "$pidfile" "$bin")" || { tail -n 20 "$logfile" >&2; die "kubelet-standin did not start: see $logfile"; }
  say "kubelet-standin started (pid $pid), log $logfile"
}

wait_for() { # wait_for DESCRIPTION COMMAND...
  local what="$1" deadline=$((SECONDS + timeout_s))
  shift
  until "$@" >/dev/null 2>&1; do
    live_pid "$pidfile" "$bin" >/dev/null || { tail -n 20 "$logfile" >&2; die "kubelet-standin exited before $what: see $logfile"; }
    ((SECONDS < deadline)) || { tail -n 20 "$logfile" >&2; die "no $what after ${timeout_s}s: see $logfile"; }
    sleep 0.5
  done
}

node_ready() {
  [[ "$(kubectl get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}
volumes_projected() {
  local pod
  # The Kafka pods of e2e/testbed/pods.sh (node table in e2e/testbed/kafka/lib.sh).
  for pod in kafka-controller-{0..2} kafka-broker-{0..3}; do
    [[ -e "$tb/pods/kafka/$pod/volumes/observer-ids/..data/observer.ids" ]] || return 1
  done
}

up() {
  [[ -f "$tb/kubeconfig" ]] || die "no $tb/kubeconfig: start the control plane first (control-plane.sh up)"
  mkdir -p "$tb"/{logs,pids,standin,pods}
  build
  bash "$here/pods.sh" json
  start
  wait_for "Ready node $NODE_NAME" node_ready
  bash "$here/pods.sh" apply
  wait_for "projected observer-ids volumes (are the kafka-observers-* ConfigMaps there?)" volumes_projected
  say "node $NODE_NAME Ready, 7 pods bound, observer-ids volumes projected under $tb/pods/kafka"
}

stop() { stop_pid "$pidfile" "$bin" kubelet-standin 10; }

down() {
  local f pid
  stop
  # Sidecars get SIGKILL when the stand-in dies (PR_SET_PDEATHSIG); this catches any left.
  for f in "$tb"/pids/kafka-controller-*-*.pid "$tb"/pids/kafka-broker-*-*.pid; do
    [[ -f "$f" ]] || continue
    if pid="$(live_pid "$f" "$AGENT_BIN")"; then kill -KILL "$pid" 2>/dev/null || true; say "sidecar pid $pid ($f) killed"; fi
    rm -f "$f"
  done
}

status() {
  local pid
  if pid="$(live_pid "$pidfile" "$bin")"; then
    printf '%-24s alive (pid %s): %s\n' kubelet-standin "$pid" "$(tr '\n' ' ' < "$tb/standin/args" | sed 's|--kubeconfig [^ ]* --pods-file [^ ]* ||')"
  else
    printf '%-24s dead\n' kubelet-standin
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
