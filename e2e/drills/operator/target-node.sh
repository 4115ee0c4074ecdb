# Promotion drill target: the bed's real node. The example StatefulSets in namespace kafka-k8s
# (e2e/testbed/kafka-k8s.sh), the ObserverSet examples/kafka/observerset/, the operator installed
# by its Helm chart (e2e/testbed/operator-chart.sh, two replicas). A lost zone: koo-node cordoned,
# the JVM killed with SIGKILL in its container, the pod deleted; it comes back on uncordon.
# Sourced by promotion-drill.sh, which defines root, tb and k.
ns=kafka-k8s
bootstrap="$(cat "$tb/kafka-k8s/bootstrap")"
setup_operator() {
  bash "$root/e2e/testbed/operator-chart.sh" up
  bash "$root/e2e/testbed/kafka-k8s.sh" observerset
}
operator_log() {
  k -n kafka-observer-system logs -l app.kubernetes.io/name=kafka-observer-operator --tail=2000 \
    --prefix 2>/dev/null
}
lose_broker() { bash "$root/e2e/testbed/kafka-k8s.sh" lose "$1"; }
return_broker() { bash "$root/e2e/testbed/kafka-k8s.sh" return "$1"; }
# Whether broker ID's pod runs again (someone uncordoned the node).
broker_back() {
  [[ "$(k -n "$ns" get pod "kafka-broker-$(($1 - 1))" -o jsonpath='{.status.phase}' 2>/dev/null)" == Running ]]
}
