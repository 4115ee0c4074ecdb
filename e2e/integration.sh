#!/usr/bin/env bash
# Everything that needs the real test bed: the Helm chart checked by a real apiserver; on the real
# node the example Kafka StatefulSets, the operator installed by its chart and the promotion
# drill; then the operator as a local process for the Rust integration tests (the node's own
# acceptance tests among them) and the Kafka failure suite on the stand-in's Kafka processes.
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
stage "Helm chart: lint, template, schema, dry-run" bash e2e/chart-check.sh
stage "real node: example Kafka StatefulSets (kafka-k8s)" bash e2e/testbed/kafka-k8s.sh up
# The local-process operator of an earlier run on this bed shares the Lease: stopped first.
stage "real node: operator installed by its Helm chart" bash -c 'bash e2e/testbed/operator.sh down && bash e2e/testbed/operator-chart.sh up'
stage "real node: drill: lose a zone, promote, demote" env KOO_DRILL_TARGET=node bash e2e/drills/operator/promotion-drill.sh
# The local-process operator below campaigns for the same Lease and watches every namespace:
# the Kafka cluster (its ObserverSet finalized by the chart's operator) and the chart's operator
# pods make way; the chart's ServiceAccount and RBAC stay, and the local operator runs with that
# ServiceAccount's token, so every test runs against exactly the chart's permissions.
stage "real node: stop kafka-k8s, chart without pods" bash -c 'bash e2e/testbed/kafka-k8s.sh down && bash e2e/testbed/operator-chart.sh rbac'
export KOO_OPERATOR_CREDENTIALS=chart
stage "operator on the bed, chart's RBAC (operator.sh up)" bash e2e/testbed/operator.sh up
# --test-threads=1: the operator tests share the bed's pods and its ObserverSet kafka/kafka.
stage "Rust integration tests against the bed" cargo test --workspace --release --test '*' -- --test-threads=1
stage "Kafka observer failure suite (S1-S9)" bash e2e/drills/kafka/run.sh
echo "== integration stages"
printf '%s\n' "${timings[@]}"
