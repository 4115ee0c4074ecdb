# shellcheck shell=bash
# D6 and D7: the promotion policy's guards under real failures. Sourced by run.sh.

# D6: a flapping broker. Broker 1 (of a topic 1:2:4) is stopped and started five times, 12 s
# down and, once back in the ISR, 12 s up each time, for about two minutes, with the demotion's stabilization
# window at its floor of 10 s (shorter than the 12 s up), so that without a cooldown 4 would be promoted and demoted with every
# flap. Every automatic action on 4 (status.history, who=automation) comes at least the
# cooldown (30 s in the example) after the one before, so at most one per cooldown; and there
# are at least two (the cooldown was what held the others back, not a quiet bed).
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d6() {
  local topic t0 t0_iso i cooldown_s
  cooldown_s="$(obs_get '{.spec.promotion.cooldown}')"
  [[ "$cooldown_s" =~ ^([0-9]+)s$ ]] || fail "the example's cooldown '$cooldown_s' is not in whole seconds"
  cooldown_s="${BASH_REMATCH[1]}"
  topic="$(new_drill_topic d6 1:2:4)"
  start_isr_sampler "$topic"
  # shellcheck disable=SC2312 # date does not fail
  t0="$(now_ms)" t0_iso="$(date -u +%Y-%m-%dT%H:%M:%S)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t0" 'isr_none(4) && isr_min() == 2' 60 "ISR {1,2}, without 4" >/dev/null
  obs_patch '{"spec":{"promotion":{"autoDemote":{"enabled":true,"stabilizationWindow":"10s"}}}}'
  for i in 1 2 3 4 5; do
    log "== flap $i: broker 1 down"
    bash "$KAFKA_SH" stop 1 >&2 || fail "kafka.sh stop 1 failed"
    sleep 12
    log "== flap $i: broker 1 up"
    local t_up
    t_up="$(now_ms)"
    KAFKA_START_WAIT=0 bash "$KAFKA_SH" start 1 >&2 || fail "kafka.sh start 1 failed"
    # Up means back in the ISR, then 12 s: a JVM start takes 8 s on a quiet bed and more under
    # load, and a broker that never rejoins before it is stopped again gives the demotion's
    # window nothing to time (CI once saw only the first promotion in two minutes).
    wait_sample "$SCENARIO_DIR/isr.log" "$t_up" 'ok() && has($3, 1)' 90 "broker 1 back in the ISR (flap $i)" >/dev/null
    sleep 12
  done
  local actions gaps n
  actions="$(obs_get '{range .status.history[?(@.who=="automation")]}{.at} {.action} {.nodeId}{"\n"}{end}' |
    awk -v since="$t0_iso" '$1 >= since && $3 == 4' | sort)"
  n="$(grep -c . <<<"$actions" || true)"
  log "automatic actions on 4 since $t0_iso:"$'\n'"$actions"
  grep -q " Promote 4$" <<<"$actions" || fail "no automatic promotion of 4 while broker 1 flapped"
  ((n >= 2)) || fail "only $n automatic action(s) on 4 while broker 1 flapped: the drill did not test the cooldown"
  gaps="$(awk '{ cmd = "date -d " $1 " +%s.%N"; cmd | getline s; close(cmd); if (NR > 1) printf "%.1f ", s - prev; prev = s }' <<<"$actions")"
  for i in $gaps; do
    # shellcheck disable=SC2312 # only the text of the failure being reported
    awk -v g="$i" -v c="$cooldown_s" 'BEGIN { exit !(g >= c) }' || fail "two automatic actions on 4 only ${i}s apart (cooldown ${cooldown_s}s): $(tr '\n' ';' <<<"$actions")"
  done
  echo "DRILL D6 flaps=5 automatic_actions=$n gaps_s=[${gaps% }] cooldown_s=$cooldown_s"
}

# D7: a lagging observer is not promoted until it has caught up. The replication of a topic
# 1:2:4 to replicas outside the ISR (only 4, the observer) is throttled on its leaders to 1 KB/s
# (leader.replication.throttled.*: a leader throttles only replicas outside the ISR), 5000
# records of 6 KB (30 MB) are written, then zone 1 is lost: the partition is under min ISR, but
# 4 lags far more than maxLagMessages (1000): no promotion for 20 s, and a PromotionHeldBack
# Event says it lags. The throttle is lifted: 4 catches up, is promoted and joins the ISR.
scenario_d7() {
  local topic t b id t_lifted t_promoted t_isr
  b="$(bootstrap)"
  topic="$(new_drill_topic d7 1:2:4)"
  start_isr_sampler "$topic"
  for id in 1 2; do
    after_restore "unthrottle $id"
    # shellcheck disable=SC2154 # tb: set by e2e/lib.sh, sourced by run.sh before this file
    "$tb/bin/kafka-configs" --bootstrap-server "$b" --entity-type brokers --entity-name "$id" --alter \
      --add-config leader.replication.throttled.rate=1024 >/dev/null || fail "cannot throttle broker $id"
  done
  "$tb/bin/kafka-configs" --bootstrap-server "$b" --entity-type topics --entity-name "$topic" --alter \
    --add-config 'leader.replication.throttled.replicas=*' >/dev/null || fail "cannot throttle $topic"
  t="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_none(4) && isr_min() == 2' 60 "ISR {1,2}, without 4" >/dev/null
  produce "$topic" 5000 all d7 6000 >/dev/null
  log "== zone 1 lost while 4 lags"
  t="$(now_ms)"
  node_stop 1
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_min() == 1' 60 "the partition under min ISR" >/dev/null
  sleep 20
  expect_no_auto_promotion "4 was promoted while it lagged"
  local why
  why="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS,reason=PromotionHeldBack" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -m1 "$topic.*lag\|lag.*$topic" || true)"
  [[ -n "$why" ]] || fail "no PromotionHeldBack Event says 4 lags on $topic"
  log "held back as expected: $why"
  t_lifted="$(now_ms)"
  unthrottle 2 || fail "cannot lift the throttle on broker 2"
  wait_obs 120 "4 promoted once caught up" '[[ " $(auto_promoted) " == *" 4 "* ]]'
  t_promoted="$(now_ms)"
  t_isr="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_lifted" 'isr_all(4)' 120 "4 in the ISR")"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D7 held_back_s=20 throttle_lifted_to_promoted_s=$(secs "$t_lifted" "$t_promoted") throttle_lifted_to_4_in_isr_s=$(secs "$t_lifted" "$t_isr")"
}

# unthrottle ID: broker ID's leader.replication.throttled.rate removed, if set.
unthrottle() {
  local configs=("$tb/bin/kafka-configs" --bootstrap-server "$(bootstrap)" --entity-type brokers --entity-name "$1")
  local described
  described="$("${configs[@]}" --describe 2>/dev/null)"
  [[ "$described" == *"leader.replication.throttled.rate="* ]] || return 0
  "${configs[@]}" --alter --delete-config leader.replication.throttled.rate >/dev/null
}

# D11 (the two other automatic policies end to end, and the demotion of a leading broker listed
# first):
#   LeaderIsObserver, a topic 1:2:4 (min ISR 2): zone 1 lost -> under min ISR, but the policy
#     waits for Offline: no promotion for 20 s; zone 2 lost too -> Offline (only 4 holds the
#     data): 4 promoted.
#   UnderReplicated, a topic 1:2:4 with min ISR 1: zone 1 lost -> one primary of two in the ISR,
#     writes still accepted (not under min ISR): 4 promoted.
#   The example's UnderMinIsr, a topic 4:1:2 (the observer listed first): zone 1 lost -> 4
#     promoted, in the ISR; a preferred election (as Kafka's auto leader rebalance would run)
#     makes 4 leader; zone 1 back: a preferred election alone would keep 4 leading, so the
#     operator reorders the replicas to 1:2:4 (same brokers), moves leadership to 1 and only then
#     demotes 4, which leaves the ISR and leads nothing.
scenario_d11() {
  local topic t t_prom
  obs_patch '{"spec":{"promotion":{"policy":"LeaderIsObserver"}}}'
  topic="$(new_drill_topic d11a 1:2:4)"
  start_isr_sampler "$topic"
  t="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_none(4) && isr_min() == 2' 60 "ISR {1,2}, without 4" >/dev/null
  node_stop 1
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_min() == 1' 60 "$topic under min ISR" >/dev/null
  sleep 20
  expect_no_auto_promotion "LeaderIsObserver promoted on an under-min-ISR partition"
  t="$(now_ms)"
  node_stop 2
  wait_obs 90 "LeaderIsObserver: 4 promoted once the partition is offline" '[[ " $(auto_promoted) " == *" 4 "* ]]'
  t_prom="$(now_ms)"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D11 leader_is_observer_quiet_under_min_isr_s=20 offline_to_promoted_s=$(secs "$t" "$t_prom")"
  touch "$SCENARIO_DIR/isr.stop"

  log "== UnderReplicated (the bed restored first)"
  restore_scenario >&2 || fail "could not restore the bed between the two policies"
  rm -f "$SCENARIO_DIR/on-restore" "$SCENARIO_DIR/after-restore" "$SCENARIO_DIR/topics"
  obs_patch '{"spec":{"promotion":{"policy":"UnderReplicated"}}}'
  topic="$(new_drill_topic d11b 1:2:4)"
  dc config "$topic" min.insync.replicas 1 >&2 || fail "cannot set min.insync.replicas=1 on $topic"
  start_isr_sampler "$topic"
  t="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_none(4) && isr_min() == 2' 60 "ISR {1,2}, without 4" >/dev/null
  t="$(now_ms)"
  node_stop 1
  wait_obs 90 "UnderReplicated: 4 promoted" '[[ " $(auto_promoted) " == *" 4 "* ]]'
  t_prom="$(now_ms)"
  local t_isr
  t_isr="$(wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_all(4)' 60 "4 in the ISR")"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D11 under_replicated_kill_to_promoted_s=$(secs "$t" "$t_prom") kill_to_4_in_isr_s=$(secs "$t" "$t_isr")"

  touch "$SCENARIO_DIR/isr.stop"
  log "== a leading observer listed first (the bed restored first)"
  restore_scenario >&2 || fail "could not restore the bed before the reordering"
  rm -f "$SCENARIO_DIR/on-restore" "$SCENARIO_DIR/after-restore" "$SCENARIO_DIR/topics"
  d11_reorder
}

# The third part of D11: the example ObserverSet (UnderMinIsr, autoDemote 30 s).
d11_reorder() {
  local topic t t_back t_reordered t_demoted t_out b replicas
  b="$(bootstrap)"
  topic="$(new_drill_topic d11c 4:1:2)"
  start_isr_sampler "$topic"
  t="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_none(4) && isr_min() == 2 && !leads(4)' 60 "ISR {1,2}, without 4, 4 not leading" >/dev/null
  node_stop 1
  wait_obs 90 "4 promoted once zone 1 is lost" '[[ " $(auto_promoted) " == *" 4 "* ]]'
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_all(4)' 60 "4 in the ISR" >/dev/null
  "$tb/bin/kafka-leader-election" --bootstrap-server "$b" --election-type PREFERRED \
    --topic "$topic" --partition 0 >&2 || fail "the preferred election that makes 4 leader failed"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'leads(4)' 30 "4 leading $topic (its preferred leader)" >/dev/null
  t_back="$(now_ms)"
  KAFKA_START_WAIT=0 node_up 1
  wait_obs 180 "4 demoted after zone 1 came back" no_auto_promotion
  t_demoted="$(now_ms)"
  replicas="$("$tb/bin/kafka-topics" --bootstrap-server "$b" --describe --topic "$topic" |
    awk '/Partition: 0/ { for (i = 1; i <= NF; i++) if ($i == "Replicas:") print $(i + 1) }')"
  [[ "$replicas" == "1,2,4" ]] || fail "$topic's replicas are '$replicas' after the demotion, expected 1,2,4 (reordered)"
  local reordered
  reordered="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS,reason=ReplicasReordered" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -m1 "$topic" || true)"
  [[ -n "$reordered" ]] || fail "no ReplicasReordered Event names $topic"
  log "reordered: $reordered"
  t_reordered="$(first_sample "$SCENARIO_DIR/isr.log" "$t_back" 'ok() && !leads(4)')"
  [[ -n "$t_reordered" ]] || fail "4 still led $topic when it was demoted"
  # The operator's own record (status.history, each action stamped with its scan): the
  # reordering and the leadership move in one scan, the demotion in a later one. A sampler's
  # view of Kafka and the status poll cannot order events a scan apart; the history can.
  local actions
  # shellcheck disable=SC2312 # date does not fail; obs_get failing is no history, which fails the order check below
  actions="$(obs_get '{range .status.history[?(@.who=="automation")]}{.at} {.action} {.nodeId}{"\n"}{end}' |
    awk -v since="$(date -u -d "@$((t_back / 1000))" +%Y-%m-%dT%H:%M:%S)" '$1 >= since && $3 == 4 { print $1, $2 }' | sort)"
  log "automatic actions on 4 since zone 1 came back:"$'\n'"$actions"
  # shellcheck disable=SC2312 # only the text of the failure being reported
  awk '$2 == "ReorderReplicas" { r = $1 } $2 == "MoveLeadership" { m = $1 } $2 == "Demote" && d == "" { d = $1 }
    END { exit !(r != "" && m != "" && d != "" && r < d && m < d) }' <<<"$actions" ||
    fail "expected ReorderReplicas and MoveLeadership before the Demote of 4 in status.history, got: $(tr '\n' ';' <<<"$actions")"
  # And 4 never leads again: not after the move, nor once it is an observer again.
  t_out="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_demoted" 'isr_none(4) && !leads(4)' 90 "4 out of the ISR after its demotion")"
  never_sample "$SCENARIO_DIR/isr.log" "$t_reordered" "$t_out" 'leads(4)' "4 led $topic again after leadership moved off it"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D11 reorder back_to_leadership_moved_s=$(secs "$t_back" "$t_reordered") back_to_demoted_s=$(secs "$t_back" "$t_demoted") back_to_4_out_of_isr_s=$(secs "$t_back" "$t_out") replicas_after=$replicas"
}
