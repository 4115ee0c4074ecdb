#!/usr/bin/env bash
# examples/kafka-two-observers/ on the bed's real node, in a namespace of its own (kafka-two,
# beside the bed's cluster in kafka), applied as the example's README says, then checked:
#   1. 8 Kafka pods Ready, each JVM's start-up proof ("observer patch active"), the ObserverSet
#      Ready, both observer lists "4,5"
#   2. a topic 1:2:4:5 (two primaries, both observers), min ISR 2: its ISR is 1,2
#   3. spec.promotion.promoted [4]: 4 joins the ISR and 5 does not (it stays an observer)
#   4. promoted []: 4 leaves the ISR again (Kafka's ISR shrink after replica.lag.time.max.ms)
# and removed afterwards, failed or not (KEEP=1 keeps it). Needs the bed up and an operator
# running (the chart's: e2e/testbed/operator-chart.sh up). Prints one line:
#   EXAMPLE two-observers PASS <s>s   or   EXAMPLE two-observers FAIL <reason>
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_tag="two-observers" log_time="%T"
ns="${KOO_TWO_NAMESPACE:-kafka-two}"
example="$root/examples/kafka-two-observers"
[[ -f "$tb/kubeconfig" ]] || die "no test bed: run make testbed-up"
t0=$SECONDS

cleanup() {
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
result() {
  local rc=$?
  cleanup
  if [[ $rc -eq 0 ]]; then echo "EXAMPLE two-observers PASS $((SECONDS - t0))s"
  else echo "EXAMPLE two-observers FAIL ${reason:-exit $rc}"; fi
  exit "$rc"
}
trap result EXIT
reason=""
# lib.sh's die (and so its wait_for) also keeps the reason for the closing line.
die() { reason="$*"; log "FAIL: $*"; exit 1; }

# ---- apply, as examples/kafka-two-observers/README.md says --------------------------------------
kubectl create namespace "$ns" >/dev/null
KUBECTL="$tb/bin/kubectl --kubeconfig $tb/kubeconfig" KOO_BROKER_COUNT=5 \
  bash "$root/e2e/testbed/manifests/local-pvs.sh" "$ns" "$node_name" "$tb/node/local-pvs" >/dev/null
sed "s/\.kafka-two\.svc:/.$ns.svc:/" "$example/observerset.yaml" | kubectl -n "$ns" apply -f - >/dev/null
kubectl -n "$ns" apply -k "$example" >/dev/null
log "applied in $ns; waiting for 3 controllers and 5 brokers"

ready_pods() { kubectl -n "$ns" get pods -l app.kubernetes.io/name=kafka -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true; }
eight_ready() { [[ "$(ready_pods)" -eq 8 ]]; }
wait_for 300 "8 Kafka pods Ready in $ns" eight_ready
# grep to the end, not -q: an early exit makes kubectl die of SIGPIPE, and pipefail fails the check.
patched() { kubectl -n "$ns" logs "$pod" -c kafka 2>/dev/null | grep 'observer patch active' >/dev/null; }
for pod in kafka-controller-{0..2} kafka-broker-{0..4}; do
  wait_for 60 "$pod: 'observer patch active' in its log" patched
done
obs_phase() { kubectl -n "$ns" get obs kafka -o jsonpath='{.status.phase}'; }
obs_ready() { [[ "$(obs_phase)" == Ready ]]; }
wait_for 120 "ObserverSet $ns/kafka Ready" obs_ready
list() { kubectl -n "$ns" get configmap "kafka-observers-$1" -o jsonpath='{.data.observer\.ids}' | grep -v '^[[:space:]]*#' | grep -Eo '[0-9]+' | paste -sd, -; }
[[ "$(list controller)" == 4,5 && "$(list broker)" == 4,5 ]] ||
  die "observer lists: controllers '$(list controller)', brokers '$(list broker)', expected 4,5"
log "8 pods Ready with the patch active, ObserverSet Ready, both lists 4,5"

# ---- a topic of two primaries and both observers ------------------------------------------------
bootstrap="$(kubectl -n "$ns" get svc kafka-bootstrap -o jsonpath='{.spec.clusterIP}'):9092"
topic="two-observers-$(date +%s)"
"$tb/bin/kafka-topics" --bootstrap-server "$bootstrap" --create --topic "$topic" \
  --replica-assignment 1:2:4:5 --config min.insync.replicas=2 >/dev/null || die "cannot create topic $topic"
isr() { "$tb/bin/kafka-topics" --bootstrap-server "$bootstrap" --describe --topic "$topic" 2>/dev/null |
  sed -n 's/.*Isr: \([0-9,]*\).*/\1/p' | head -1; }
isr_is() { [[ "$(isr)" == "$1" ]]; }
wait_for 60 "ISR 1,2 on $topic" isr_is 1,2
log "$topic: replicas 1,2,4,5, ISR $(isr)"

# ---- promote 4, not 5 ---------------------------------------------------------------------------
kubectl -n "$ns" patch obs kafka --type merge -p '{"spec":{"promotion":{"promoted":[4]}}}' >/dev/null
t=$SECONDS
isr_has_4() { [[ ",$(isr)," == *",4,"* ]]; }
wait_for 60 "4 in the ISR after its promotion" isr_has_4
log "promoted 4: ISR $(isr) after $((SECONDS - t)) s; lists: controllers $(list controller), brokers $(list broker)"
[[ "$(list controller)" == 5 && "$(list broker)" == 5 ]] || die "after promoting 4 the lists should be 5: $(list controller) / $(list broker)"
sleep 5
[[ ",$(isr)," != *",5,"* ]] || die "5 joined the ISR although it is still an observer: $(isr)"

# ---- demote 4 again -----------------------------------------------------------------------------
kubectl -n "$ns" patch obs kafka --type merge -p '{"spec":{"promotion":{"promoted":[]}}}' >/dev/null
t=$SECONDS
wait_for 90 "4 out of the ISR after its demotion" isr_is 1,2
log "demoted 4: ISR $(isr) after $((SECONDS - t)) s; lists $(list controller) / $(list broker)"
