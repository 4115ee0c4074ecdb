# shellcheck shell=bash
# S6-S10 of the Kafka failure suite (sourced by run.sh after scenarios-a.sh, which defines
# drill_topic and never_in_watch).

# Log marks are "<path> <inode> <size>" of a node's container log (lib.sh log_mark).
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
# shellcheck disable=SC2312 # log_mark never fails (it prints '- 0 0' for a missing log)
controller_marks() { local id; for id in "${CONTROLLERS[@]}"; do echo "$id $(log_mark "$id")"; done; }
controllers_log_since() { # controllers_log_since <marks> <regex>
  local id mark
  while read -r id mark; do log_since "$id" "$mark" "$2" | sed "s/^/[$id] /" || true; done <<< "$1"
}

# write_projected <node> <content>: replaces the content of the node's projected observer.ids in
# place (a rename inside the kubelet's current ..<timestamp> directory, atomic for the reader).
write_projected() {
  local dir
  dir="$(obs_dir "$1")"
  write_projected_in "$dir" "$2" "node $1"
}
# write_projected_in <volume dir> <content> <what>: the same, into a directory looked up before.
write_projected_in() {
  [[ -d "$1/..data/" ]] || fail "$3 has no projected observer-ids volume"
  printf '%s' "$2" > "$1/..data/.observer.ids.drill"
  chmod 644 "$1/..data/.observer.ids.drill"
  mv -f "$1/..data/.observer.ids.drill" "$1/..data/observer.ids"
}

# S6: the lists disagree (brokers promoted, controllers not): the leader proposes the observer,
# the controller rejects it with INELIGIBLE_REPLICA, the ISR stays; aligning the controllers heals.
scenario_s6() {
  local t marks leader_mark rejected
  t="$(drill_topic s6)"
  produce "$t" 500 all pre >/dev/null
  # shellcheck disable=SC2312 # log_mark never fails (it prints '- 0 0' for a missing log)
  marks="$(controller_marks)" leader_mark="$(log_mark 1)"
  start_watch "$t"
  # shellcheck disable=SC2312 # owning_observerset never fails (it prints nothing when unsure)
  if [[ -z "$(owning_observerset)" ]]; then
    # Through the broker ConfigMap only: a half-applied promotion.
    set_observers broker ""
  else
    # The operator owning the ConfigMaps never writes brokers before controllers: the
    # disagreement is made on the brokers' projected files, the failure this scenario simulates
    # (the kubelet puts the ConfigMap's content back at its next sync of the pod, the heal below
    # through the ObserverSet promotes both roles anyway).
    local id
    for id in "${BROKERS[@]}"; do write_projected "$id" ""; done
  fi
  produce "$t" 500 all during >/dev/null
  sleep 6
  stop_watch
  never_in_watch ' isr=[0-9,]*4' "the ISR took the observer while the controllers still list it"
  rejected="$(controllers_log_since "$marks" "Rejecting AlterPartition request from node 1 for $t-0 .*ineligible replicas \[4 \(observer\)\]" | head -n1)"
  [[ -n "$rejected" ]] || fail "no controller logged the INELIGIBLE_REPLICA rejection of observer 4 for $t-0"
  # shellcheck disable=SC2312 # message text only
  log "S6: controller: $(cri_strip <<< "$rejected")"
  log "S6: leader: $(log_since 1 "$leader_mark" "INELIGIBLE_REPLICA" | head -n1 | cri_strip || true)"
  log_since 1 "$leader_mark" "$t-0.*INELIGIBLE_REPLICA|INELIGIBLE_REPLICA.*$t" >/dev/null ||
    fail "the leader (broker 1) did not log the controller's INELIGIBLE_REPLICA answer for $t-0"
  set_observers controller ""
  await "$t" 30000 isr=1,2,3,4 >&2
}

# S7: the file of the nodes that decide (the leader broker and the active controller) made
# unreadable (chmod 000), garbage, then deleted. These are edits of the projected file itself on
# the host: the failure simulated is a broken volume, which no ConfigMap change can produce. The
# pods run Kafka as uid 1000 with every capability dropped (examples/kafka/), so chmod 000 is
# unreadable to it. The kubelet re-projects a file whose content differs from the ConfigMap at its
# next sync of the pod (garbage, deletion; not a mode change): when that undoes a break before the
# node has read it (the node's ..data link moved), the break is made once more.
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
# shellcheck disable=SC2312 # obs_dir empty gives a path that does not exist: chmod fails, and so does the step
s7_chmod() { chmod 000 "$(obs_dir "$1")/..data/observer.ids"; }
s7_garbage() { write_projected "$1" $'garbage\nnot-an-id\n'; }
# shellcheck disable=SC2312 # obs_file of an unknown dir gives a path that does not exist: rm fails, and so does the step
s7_delete() { rm "$(obs_file "$1")"; }
# s7_break <break function> <nodes...>: marks each node's log, remembers its ..data target, breaks.
s7_break() {
  local how="$1" id dir
  shift
  for id in "$@"; do
    dir="$(obs_dir "$id")"
    # shellcheck disable=SC2312 # log_mark never fails; an unreadable ..data is recorded as '' and compared later
    MARK[$id]="$(log_mark "$id")" DATA[$id]="$(readlink "$dir/..data")"
    "$how" "$id"
  done
}
# s7_seen <node> <regex> <tries>: the node logged it after its MARK (polled every 0.2 s).
s7_seen() {
  local i
  for ((i = 0; i < $3; i++)); do
    log_since "$1" "${MARK[$1]}" "$2" >/dev/null && return 0
    sleep 0.2
  done
  return 1
}
# s7_check <what> <break function or :> <topic> <regex expected in each node's log> <prefix> <nodes...>
s7_check() {
  local what="$1" how="$2" t="$3" re="$4" prefix="$5" id
  shift 5
  for id in "$@"; do
    if ! s7_seen "$id" "$re" 30; then
      # shellcheck disable=SC2312 # an unreadable ..data counts as re-projected: the file is broken again and the wait retried
      [[ "$how" != : && "$(readlink "$(obs_dir "$id")/..data")" != "${DATA[$id]}" ]] ||
        fail "$what: node $id did not log /$re/"
      log "S7 $what: the kubelet re-projected node $id's volume before the node read the broken file: breaking it again"
      s7_break "$how" "$id"
      s7_seen "$id" "$re" 30 || fail "$what: node $id did not log /$re/ (broken twice)"
    fi
    # shellcheck disable=SC2312 # message text only
    log "S7 $what: node $id: $(log_since "$id" "${MARK[$id]}" "$re" | tail -n1 | cri_strip)"
    node_running "$id" || fail "$what: node $id died"
  done
  produce "$t" 300 all "$prefix" >/dev/null
  sleep 1
  await "$t" 1000 leader=1 isr=1,2,3 >&2
}
s7_wait_log() { # s7_wait_log <what> <regex> <nodes...>: each node logs it after its MARK (8 s)
  local what="$1" re="$2" id
  shift 2
  for id in "$@"; do
    s7_seen "$id" "$re" 40 || fail "$what: node $id did not log /$re/ within 8 s"
  done
}
scenario_s7() {
  local t ctl nodes
  declare -gA MARK DATA
  t="$(drill_topic s7)"
  ctl="$(current_active_controller)"
  [[ -n "$ctl" ]] || fail "no active controller within 30 s (the quorum tool's errors: $SCENARIO_DIR/quorum-tool.err)"
  nodes=(1 "$ctl")
  log "S7: breaking the files of broker 1 (leader) and controller $ctl (active)"
  # Each recovery is looked for after the break's mark: if the kubelet repaired the file before
  # s7_restore did, the node logged its recovery then.
  s7_break s7_chmod "${nodes[@]}"
  s7_check "chmod 000" s7_chmod "$t" "cannot use .*AccessDenied.*keeping the last value \[4\]" unreadable "${nodes[@]}"
  s7_restore "${nodes[@]}"
  s7_wait_log "readable again" "observer ids: .* is usable again" "${nodes[@]}"
  s7_break s7_garbage "${nodes[@]}"
  s7_check "garbage" s7_garbage "$t" "cannot use .*has tokens but not one integer.*keeping the last value \[4\]" garbage "${nodes[@]}"
  s7_restore "${nodes[@]}"
  s7_wait_log "valid again" "observer ids: .* is usable again" "${nodes[@]}"
  s7_break s7_delete "${nodes[@]}"
  # Missing file: the contract falls back to $KAFKA_OBSERVER_BROKER_IDS (the pods set 4).
  s7_check "deleted" s7_delete "$t" "observer ids changed: before=\[4\] after=\[4\] .*source=env:KAFKA_OBSERVER_BROKER_IDS" deleted "${nodes[@]}"
  s7_restore "${nodes[@]}"
  s7_check "restored" : "$t" "observer ids changed: before=\[4\] after=\[4\] .*source=file:" restored "${nodes[@]}"
}

# S8: kill -9 the active controller (kept down): the quorum fails over and the new active
# controller still excludes the observer (initial ISR of a new topic, election after the leader's
# death).
S8_SESSION_WAIT_S=7 # broker.session.timeout.ms of examples/kafka/ plus 1 s
scenario_s8() {
  local t t2 old new t0 deadline
  t="$(drill_topic s8)"
  old="$(current_active_controller)"
  [[ -n "$old" ]] || fail "no active controller within 30 s (the quorum tool's errors: $SCENARIO_DIR/quorum-tool.err)"
  t0="$(now_ms)"
  node_stop "$old"
  deadline=$((SECONDS + 60))
  while new="$(active_controller)"; [[ -z "$new" || "$new" == "$old" ]]; do
    ((SECONDS < deadline)) || fail "no new active controller 60 s after killing $old"
    sleep 0.2
  done
  # shellcheck disable=SC2312 # message text only
  log "S8: active controller $old -> $new seen $(($(now_ms) - t0)) ms after the kill (tool start-ups included); new leader's log: $(grep -h 'Completed transition to Leader' "$(node_log "$new")" | tail -n1 | cri_strip | cut -c1-25)"
  # A broker whose heartbeat channel still waits on the dead controller's address (an unanswered
  # SYN, up to its 10-30 s connection setup timeout) is fenced by the new controller once
  # broker.session.timeout.ms (6 s) has passed; a topic created then gets that broker out of its
  # ISR and maybe another leader (CI of 2026-12-02: s8b never reached leader=1 in 20 s). So the
  # second topic waits until every broker is unfenced at least one session timeout after the new
  # controller was seen: each of them has then heartbeated to it.
  sleep "$S8_SESSION_WAIT_S"
  dc brokers 4 60000 >&2 || fail "not every broker unfenced by the new controller $new within 60 s"
  # shellcheck disable=SC2312 # message text only
  log "S8: 4 brokers unfenced $(($(now_ms) - t0)) ms after the kill"
  t2="$(drill_topic s8b)"
  node_stop 1
  await "$t" 30000 leader-in=2,3 isr-lacks=4 >&2
  await "$t2" 30000 leader-in=2,3 isr-lacks=4 >&2
  node_up 1 "$old"
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
  log "S9: $out"
  a="$(dc consume "$t" read_committed "$SCENARIO_DIR/from-leader.txt")" || fail "read_committed from the leader failed"
  b="$(dc consume "$t" read_uncommitted)" || fail "read_uncommitted from the leader failed"
  log "S9: leader 1, read_committed: $a; read_uncommitted: $b"
  [[ "$a" == count=501\ * ]] || fail "read_committed from the leader gave $a, expected 500 committed records + 1 plain"
  [[ "$b" == count=1001\ * ]] || fail "read_uncommitted from the leader gave $b, expected 1001 records"
  grep -q ' a-' "$SCENARIO_DIR/from-leader.txt" && fail "read_committed returned aborted records"
  set_observers_all ""
  await "$t" 30000 isr=1,2,3,4 >&2
  out="$(dc elect "$t" preferred)" || fail "preferred election of the promoted observer failed: $out"
  await "$t" 10000 leader=4 >&2
  b="$(dc consume "$t" read_committed "$SCENARIO_DIR/from-observer.txt")" || fail "read_committed from the observer failed"
  log "S9: leader 4 (promoted observer), read_committed: $b"
  [[ "$a" == "$b" ]] || fail "read_committed differs: leader [$a] vs promoted observer [$b]"
  cmp -s "$SCENARIO_DIR/from-leader.txt" "$SCENARIO_DIR/from-observer.txt" || fail "records differ (see $SCENARIO_DIR)"
}

# S10: the high-watermark gate. Broker 4, promoted and in the ISR, is paused (SIGSTOP: it neither
# fetches nor heartbeats) and the leader alone is told it is an observer again (its projected
# file, as in S6). acks=all records sent then must be acknowledged while the paused 4 is still in
# the ISR: the leader's HW no longer waits for an observer, even one the ISR still lists. Without
# the gate the HW cannot pass the paused replica's log end, so no record can be acknowledged
# before 4 leaves the ISR (its shrink by isr-expiration, or its fencing after the session
# timeout): the check is an order of events, not a timing. Proof: a watch sample (every 100 ms)
# taken after the last acknowledgement still shows 4 in the ISR (a paused observer cannot
# rejoin, so it was in the ISR at the acknowledgement).
# The leader's isr-expiration run shrinks a demoted observer out at once, so the window between
# the demotion and that run is all the attempt has: every lookup (the observer's JVM, the
# leader's volume and log) is made before it, and the demotion is written just after a run
# (wait_after_isr_expiration). An attempt where 4 left the ISR first proves nothing either way
# and is repeated, at most 3 times.
scenario_s10() {
  local t attempt mark out acked_at i proof producer pid dir lpath loff lag_ms written loaded
  t="$(new_topic s10)"
  echo "$t" >> "$SCENARIO_DIR/topics"
  lag_ms="$(broker_env KAFKA_CFG_REPLICA_LAG_TIME_MAX_MS 30000)"
  # 1 leads (first in the list, so no preferred election moves it to the promoted 4).
  create_topic "$t" 1:2:3:4
  await "$t" 20000 leader=1 isr=1,2,3 >&2
  set_observers_all ""
  for attempt in 1 2 3; do
    await "$t" 60000 leader=1 isr=1,2,3,4 >&2
    produce "$t" 100 all "pre$attempt" >/dev/null
    WATCH_PERIOD_MS=100 start_watch "$t"
    rm -f "$SCENARIO_DIR/ready" "$SCENARIO_DIR/go"
    dc produce-when "$t" 20 "paused$attempt" "$SCENARIO_DIR/ready" "$SCENARIO_DIR/go" > "$SCENARIO_DIR/produce.out" &
    producer=$!
    for ((i = 0; i < 300; i++)); do [[ -e "$SCENARIO_DIR/ready" ]] && break; sleep 0.1; done
    [[ -e "$SCENARIO_DIR/ready" ]] || fail "the producer did not get its warm-up record acknowledged within 30 s"
    pid="$(bash "$KAFKA_SH" jvm-pid "$OBSERVER")" || fail "no JVM for node $OBSERVER"
    dir="$(obs_dir 1)"
    mark="$(log_mark 1)"
    read -r lpath _ loff <<< "$mark"
    [[ -f "$lpath" ]] || fail "the leader (1) has no container log"
    wait_after_isr_expiration "$lpath" "$((lag_ms / 2))"
    pause_pid "$pid" "node $OBSERVER"
    write_projected_in "$dir" "$OBSERVER" "node 1"
    written="$(now_ms)"
    loaded=""
    while [[ -z "$loaded" ]]; do
      tail -c +"$((loff + 1))" "$lpath" > "$SCENARIO_DIR/leader.log"
      grep -Eq "observer ids .*after=\[$OBSERVER\]" "$SCENARIO_DIR/leader.log" && loaded="$(now_ms)" && break
      i="$(now_ms)"
      ((i - written < 5000)) || fail "the leader (1) did not load [$OBSERVER] within 5 s of its file changing"
      sleep 0.02
    done
    touch "$SCENARIO_DIR/go"
    # shellcheck disable=SC2312 # only the text of the failure being reported
    wait "$producer" || fail "acks=all records with the paused observer demoted on the leader: $(cat "$SCENARIO_DIR/produce.out")"
    out="$(cat "$SCENARIO_DIR/produce.out")"
    acked_at="${out##*acked_at=}" acked_at="${acked_at%% *}"
    # The watch's next sample (a loaded machine can delay it well past its 100 ms period).
    for ((i = 0; i < 100; i++)); do
      awk -v t="$acked_at" '$1 >= t { found = 1 } END { exit !found }' "$WATCH_OUT" && break
      sleep 0.1
    done
    stop_watch
    ((i < 100)) || fail "the watch wrote no sample within 10 s of the acknowledgement"
    proof="$(awk -v t="$acked_at" -v o="$OBSERVER" '$1 >= t && $0 ~ (" isr=([0-9]+,)*" o "[ ,]") { print; exit }' "$WATCH_OUT")"
    if [[ -n "$proof" ]]; then
      log "S10: 20 acks=all records acknowledged at $acked_at, $((acked_at - written)) ms after the demotion was written ($((loaded - written)) ms to the leader's load), while the paused $OBSERVER was in the ISR (attempt $attempt; sample after: $proof)"
      return 0
    fi
    log "S10: $OBSERVER left the ISR before the records were acknowledged at $acked_at, $((acked_at - written)) ms after the demotion was written (attempt $attempt): inconclusive, again"
    resume_paused
    write_projected 1 ""
  done
  fail "inconclusive 3 times: $OBSERVER left the ISR before acks=all records were acknowledged (without the HW gate that always happens)"
}

# wait_after_isr_expiration <leader log> <period ms>: sleeps until 150 ms after the leader's next
# isr-expiration run. Kafka schedules that task at a fixed rate from the broker's start, so its
# phase is the CRI timestamp of the last "Shrinking ISR" line in the log (any partition's run).
# Without such a line it returns at once, and the attempt races an unknown phase.
wait_after_isr_expiration() {
  local line last now next
  line="$(awk '/Shrinking ISR from/ { l = $0 } END { print l }' "$1")"
  if [[ -z "$line" ]]; then
    log "S10: no isr-expiration run in the leader's log yet: the demotion is written without waiting for one"
    return 0
  fi
  last="$(date -d "${line%% *}" +%s%3N)" || fail "not a CRI timestamp: ${line%% *}"
  now="$(now_ms)"
  next=$((last + ((now - last) / $2 + 1) * $2 + 150))
  log "S10: the demotion waits $((next - now)) ms, until 150 ms after the leader's next isr-expiration run (every $2 ms, the last at $last)"
  next="$(awk -v d="$((next - now))" 'BEGIN { printf "%.3f", d / 1000 }')"
  sleep "$next"
}
