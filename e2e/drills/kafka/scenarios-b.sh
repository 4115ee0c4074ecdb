# S6-S9 of the Kafka failure suite (sourced by run.sh after scenarios-a.sh, which defines
# drill_topic and never_in_watch).

controller_marks() { local id; for id in "${CONTROLLERS[@]}"; do echo "$id $(log_mark "$id")"; done; }
controllers_log_since() { # controllers_log_since <marks> <regex>
  local id mark
  while read -r id mark; do log_since "$id" "$mark" "$2" | sed "s/^/[$id] /" || true; done <<< "$1"
}

# S6: the lists disagree (brokers promoted, controllers not): the leader proposes the observer,
# the controller rejects it with INELIGIBLE_REPLICA, the ISR stays; aligning the controllers heals.
scenario_s6() {
  local t marks leader_mark rejected
  t="$(drill_topic s6)"
  produce "$t" 500 all pre >/dev/null
  marks="$(controller_marks)" leader_mark="$(log_mark 1)"
  start_watch "$t"
  if [[ "$OBSERVERS_VIA" == configmap && -z "$(owning_observerset)" ]]; then
    # Through the broker ConfigMap only: a half-applied promotion.
    set_observers broker ""
  else
    # The operator (when it owns the ConfigMaps) never writes brokers before controllers, and
    # without a control plane there are only files: the disagreement is made on the brokers'
    # projected files, the failure this scenario simulates.
    local id
    for id in "${BROKERS[@]}"; do project_locally "$id" ""; done
  fi
  produce "$t" 500 all during >/dev/null
  sleep 6
  stop_watch
  never_in_watch ' isr=[0-9,]*4' "the ISR took the observer while the controllers still list it"
  rejected="$(controllers_log_since "$marks" "Rejecting AlterPartition request from node 1 for $t-0 .*ineligible replicas \[4 \(observer\)\]" | head -n1)"
  [[ -n "$rejected" ]] || fail "no controller logged the INELIGIBLE_REPLICA rejection of observer 4 for $t-0"
  note "S6: controller: $rejected"
  note "S6: leader: $(log_since 1 "$leader_mark" "INELIGIBLE_REPLICA" | head -n1 || true)"
  log_since 1 "$leader_mark" "$t-0.*INELIGIBLE_REPLICA|INELIGIBLE_REPLICA.*$t" >/dev/null ||
    fail "the leader (broker 1) did not log the controller's INELIGIBLE_REPLICA answer for $t-0"
  set_observers controller ""
  await "$t" 30000 isr=1,2,3,4 >&2
}

# S7: the file of the nodes that decide (the leader broker and the active controller) made
# unreadable (chmod 000), garbage, then deleted. These are edits of the projected file itself:
# the failure simulated is a broken volume, which no ConfigMap change can produce. The nodes run
# without CAP_DAC_OVERRIDE (kafka.sh), so chmod 000 is unreadable even though the bed runs as root.
s7_restore() {
  local id dir target
  for id in "$@"; do
    dir="$(obs_dir "$id")"
    target="$dir/..data/observer.ids"
    chmod 644 "$target" 2>/dev/null || true
    printf '%s' "$DEFAULT_OBSERVERS" > "$target"
    [[ -L "$dir/observer.ids" ]] || { rm -f "$dir/observer.ids"; ln -s ..data/observer.ids "$dir/observer.ids"; }
  done
}
s7_check() { # s7_check <what> <topic> <regex expected in each node's log> <prefix> <nodes...>
  local what="$1" t="$2" re="$3" prefix="$4" id i
  shift 4
  for id in "$@"; do
    for i in $(seq 30); do log_since "$id" "${MARK[$id]}" "$re" >/dev/null && break; sleep 0.2; done
    log_since "$id" "${MARK[$id]}" "$re" >/dev/null || fail "$what: node $id did not log /$re/"
    note "S7 $what: node $id: $(log_since "$id" "${MARK[$id]}" "$re" | tail -n1)"
    node_running "$id" || fail "$what: node $id died"
  done
  produce "$t" 300 all "$prefix" >/dev/null
  sleep 1
  await "$t" 1000 leader=1 isr=1,2,3 >&2
}
s7_wait_log() { # s7_wait_log <what> <regex> <nodes...>: each node logs it after its MARK
  local what="$1" re="$2" id i
  shift 2
  for id in "$@"; do
    for i in $(seq 40); do log_since "$id" "${MARK[$id]}" "$re" >/dev/null && break; sleep 0.2; done
    log_since "$id" "${MARK[$id]}" "$re" >/dev/null || fail "$what: node $id did not log /$re/ within 8 s"
  done
}
s7_mark() { local id; for id in "$@"; do MARK[$id]="$(log_mark "$id")"; done; }
scenario_s7() {
  local t ctl nodes id
  declare -gA MARK
  t="$(drill_topic s7)"
  ctl="$(active_controller)"
  [[ -n "$ctl" ]] || fail "no active controller"
  nodes=(1 "$ctl")
  note "S7: breaking the files of broker 1 (leader) and controller $ctl (active)"
  s7_mark "${nodes[@]}"
  for id in "${nodes[@]}"; do chmod 000 "$(obs_dir "$id")/..data/observer.ids"; done
  s7_check "chmod 000" "$t" "cannot use .*AccessDenied.*keeping the last value \[4\]" unreadable "${nodes[@]}"
  s7_mark "${nodes[@]}"
  s7_restore "${nodes[@]}"
  s7_wait_log "readable again" "observer ids: .* is usable again" "${nodes[@]}"
  s7_mark "${nodes[@]}"
  for id in "${nodes[@]}"; do printf 'garbage\nnot-an-id\n' > "$(obs_dir "$id")/..data/observer.ids"; done
  s7_check "garbage" "$t" "cannot use .*has tokens but not one integer.*keeping the last value \[4\]" garbage "${nodes[@]}"
  s7_mark "${nodes[@]}"
  s7_restore "${nodes[@]}"
  s7_wait_log "valid again" "observer ids: .* is usable again" "${nodes[@]}"
  s7_mark "${nodes[@]}"
  for id in "${nodes[@]}"; do rm "$(obs_file "$id")"; done
  # Missing file: the contract falls back to $KAFKA_OBSERVER_BROKER_IDS (the bed's pods set 4).
  s7_check "deleted" "$t" "observer ids changed: before=\[4\] after=\[4\] .*source=env:KAFKA_OBSERVER_BROKER_IDS" deleted "${nodes[@]}"
  s7_mark "${nodes[@]}"
  s7_restore "${nodes[@]}"
  s7_check "restored" "$t" "observer ids changed: before=\[4\] after=\[4\] .*source=file:" restored "${nodes[@]}"
}

# S8: kill -9 the active controller: the quorum fails over and the new active controller still
# excludes the observer (initial ISR of a new topic, election after the leader's death).
scenario_s8() {
  local t t2 old new t0 deadline
  t="$(drill_topic s8)"
  old="$(active_controller)"
  [[ -n "$old" ]] || fail "no active controller"
  t0="$(now_ms)"
  node_kill "$old"
  deadline=$(($(date +%s) + 60))
  while new="$(active_controller)"; [[ -z "$new" || "$new" == "$old" ]]; do
    (($(date +%s) < deadline)) || fail "no new active controller 60 s after killing $old"
    sleep 0.2
  done
  note "S8: active controller $old -> $new seen $(($(now_ms) - t0)) ms after the kill (tool start-ups included); new leader's log: $(grep -h 'Completed transition to Leader' "$(node_log "$new")" | tail -n1 | cut -c1-25)"
  t2="$(drill_topic s8b)"
  node_kill 1
  await "$t" 30000 leader-in=2,3 isr-lacks=4 >&2
  await "$t2" 30000 leader-in=2,3 isr-lacks=4 >&2
  node_up 1
  node_up "$old"
  await "$t" 60000 isr=1,2,3 >&2
}

# S9: exactly-once through a promoted observer: committed and aborted transactions written while
# 4 is an observer, read with read_committed from 4 once it leads, equal what the leader served.
scenario_s9() {
  local t out a b
  t="$(drill_topic s9)"
  # One plain record first: it waits out a leader that has not yet applied the new partition
  # (NOT_LEADER_OR_FOLLOWER right after a restart), which a transaction would not survive.
  produce "$t" 1 all warmup >/dev/null
  out="$(dc txn "$t" "drill-s9-$t" 20 50)" || fail "transactional producer failed: $out"
  note "S9: $out"
  a="$(dc consume "$t" read_committed "$SCENARIO_DIR/from-leader.txt")" || fail "read_committed from the leader failed"
  b="$(dc consume "$t" read_uncommitted)" || fail "read_uncommitted from the leader failed"
  note "S9: leader 1, read_committed: $a; read_uncommitted: $b"
  [[ "$a" == count=501\ * ]] || fail "read_committed from the leader gave $a, expected 500 committed records + 1 plain"
  [[ "$b" == count=1001\ * ]] || fail "read_uncommitted from the leader gave $b, expected 1001 records"
  grep -q ' a-' "$SCENARIO_DIR/from-leader.txt" && fail "read_committed returned aborted records"
  set_observers_all ""
  await "$t" 30000 isr=1,2,3,4 >&2
  out="$(dc elect "$t" preferred)" || fail "preferred election of the promoted observer failed: $out"
  await "$t" 10000 leader=4 >&2
  b="$(dc consume "$t" read_committed "$SCENARIO_DIR/from-observer.txt")" || fail "read_committed from the observer failed"
  note "S9: leader 4 (promoted observer), read_committed: $b"
  [[ "$a" == "$b" ]] || fail "read_committed differs: leader [$a] vs promoted observer [$b]"
  cmp -s "$SCENARIO_DIR/from-leader.txt" "$SCENARIO_DIR/from-observer.txt" || fail "records differ (see $SCENARIO_DIR)"
}
