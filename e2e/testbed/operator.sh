#!/usr/bin/env bash
# The operator as a local process against the bed, the way the chart runs it in a cluster
# (`kafka-observer-operator run`, configured through the same environment variables the chart
# sets), with the bed's admin kubeconfig. Installs the CRD the binary prints (`crd`) and waits
# for it to be Established before starting.
#
# Usage: operator.sh up | down | restart | status | kill
#   up       install/refresh the CRD, start the operator unless running, wait for /readyz
#   crd      install/refresh the CRD only (what the apiserver-validation tests need)
#   down     SIGTERM (graceful: the operator releases its Lease), SIGKILL after 20s
#   kill     SIGKILL (a crash, for drills and restart tests)
#   restart  down + up
#   status   pid, /readyz, metrics address
#
# Environment: KOO_OPERATOR_CREDENTIALS (admin: the bed's admin kubeconfig; chart: a token of the
# Helm chart's ServiceAccount kafka-observer-system/kafka-observer-operator, so the operator has
# exactly the chart's RBAC; install it first with `e2e/testbed/operator-chart.sh rbac`),
# KOO_OPERATOR_BIN (default $CARGO_TARGET_DIR/release/kafka-observer-operator),
# KOO_OPERATOR_METRICS (default 127.0.0.1:8480), KOO_OPERATOR_ARGS (extra arguments after
# `run`), RUST_LOG (default info), LOG_FORMAT (default text).
# State: pid .testbed/pids/operator.pid, log .testbed/logs/operator.log, metrics address in
# .testbed/operator/metrics-addr (read by tests and the bench).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

bin="${KOO_OPERATOR_BIN:-$CARGO_TARGET_DIR/release/kafka-observer-operator}"
metrics="${KOO_OPERATOR_METRICS:-127.0.0.1:8480}"
pidfile="$tb/pids/operator.pid"
logfile="$tb/logs/operator.log"
lease_ns="${KOO_OPERATOR_NAMESPACE:-kafka-observer-system}"
start_timeout="${KOO_OPERATOR_TIMEOUT:-60}"

# The operator binary: `pid_of operator` and `alive operator` (e2e/lib.sh) read its pid file,
# $tb/pids/operator.pid, and require a live process still running that binary.
exe_of() { echo "$bin"; }

readyz() { curl -sf -m 2 -o /dev/null "http://$metrics/readyz"; }

install_crd() {
  [[ -x "$bin" ]] || die "no operator binary at $bin: run 'make build' (cargo build --release --bins)"
  [[ -f "$tb/kubeconfig" ]] || die "no test bed at $tb: run 'make testbed-up'"
  # The binary's own CRD, so the bed always runs the schema the operator was built with.
  "$bin" crd | kubectl apply --server-side --force-conflicts --field-manager=koo-testbed -f - >/dev/null
  wait_crd observersets.kafkaobserver.io
  kubectl get namespace "$lease_ns" >/dev/null 2>&1 || kubectl create namespace "$lease_ns" >/dev/null
  log "CRD observersets.kafkaobserver.io Established"
}

# The kubeconfig the operator runs with (KOO_OPERATOR_CREDENTIALS).
operator_kubeconfig() {
  case "${KOO_OPERATOR_CREDENTIALS:-admin}" in
    admin) echo "$tb/kubeconfig" ;;
    chart)
      local sa=kafka-observer-operator token server ca file="$tb/operator/kubeconfig"
      kubectl -n "$lease_ns" get serviceaccount "$sa" >/dev/null 2>&1 ||
        die "no ServiceAccount $lease_ns/$sa: run 'e2e/testbed/operator-chart.sh rbac' first"
      # Each checked: this runs in up's $(...), where set -e does not apply, and an empty field
      # would make a kubeconfig that fails only later, in the operator.
      token="$(kubectl -n "$lease_ns" create token "$sa" --duration=24h)" ||
        die "cannot create a token for ServiceAccount $lease_ns/$sa"
      server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')" ||
        die "cannot read the apiserver address from $tb/kubeconfig"
      ca="$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')" ||
        die "cannot read the CA from $tb/kubeconfig"
      umask 077
      cat > "$file" <<EOF || die "cannot write $file"
apiVersion: v1
kind: Config
clusters: [{name: koo-testbed, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: $sa, user: {token: "$token"}}]
contexts: [{name: $sa, context: {cluster: koo-testbed, user: $sa}}]
current-context: $sa
EOF
      echo "$file" ;;
    *) die "KOO_OPERATOR_CREDENTIALS must be admin or chart" ;;
  esac
}

up() {
  install_crd
  # shellcheck disable=SC2312 # message text only
  if alive operator; then log "already running (pid $(pid_of operator))"; return; fi
  # An operator this script does not know (its pidfile lost or overwritten) would keep running
  # beside the new one and make every later `down` a no-op: refuse, naming it.
  if readyz; then
    # shellcheck disable=SC2312 # message text only (the pid, when ss shows it)
    die "another process already serves $metrics: $(ss -ltnpH "sport = :${metrics##*:}" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1); stop it first"
  fi
  mkdir -p "$tb/pids" "$tb/logs" "$tb/operator"
  echo "$metrics" > "$tb/operator/metrics-addr"
  local kubeconfig
  kubeconfig="$(operator_kubeconfig)" || exit 1
  # shellcheck disable=SC2312 # a marker line in the log; its time is only for the reader
  printf '\n==== %s operator start\n' "$(date -u +%FT%TZ)" >> "$logfile"
  # A stable identity: a restarted process holds the same Lease again at once instead of waiting
  # for the previous holder's lease to expire.
  # Descriptors 3-9 closed: the daemon must not keep what its starter held open (a caller's
  # `flock` on a lock file would stay locked for the operator's whole life).
  KUBECONFIG="$kubeconfig" \
  RUST_LOG="${RUST_LOG:-info}" LOG_FORMAT="${LOG_FORMAT:-text}" \
  METRICS_LISTEN="$metrics" LEADER_ELECT=true LEASE_NAME=kafka-observer-operator \
  POD_NAMESPACE="$lease_ns" POD_NAME="testbed-operator" \
    setsid "$bin" run ${KOO_OPERATOR_ARGS:-} >> "$logfile" 2>&1 < /dev/null \
      3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo $! > "$pidfile"
  # Until setsid has exec'd the binary, `alive` would call the process dead.
  for _ in $(seq 50); do alive operator && break; sleep 0.1; done
  log "started (pid $!, credentials ${KOO_OPERATOR_CREDENTIALS:-admin}), log $logfile, metrics http://$metrics/metrics"
  local deadline=$((SECONDS + start_timeout))
  until readyz; do
    if ! alive operator; then tail -n 30 "$logfile" >&2; rm -f "$pidfile"; die "exited during start-up; see $logfile"; fi
    if ((SECONDS > deadline)); then tail -n 30 "$logfile" >&2; die "not ready after ${start_timeout}s; see $logfile"; fi
    sleep 0.5
  done
  log "ready"
}

stop() {
  if ! alive operator; then log "not running"; rm -f "$pidfile"; return; fi
  stop_pid "$pidfile" "$bin" operator 20 "$1"
}

status() {
  local pid rss
  # The pid read once (alive operator is pid_of operator): one that exits meanwhile shows RSS ?.
  if pid="$(pid_of operator)"; then
    rss=$(awk '/^VmRSS/ {print $2 " " $3}' "/proc/$pid/status" 2>/dev/null) || rss="?"
    # shellcheck disable=SC2312 # readyz is the probe shown: its failure is the answer "no"
    printf 'operator: running, pid %s, RSS %s, metrics http://%s/metrics, ready: %s\n' \
      "$pid" "$rss" "$metrics" "$(readyz && echo yes || echo no)"
  else
    echo "operator: not running"
  fi
}

case "${1:-}" in
  up) up ;;
  crd) install_crd ;;
  down) stop TERM ;;
  kill) stop KILL ;;
  restart) stop TERM; up ;;
  status) status ;;
  *) echo "usage: $0 up|crd|down|restart|status|kill" >&2; exit 2 ;;
esac
