#!/usr/bin/env bash
# Everything that needs the real test bed: the operator on the bed, the Helm chart checked by a
# real apiserver, the Rust integration tests, the Kafka failure suite and the operator drill.
# Expects the bed up (make test brings it up first). Prints each stage's duration at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/e2e/versions.env"
export KOO_TESTBED="$root/.testbed"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$KOO_CACHE/target}"
[[ -f "$KOO_TESTBED/kubeconfig" ]] || { echo "test bed not up: run make testbed-up"; exit 1; }
cd "$root"
timings=()
stage() { # name, command...
  local name="$1" t=$SECONDS; shift
  echo "== $name"
  "$@"
  timings+=("$(printf '%-44s %4ds' "$name" $((SECONDS - t)))")
}
stage "operator on the bed (operator.sh up)" bash e2e/testbed/operator.sh up
stage "Helm chart: lint, template, schema, dry-run" bash e2e/chart-check.sh
# --test-threads=1: the operator tests share the bed's pods and its ObserverSet kafka/kafka.
stage "Rust integration tests against the bed" cargo test --workspace --release --test '*' -- --test-threads=1
stage "Kafka observer failure suite (S1-S9)" bash e2e/drills/kafka/run.sh
stage "operator drill: lose a zone, promote, demote" bash e2e/drills/operator/promotion-drill.sh
echo "== integration stages"
printf '%s\n' "${timings[@]}"
