# shellcheck shell=bash disable=SC2034,SC2154 # a library: its variables are for the example scripts; root, tb, node_names come from e2e/lib.sh, example and ns from the example script (below)
# What the example checks (e2e/example-*.sh) share: each applies one examples/ overlay in a
# namespace of its own on the bed, as the overlay's README says, checks it, and removes it
# afterwards, failed or not (KEEP=1 keeps it). Sourced after e2e/lib.sh, with these set first:
#   example   the name on the closing line: EXAMPLE <example> PASS <s>s | FAIL <reason>
#   ns        the namespace
# Needs the bed up and an operator running (the chart's: e2e/testbed/operator-chart.sh up).

[[ -f "$tb/kubeconfig" ]] || { echo "EXAMPLE $example FAIL no test bed: run make testbed-up"; exit 1; }
example_t0=$SECONDS
reason=""
# lib.sh's die (and so its wait_for) also keeps the reason for the closing line.
die() { reason="$*"; log "FAIL: $*"; exit 1; }

example_cleanup() {
  [[ -z "${KEEP:-}" ]] || { log "KEEP set: namespace $ns left running"; return 0; }
  kubectl -n "$ns" delete obs --all --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  kubectl -n "$ns" delete sts --all --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  kubectl -n "$ns" delete pvc --all --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  local pv
  for pv in $(kubectl get pv -o name 2>/dev/null | grep "/koo-local-$ns-" || true); do
    kubectl delete "$pv" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
    rm -rf "${tb:?}/node/local-pvs/${pv#*/}"
  done
  kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
}
example_result() {
  local rc=$?
  example_cleanup
  if [[ $rc -eq 0 ]]; then echo "EXAMPLE $example PASS $((SECONDS - example_t0))s"
  else echo "EXAMPLE $example FAIL ${reason:-exit $rc}"; fi
  exit "$rc"
}
trap example_result EXIT

# local_pvs: the namespace's data volumes (e2e/testbed/manifests/local-pvs.sh; KOO_BROKER_COUNT
# and KOO_CONTROLLER_COUNT from the caller's environment).
local_pvs() {
  KUBECTL="$tb/bin/kubectl --kubeconfig $tb/kubeconfig" \
    bash "$root/e2e/testbed/manifests/local-pvs.sh" "$ns" "$(IFS=,; echo "${node_names[*]}")" "$tb/node/local-pvs" >/dev/null
}

# pods_ready N: exactly N Kafka pods Ready in the namespace.
pods_ready() {
  local n
  n="$(kubectl -n "$ns" get pods -l app.kubernetes.io/name=kafka -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)"
  [[ "$n" -eq "$1" ]]
}
# patched POD: the pod's JVM logged the patch's start-up proof. grep to the end, not -q: an early
# exit makes kubectl die of SIGPIPE, and pipefail fails the check.
# shellcheck disable=SC2312 # kubectl logs failing is 'not patched yet': wait_for polls again
patched() { kubectl -n "$ns" logs "$1" -c kafka 2>/dev/null | grep 'observer patch active' >/dev/null; }
wait_patched() { local pod; for pod in "$@"; do wait_for 60 "$pod: 'observer patch active' in its log" patched "$pod"; done; }
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
obs_ready() { [[ "$(kubectl -n "$ns" get obs kafka -o jsonpath='{.status.phase}')" == Ready ]]; }
# list ROLE: the ids in ConfigMap kafka-observers-ROLE, comma-separated; non-zero only when the
# ConfigMap cannot be read (an empty list is a list: "").
list() {
  local raw
  raw="$(kubectl -n "$ns" get configmap "kafka-observers-$1" -o jsonpath='{.data.observer\.ids}')" || return 1
  { grep -v '^[[:space:]]*#' <<<"$raw" | grep -Eo '[0-9]+' || true; } | paste -sd, -
}
promote() { kubectl -n "$ns" patch obs kafka --type merge -p "{\"spec\":{\"promotion\":{\"promoted\":[$1]}}}" >/dev/null; }

# create_topic ASSIGNMENT: a fresh topic with that replica assignment and min ISR 2, named in
# $topic; $bootstrap is the namespace's kafka-bootstrap Service.
create_topic() {
  bootstrap="$(kubectl -n "$ns" get svc kafka-bootstrap -o jsonpath='{.spec.clusterIP}'):9092"
  topic="$example-$(date +%s)"
  "$tb/bin/kafka-topics" --bootstrap-server "$bootstrap" --create --topic "$topic" \
    --replica-assignment "$1" --config min.insync.replicas=2 >/dev/null || die "cannot create topic $topic"
}
# shellcheck disable=SC2312 # a topic that cannot be described has no ISR: the callers compare, which fails
isr() { "$tb/bin/kafka-topics" --bootstrap-server "$bootstrap" --describe --topic "$topic" 2>/dev/null |
  sed -n 's/.*Isr: \([0-9,]*\).*/\1/p' | head -1; }
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
isr_is() { [[ "$(isr)" == "$1" ]]; }
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
isr_has() { [[ ",$(isr)," == *",$1,"* ]]; }
