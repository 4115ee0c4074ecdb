#!/usr/bin/env bash
# Everything that needs the real test bed, all on its real node and its Kafka StatefulSets
# (namespace kafka): the Helm chart checked by a real apiserver; the operator installed by its
# chart, the operator's failure drills (the first phase on kafka and a second cluster kafka-2 side
# by side) and the runbooks' commands; then the operator as a local process
# with exactly the chart's permissions for the Rust integration tests (they kill and restart
# it), with the Kafka failure suite S1-S10 on a second cluster beside them; last, in place of
# that bed, the three-member bed and its drills (e2e/testbed/multi-drills.sh). Expects the bed up
# (make test brings it up first). Prints each stage's duration.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export KOO_TESTBED="$tb"
[[ -f "$KOO_TESTBED/kubeconfig" ]] || { echo "test bed not up: run make testbed-up"; exit 1; }
cd "$root"
timings=()
# The patch built and smoke-tested for every supported Kafka version (e2e/build/kafka-versions.sh)
# needs no bed: with KOO_KAFKA_VERSIONS_BESIDE=1 (make test) it runs beside the bed stages after
# the drills' first phase, on its own loopback addresses, one version at a time and at a lower
# CPU priority (nice 10). Not earlier: beside the first phase's two drill lanes it took CPU they
# wait on (that phase took 1080 s instead of 592 s in a local .ci/run); the zone drills, the soak
# and the tests after them leave more of it idle. Its lines are printed, and its status counted,
# at the end; it is stopped (its whole process group) if a stage fails first.
kv_pid=""
k2_pid=""
trap '[[ -z "$kv_pid" ]] || kill -- "-$kv_pid" 2>/dev/null || true; [[ -z "$k2_pid" ]] || kill -- "-$k2_pid" 2>/dev/null || true' EXIT
start_kafka_versions() {
  [[ -n "${KOO_KAFKA_VERSIONS_BESIDE:-}" ]] || return 0
  kv_log="$KOO_TESTBED/kafka-versions.log"
  KAFKA_VERSIONS_JOBS=1 setsid nice -n 10 bash e2e/build/kafka-versions.sh > "$kv_log" 2>&1 &
  kv_pid=$!
  echo "== kafka-versions started beside the remaining bed stages (pid $kv_pid, log $kv_log)"
}
kafka_versions_result() {
  local rc=0
  wait "$kv_pid" || rc=$?
  kv_pid=""
  cat "$kv_log"
  return "$rc"
}
# The drills' second cluster (namespace kafka-2: run.sh runs some drills on it beside the others)
# comes up beside the first stages; the drills' stage waits for it (run.sh's own `kafka.sh up`
# then finds it up, or tries again and says why not). Its namespace is made first: the chart's
# namespaced install below puts a Role in it.
kubectl get namespace kafka-2 >/dev/null 2>&1 || kubectl create namespace kafka-2 >/dev/null
KOO_KAFKA_NAMESPACE=kafka-2 setsid bash e2e/testbed/kafka.sh up > "$KOO_TESTBED/kafka-2-up.log" 2>&1 &
k2_pid=$!
stage() { # name, command...
  local name="$1" t=$SECONDS; shift
  echo "== $name"
  "$@"
  timings+=("$(printf '%-44s %4ds' "$name" $((SECONDS - t)))")
}
stage "Helm chart: lint, template, schema, dry-run" bash e2e/chart-check.sh
stage "Helm chart: namespaced RBAC and admission policy on the bed" bash e2e/namespaced-check.sh
# The drills run against the install docs/security.md recommends for a shared cluster: namespaced
# (watchNamespaces), a Role in each Kafka namespace and no pod, ConfigMap or Secret rights
# elsewhere. The first phase watches kafka and kafka-2; the second, after kafka-2 is purged (its
# namespace and Role with it), kafka alone. From the soak on, the chart's default (cluster-wide):
# the Rust tests and the examples make namespaces of their own.
drills_chart_args="--set watchNamespaces={kafka,kafka-2}"
# The local-process operator of an earlier run on this bed shares the Lease: stopped first.
stage "real node: operator installed by its Helm chart (namespaced)" env KOO_CHART_ARGS="$drills_chart_args" bash -c 'bash e2e/testbed/operator.sh down && bash e2e/testbed/operator-chart.sh up'
# examples/strimzi/ against Strimzi's own CRDs (made from Maven Central's io.strimzi jars), by
# the bed's apiserver: there is no Strimzi operator here, so a server-side dry run is all. After
# the chart: the ObserverSet CRD is then the chart's, which strimzi-check leaves alone (a CRD it
# created itself it would delete afterwards).
stage "Strimzi example: server-side dry run" bash e2e/strimzi-check.sh server "$KOO_TESTBED/kubeconfig"
# The drills in two phases (e2e/drills/operator/run.sh): first, side by side, those that touch only
# their own cluster, on kafka and on kafka-2 (brought up beside the first stages); then, one at a
# time, those that kill the operator's leader or the apiserver, or fail whole zones.
drills_side_by_side() {
  wait "$k2_pid" || echo "== the second cluster's first bring-up failed (run.sh tries again):"
  k2_pid=""
  cat "$KOO_TESTBED/kafka-2-up.log"
  KOO_CHART_ARGS="$drills_chart_args" bash e2e/drills/operator/run.sh --side-by-side
}
stage "real node: drills D1, D2, D4, D6-D11, D13, D14 side by side" drills_side_by_side
start_kafka_versions
stage "real node: drills D3, D5, D12, D15-D22 one at a time" env KOO_CHART_ARGS="--set watchNamespaces={kafka}" bash e2e/drills/operator/run.sh --alone
# A short run of the seeded fault schedule (make soak runs it for 20 minutes by default); its
# `operator-chart.sh up` (no KOO_CHART_ARGS) puts the chart back to cluster-wide.
stage "real node: soak, seed 1, 3 minutes" bash e2e/drills/operator/soak.sh 1 3
# Every command of docs/runbooks.md, against the chart's operator (helm upgrade, its Lease, logs).
stage "real node: the runbooks' commands" bash e2e/drills/operator/runbooks.sh
# The local-process operator below campaigns for the same Lease and watches every namespace: the
# chart's operator pods make way; the chart's ServiceAccount and RBAC stay, and the local operator
# runs with that ServiceAccount's token, so every test runs against exactly the chart's permissions.
stage "real node: the chart without its operator pods" bash e2e/testbed/operator-chart.sh rbac
export KOO_OPERATOR_CREDENTIALS=chart
stage "operator on the bed, chart's RBAC (operator.sh up)" bash e2e/testbed/operator.sh up
# --test-threads=1: the tests share the bed's Kafka pods and its ObserverSet kafka/kafka.
# KOO_JVM_ACK_TEST=1: tests/integration/operator_jvm_ack.rs runs too (its own second cluster, kafka-j, with a
# 30 s observer cache on the controllers; about 3.5 min).
# The Kafka failure suite needs no operator and kills only its own cluster's pods, so it runs on a
# second cluster (namespace kafka-s, purged afterwards) beside the Rust tests, which use the bed's
# kafka (and kafka-j): they share the node and the apiserver, nothing else. Each side's duration
# is printed with the stages; the stage fails if either does.
# Then, after both, examples/kafka-two-observers/ (RF4, observers 4 and 5) and
# examples/kafka-combined/ (KRaft combined mode), one after the other, each a cluster of its own in
# its own namespace (kafka-two, kafka-combined): applied, a promotion of 4 and back by the operator
# the tests ran (the chart's permissions), removed again. Not beside the Rust tests: several of them
# stop and restart that operator (support.rs, pause), and in the local .ci/run of 13faf4c the
# examples, started early because S1-S10 ended early, promoted 4 while it was down for 84 s
# (EXAMPLE two-observers FAIL "4 in the ISR after its promotion: not within 60s").
kafka_suite_beside() {
  local t=$SECONDS rc=0
  KOO_KAFKA_NAMESPACE=kafka-s bash e2e/testbed/kafka.sh up || rc=$?
  [[ $rc != 0 ]] || KOO_KAFKA_NAMESPACE=kafka-s bash e2e/drills/kafka/run.sh || rc=$?
  KOO_KAFKA_NAMESPACE=kafka-s bash e2e/testbed/kafka.sh purge || true
  echo "== Kafka observer failure suite (S1-S10) on kafka-s: status $rc in $((SECONDS - t))s"
  return "$rc"
}
rust_tests_and_kafka_suite() {
  local suite rc=0 t=$SECONDS
  kafka_suite_beside > "$KOO_TESTBED/kafka-suite.log" 2>&1 &
  suite=$!
  env KOO_JVM_ACK_TEST=1 cargo test --workspace --release --test '*' -- --test-threads=1 || rc=1
  echo "== Rust integration tests: status $rc in $((SECONDS - t))s; the Kafka failure suite beside them:"
  wait "$suite" || rc=1
  cat "$KOO_TESTBED/kafka-suite.log"
  return "$rc"
}
examples() {
  local t rc=0 ex
  for ex in two-observers combined; do
    t=$SECONDS
    bash "e2e/example-$ex.sh" || rc=1
    echo "== examples/kafka-$ex/ in $((SECONDS - t))s"
  done
  return "$rc"
}
stage "Rust integration tests, S1-S10 beside them" rust_tests_and_kafka_suite
stage "examples/kafka-two-observers/ and kafka-combined/ (after the tests that restart the operator)" examples
[[ -z "$kv_pid" ]] || stage "kafka-versions (run beside the stages above)" kafka_versions_result
# Last: the single-cluster bed goes down and the three-member bed comes up in its place (they
# share the bed's address ranges), for the drills across member clusters (docs/multi-cluster.md).
stage "multi-cluster bed: multi-reconcile.sh, multi-promote.sh (MC1, MC3, MC2, MC4)" bash e2e/testbed/multi-drills.sh 1
echo "== integration stages"
printf '%s\n' "${timings[@]}"
