#!/usr/bin/env bash
# Everything that needs the real test bed: Rust integration tests, the Kafka failure suite and the
# operator drill. Expects the bed up (make test brings it up first).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export KOO_TESTBED="$root/.testbed"
[[ -f "$KOO_TESTBED/kubeconfig" ]] || { echo "test bed not up: run make testbed-up"; exit 1; }
cd "$root"
echo "== Rust integration tests against the bed"
cargo test --workspace --release --test '*' -- --test-threads=1
echo "== Kafka observer failure suite (S1-S9)"
bash e2e/drills/kafka/run.sh
echo "== Operator drill: lose a zone, promote, recover, demote"
bash e2e/drills/operator/promotion-drill.sh
