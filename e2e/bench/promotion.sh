#!/usr/bin/env bash
# Promotion latency on the bed (make bench-promotion): examples/bench_promotion.rs against the
# example cluster in namespace kafka and its ObserverSet kafka/kafka (policy UnderMinIsr, automatic
# demotion), with the operator running (the bed's local operator, `operator.sh up`, unless the
# chart's pods lead). The ObserverSet is (re)applied from examples/kafka/observerset/ with the
# bootstrap Service's ClusterIP (the local operator does not resolve cluster DNS names).
# Each run stops the partition leader (a lost zone) and waits for the promotion, then starts it
# again, waits for the demotion (stabilization window 30 s) and for the cooldown (30 s) it
# started: about 1.5 minutes per run.
# Prints the split per run, the p50 of each step and the floor (what the file delivery and
# Kafka take). Environment: KOO_BENCH_RUNS (5); KOO_BENCH_ACK=Time with KOO_BENCH_SETTLE (15s)
# runs the set with `rollout.acknowledgement: Time` instead of Agent (what Strimzi's pods, which
# cannot run the agent, pay: examples/strimzi/README.md); the example set is re-applied as it is
# afterwards.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
tb="${KOO_TESTBED:-$tb}"
[[ -f "$tb/kubeconfig" ]] || { echo "bench-promotion: no test bed at $tb: run make testbed-up"; exit 1; }
cd "$root"
cargo build --release --quiet --example bench_promotion
bash e2e/testbed/operator.sh up
bootstrap="$(bash e2e/testbed/kafka.sh bootstrap)"
sed "s/kafka-bootstrap\.kafka\.svc:9092/$bootstrap/" examples/kafka/observerset/observerset.yaml |
  kubectl -n kafka apply -f - >/dev/null
if [[ "${KOO_BENCH_ACK:-Agent}" == Time ]]; then
  restore() {
    sed "s/kafka-bootstrap\.kafka\.svc:9092/$bootstrap/" examples/kafka/observerset/observerset.yaml |
      kubectl -n kafka apply -f - >/dev/null
  }
  trap restore EXIT
  kubectl -n kafka patch obs kafka --type merge \
    -p "{\"spec\":{\"rollout\":{\"acknowledgement\":\"Time\",\"settleTime\":\"${KOO_BENCH_SETTLE:-15s}\"}}}" >/dev/null
  echo "bench-promotion: rollout.acknowledgement Time, settleTime ${KOO_BENCH_SETTLE:-15s}"
elif [[ "${KOO_BENCH_ACK:-Agent}" != Agent ]]; then
  echo "bench-promotion: KOO_BENCH_ACK must be Agent or Time, not ${KOO_BENCH_ACK}"; exit 2
fi
kubectl -n kafka wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=180s >/dev/null
"$CARGO_TARGET_DIR/release/examples/bench_promotion" --kubeconfig "$tb/kubeconfig" \
  --bootstrap "$bootstrap" --kafka-sh "$root/e2e/testbed/kafka.sh" --runs "${KOO_BENCH_RUNS:-5}"
