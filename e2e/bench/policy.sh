#!/usr/bin/env bash
# Promotion engine and Kafka watcher benchmark.
#  1. bench_policy: snapshot assembly and the engine's decision at 1k, 10k and 50k partitions
#     (no network).
#  2. bench_watcher: real scans against the test bed (bed as found, then +1k and +5k partitions)
#     and the latency from broker 2 leaving to the engine's detection and promotion decision.
#     Runs when KOO_TESTBED points at a running bed (default: ./.testbed if its Kafka bootstrap
#     exists); KOO_TESTBED=off skips it.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
cd "$root"
if [[ -z "${KOO_TESTBED:-}" && -f "$tb/kafka/bootstrap" ]]; then
  export KOO_TESTBED="$tb"
fi
echo "== policy engine and snapshot assembly (no network)"
cargo run --quiet --release --example bench_policy
echo "== Kafka watcher against the test bed"
if [[ "${KOO_TESTBED:-off}" == off ]]; then
  echo "skipped: no test bed (KOO_TESTBED unset or off; run make testbed-up)"
else
  cargo run --quiet --release --example bench_watcher
fi
