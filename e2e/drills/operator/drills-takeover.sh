# shellcheck shell=bash
# D12: every primary of a partition lost. Sourced by run.sh.
#
# A topic 1:2:4 (min ISR 2) with acks=all records flowing; brokers 1 and 2 stopped at the same
# moment (both JVMs SIGKILLed), so 4, never in the ISR, is the only replica left:
#   0. before the loss, the operator's leader is restarted (pod deleted; the other replica takes
#      over): the successor reads the partition's high watermark itself from the live leader
#   1. uncleanTakeover false (the example's default): 4 is promoted (UnderMinIsr) but not elected;
#      the partition stays without a leader for 20 s and the operator says why (uncleanTakeover
#      disabled) in a Warning Event
#   2. uncleanTakeover set to true: the leader elects 4 by unclean election (its log end offset
#      reaches the high watermark this process read and watched up to the loss) and 4 leads. A
#      restart *after* the loss would refuse instead (a restored high watermark is not a witness):
#      tests/integration/engine_state_failover.rs shows that on the bed's saved state
#   3. min.insync.replicas lowered to 1 (as an operator would, so the one replica left can
#      commit: Kafka 4 freezes the HW below min ISR), then every acknowledged record is read
#      back from 4 exactly once
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d12() {
  local topic t t_lost t_promoted t_set t_elected
  topic="$(new_drill_topic d12 1:2:4)"
  start_isr_sampler "$topic"
  start_stream "$topic" 20
  t="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_none(4) && isr_min() == 2' 60 "ISR {1,2}, without 4" >/dev/null
  wait_ack 0 "$t" 60 "records acknowledged before the loss" >/dev/null
  local unclean
  # An empty answer means the default (false): a failed read must not pass for it.
  unclean="$(obs_get '{.spec.promotion.uncleanTakeover}')" || fail "cannot read the example ObserverSet's uncleanTakeover"
  [[ "$unclean" =~ ^(|false)$ ]] || fail "the example ObserverSet has uncleanTakeover on ($unclean)"
  log "== the operator's leader restarted before the loss"
  local old_leader
  old_leader="$(operator_leader)"
  [[ -n "$old_leader" ]] || fail "no operator leader found"
  kubectl -n "$OPERATOR_NS" delete pod "$old_leader" --wait=false >/dev/null || fail "cannot delete the operator leader $old_leader"
  wait_obs 60 "a new operator leader" '[[ -n "$(operator_leader)" && "$(operator_leader)" != "$old_leader" ]]'
  sleep 5 # a few scans of the successor see the partition led: it reads the high watermark itself

  log "== brokers 1 and 2 lost at once"
  t_lost="$(now_ms)"
  bash "$KAFKA_SH" stop 1 2 >&2 || fail "kafka.sh stop 1 2 failed"
  wait_obs 90 "4 promoted automatically" '[[ " $(auto_promoted) " == *" 4 "* ]]'
  t_promoted="$(now_ms)"
  sleep 20
  # shellcheck disable=SC2312 # now_ms (date +%s%3N) does not fail
  never_sample "$SCENARIO_DIR/isr.log" "$t_lost" "$(now_ms)" 'leads(4)' "4 was elected although uncleanTakeover is false"
  local why
  why="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS" \
    -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' | grep -m1 "$topic-0.*uncleanTakeover is disabled" || true)"
  [[ -n "$why" ]] || fail "no Event says why 4 is not elected (uncleanTakeover disabled)"
  log "held back as expected: $why"

  log "== uncleanTakeover: true"
  t_set="$(now_ms)"
  obs_patch '{"spec":{"promotion":{"uncleanTakeover":true}}}'
  t_elected="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_set" 'leads(4)' 90 "4 elected leader (unclean takeover)")"
  local events
  events="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS,reason=UncleanTakeover" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}')"
  [[ "$events" == *"$topic-0"* ]] || fail "4 leads but no UncleanTakeover Event names $topic-0"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D12 lost_to_promoted_s=$(secs "$t_lost" "$t_promoted") takeover_enabled_to_4_leads_s=$(secs "$t_set" "$t_elected") new_operator_leader=$(operator_leader)"

  dc config "$topic" min.insync.replicas 1 >&2 || fail "cannot lower min.insync.replicas"
  wait_ack 0 "$t_elected" 60 "writes through 4" >/dev/null
  drill_accounting D12 "$topic"
}
