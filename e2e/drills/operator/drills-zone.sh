# shellcheck shell=bash
# D1: one zone lost and back (also the core of D13 and D14, over secured listeners). Sourced by run.sh.
#
# A topic with three partitions spread over the three zones of primaries, the observer 4 on
# each (1:2:4, 2:3:4, 3:1:4), min ISR 2; an acks=all idempotent producer writing 20 records a
# second in turn to every partition, each acknowledgement recorded.
#   1. precondition: no ISR holds 4, every ISR two primaries, records acknowledged
#   2. zone 1 lost (`kafka.sh stop 1`: JVM SIGKILLed, pod gone, its replacement Pending): the
#      partitions 0 and 2 drop to one in-sync replica, under min ISR
#   3. the operator promotes 4 on its own: status.autoPromotions records it; the controllers'
#      ConfigMap loses 4 before the brokers' one; 4 joins every ISR; writes resume on 0 and 2
#   4. zone 1 back: 1 rejoins; after the stabilization window the operator demotes 4
#      (controllers' ConfigMap first), 4 leaves every ISR and leads nothing from then on
#   5. every acknowledged record is read back exactly once
# Prints the promotion timeline (DRILL lines, seconds from the kill and from the restart).

set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d1() { zone_lost_and_back D1; }

# zone_lost_and_back LABEL: the drill above; its DRILL lines and topic carry LABEL.
zone_lost_and_back() {
  local label="$1" topic t0 t_kill t_under t_ctrl t_brk t_isr4 t_res0 t_res2 t_restart t_back t_dctrl t_dbrk t_out
  topic="$(new_drill_topic "${label,,}" 1:2:4,2:3:4,3:1:4)"
  start_isr_sampler "$topic"
  start_cm_sampler
  start_stream "$topic" 20
  t0="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t0" 'isr_none(4) && isr_min() == 2' 60 "every ISR two primaries, without 4" >/dev/null
  wait_ack 0 "$t0" 60 "records acknowledged before the drill" >/dev/null
  lists_4_everywhere || fail "the ConfigMaps do not list observer 4 at the start"
  log "precondition ok: $topic, every ISR two primaries, 4 outside, records acknowledged"

  log "== zone 1 lost: kafka.sh stop 1"
  t_kill="$(now_ms)"
  node_stop 1
  t_under="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_kill" 'ok() && isr_min() == 1' 60 "a partition under min ISR")"
  t_ctrl="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_kill" 'lacks($2, 4)' 120 "the controllers' ConfigMap without 4")"
  t_brk="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_kill" 'lacks($3, 4)' 120 "the brokers' ConfigMap without 4")"
  ((t_ctrl <= t_brk)) || fail "the brokers' ConfigMap changed before the controllers' one ($t_brk < $t_ctrl)"
  never_sample "$SCENARIO_DIR/cm.log" "$t_kill" "$t_brk" 'lacks($3, 4) && lists($2, 4)' \
    "a sample shows the brokers promoted while the controllers still list 4"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ " $(auto_promoted) " == *" 4 "* ]] || fail "status.autoPromotions does not record node 4: [$(auto_promoted)]"
  t_isr4="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_kill" 'isr_all(4)' 120 "4 in every ISR")"
  t_res0="$(wait_ack 0 "$t_under" 120 "writes resumed")"
  t_res2="$(wait_ack 2 "$t_under" 120 "writes resumed")"
  node_scheduled 1 && fail "node 1 came back during the outage (someone removed its node's hold label): timings invalid"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL $label kill_to_under_min_isr_s=$(secs "$t_kill" "$t_under") kill_to_controllers_cm_s=$(secs "$t_kill" "$t_ctrl") kill_to_brokers_cm_s=$(secs "$t_kill" "$t_brk") kill_to_4_in_every_isr_s=$(secs "$t_kill" "$t_isr4") kill_to_writes_resumed_s=$(secs "$t_kill" "$((t_res0 > t_res2 ? t_res0 : t_res2))")"

  log "== zone 1 back"
  t_restart="$(now_ms)"
  KAFKA_START_WAIT=0 node_up 1
  t_back="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_restart" '$3 ~ /,1,/ && $7 ~ /,1,/' 300 "1 back in the ISRs of partitions 0 and 2")"
  t_dctrl="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_restart" 'lists($2, 4)' 300 "the controllers' ConfigMap lists 4 again (demotion)")"
  t_dbrk="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_restart" 'lists($3, 4)' 300 "the brokers' ConfigMap lists 4 again (demotion)")"
  ((t_dctrl <= t_dbrk)) || fail "demotion: the brokers' ConfigMap changed before the controllers' one"
  t_out="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_dbrk" 'isr_none(4)' 120 "4 out of every ISR")"
  # shellcheck disable=SC2312 # now_ms (date +%s%3N) does not fail
  never_sample "$SCENARIO_DIR/isr.log" "$t_dctrl" "$(now_ms)" 'leads(4)' "4 leads a partition after its demotion began"
  wait_obs 30 "status.autoPromotions empty after the demotion" no_auto_promotion
  # shellcheck disable=SC2312 # now_ms (date +%s%3N) does not fail
  wait_ack 1 "$(now_ms)" 30 "writes after the demotion" >/dev/null
  # shellcheck disable=SC2312 # message text only
  echo "DRILL $label restart_to_isr_back_s=$(secs "$t_restart" "$t_back") restart_to_controllers_cm_s=$(secs "$t_restart" "$t_dctrl") restart_to_brokers_cm_s=$(secs "$t_restart" "$t_dbrk") restart_to_4_out_of_every_isr_s=$(secs "$t_restart" "$t_out")"
  touch "$SCENARIO_DIR/isr.stop"
  drill_accounting "$label" "$topic"
}

# Both ConfigMaps list the observer 4.
# shellcheck disable=SC2312 # cm_ids answers '?' on a failed read, which lists no 4: false, the safe answer
lists_4_everywhere() { [[ ",$(cm_ids controller)," == *",4,"* && ",$(cm_ids broker)," == *",4,"* ]]; }
