# Promotion drill target: the stand-in's local Kafka processes (namespace kafka, ObserverSet
# examples/observerset.yaml) and the operator as a local process (e2e/testbed/operator.sh).
# Sourced by promotion-drill.sh, which defines root, tb and k.
ns=kafka
bootstrap="$(cat "$tb/kafka/bootstrap")"
setup_operator() {
  bash "$root/e2e/testbed/operator.sh" up
  k apply -f "$root/examples/observerset.yaml" >/dev/null
}
operator_log() { cat "$tb/logs/operator.log" 2>/dev/null; }
lose_broker() { bash "$root/e2e/testbed/kafka.sh" kill "$1"; }
return_broker() { bash "$root/e2e/testbed/kafka.sh" start "$1"; }
# Whether broker ID runs again (someone restarted it).
broker_back() {
  bash "$root/e2e/testbed/kafka.sh" status 2>/dev/null |
    awk -v id="$1" '$1 == id && $6 == "running" { f = 1 } END { exit !f }'
}
