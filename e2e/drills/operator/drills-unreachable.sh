# shellcheck shell=bash
# D4: Kafka unreachable while the operator scans. Sourced by run.sh.
#
# Every broker stopped at once (`kafka.sh stop 1 2 3 4`): within 30 s the ObserverSet's
# condition KafkaReachable turns False with reason ScanFailed and a message that says the
# automation acts on nothing, with a Warning Event KafkaUnreachable saying the same; for 30 s afterwards nothing is promoted and neither ConfigMap
# changes. The brokers come back: KafkaReachable turns True again.
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d4() {
  local t_down t_cond t_up t_back before
  wait_obs 60 "KafkaReachable True at the start" '[[ "$(reachable)" == True ]]'
  before="$(cm_snapshot)" || fail "the ConfigMaps cannot be read at the start"
  log "== every broker stopped"
  t_down="$(now_ms)"
  bash "$KAFKA_SH" stop "${BROKERS[@]}" >&2 || fail "kafka.sh stop ${BROKERS[*]} failed"
  wait_obs 60 "KafkaReachable False" '[[ "$(reachable)" == False ]]'
  t_cond="$(now_ms)"
  local reason message
  reason="$(obs_get '{.status.conditions[?(@.type=="KafkaReachable")].reason}')"
  message="$(obs_get '{.status.conditions[?(@.type=="KafkaReachable")].message}')"
  [[ "$reason" == ScanFailed && "$message" == *"promotes and demotes nothing"* ]] ||
    fail "KafkaReachable False with reason '$reason' and message '$message'"
  log "KafkaReachable False ($reason): $message"
  local events
  events="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS,reason=KafkaUnreachable" \
    -o jsonpath='{range .items[*]}{.type}{" "}{.message}{"\n"}{end}')"
  [[ "$events" == *"Warning the last scan could not read the Kafka cluster"* ]] ||
    fail "KafkaReachable is False but no Warning Event KafkaUnreachable says why (got: $events)"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(obs_get '{range .status.conditions[*]}{.type}{" "}{end}')" == *Ready* ]] || fail "the reconciler's conditions are gone"
  for _ in $(seq 30); do
    expect_no_auto_promotion "something was promoted while Kafka was unreachable"
    expect_lists_unchanged "$before" "a ConfigMap changed while Kafka was unreachable"
    sleep 1
  done
  log "== the brokers come back"
  t_up="$(now_ms)"
  node_up "${BROKERS[@]}"
  wait_obs 120 "KafkaReachable True again" '[[ "$(reachable)" == True ]]'
  t_back="$(now_ms)"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D4 stopped_to_condition_false_s=$(secs "$t_down" "$t_cond") no_action_for_s=30 started_to_condition_true_s=$(secs "$t_up" "$t_back")"
}

reachable() { obs_get '{.status.conditions[?(@.type=="KafkaReachable")].status}'; }
