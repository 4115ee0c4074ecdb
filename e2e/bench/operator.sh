#!/usr/bin/env bash
# Operator benchmark against the real bed (make bench-operator):
#   - operator RSS (VmRSS from /proc/<pid>/status) idle, i.e. with only the ObserverSets the bed
#     already holds (their number is printed);
#   - reconcile latency with 200 ObserverSets: spec change -> both ConfigMaps written, p50/p99,
#     for one change on an idle operator and for changes sent back to back
#     (examples/bench_operator.rs), plus first-write time for all 200 and a 200-change burst;
#   - operator RSS at 200 ObserverSets (peak during the run and settled afterwards).
# What is measured honestly: the bench's ObserverSets select pods that do not exist, so a step
# has no pod to wait for and the numbers are the operator's pipeline (watch, validate,
# plan, two ConfigMap writes, status) on the real apiserver, not the kubelet's volume sync or the
# agents (the drill and tests/integration/operator_rollout.rs cover those on the bed's real pods).
# Environment: KOO_BENCH_SETS (200), KOO_BENCH_SAMPLES (100).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
tb="${KOO_TESTBED:-$tb}"
[[ -f "$tb/kubeconfig" ]] || { echo "bench-operator: no test bed at $tb: run make testbed-up"; exit 1; }
[[ -s "$tb/kafka/bootstrap" ]] || { echo "bench-operator: no Kafka bootstrap at $tb/kafka/bootstrap: run make testbed-up"; exit 1; }
sets="${KOO_BENCH_SETS:-200}"
samples="${KOO_BENCH_SAMPLES:-100}"
ns="koo-bench"
# shellcheck disable=SC2312 # no operator pid gives /proc//status: awk fails, and the caller reads that as no sample
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$(live_pid "$tb/pids/operator.pid")/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

cd "$root"
cargo build --release --quiet --example bench_operator
bash e2e/testbed/operator.sh up
if kubectl get namespace "$ns" >/dev/null 2>&1; then
  echo "bench-operator: deleting the namespace $ns left by a previous run"
  kubectl delete namespace "$ns" --wait=true --timeout=300s >/dev/null
fi
sleep 5
idle=$(rss_kib)
existing="$(kubectl get observersets -A --no-headers 2>/dev/null | wc -l)"
# shellcheck disable=SC2312 # message text only
echo "BENCH operator RSS idle (ObserverSets on the bed before the bench's: $existing): $(mib "$idle")"

peak_file="$(mktemp)"
( peak=0; while :; do r=$(rss_kib 2>/dev/null || echo 0); (( r > peak )) && { peak=$r; echo "$peak" > "$peak_file"; }; sleep 0.5; done ) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true; rm -f "$peak_file"' EXIT

# The sets name the bed's Kafka by its bootstrap Service's ClusterIP (the operator runs on the
# machine, which does not resolve cluster DNS names).
bootstrap="$(cat "$tb/kafka/bootstrap")"
"$CARGO_TARGET_DIR/release/examples/bench_operator" --kubeconfig "$tb/kubeconfig" --namespace "$ns" \
  --bootstrap "$bootstrap" --sets "$sets" --samples "$samples" --keep
sleep 10
settled=$(rss_kib)
# shellcheck disable=SC2312 # message text only
echo "BENCH operator RSS at $sets ObserverSets: settled $(mib "$settled"), peak during the run $(mib "$(cat "$peak_file")")"
kubectl delete namespace "$ns" --wait=false >/dev/null
echo "bench-operator: done (namespace $ns is being deleted)"
