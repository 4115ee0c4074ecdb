# shellcheck shell=bash
# S1-S5 of the Kafka failure suite (sourced by run.sh; each runs in its own subshell with set -e,
# restore_default runs afterwards). Topic layout: replicas 4:1:2:3, broker 4 the observer, so the
# initial ISR is 1,2,3 and the leader 1. A killed node is `kafka.sh stop`ped (its JVM SIGKILLed,
# its pod kept from coming back) and comes back only at node_up.

# A fresh topic in the default layout: the observer is listed first yet neither leads nor joins.
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
drill_topic() {
  local t
  t="$(new_topic "$1")"
  echo "$t" >> "$SCENARIO_DIR/topics"
  create_topic "$t" 4:1:2:3
  await "$t" 20000 leader=1 isr=1,2,3 >&2
  echo "$t"
}

# never_in_watch <regex> <what>: fails if any watch sample matches, and when the watch wrote no
# sample at all ("never" would then be unproven).
never_in_watch() {
  local hit
  [[ -s "$WATCH_OUT" ]] || fail "$2: cannot be checked, the watch wrote no sample ($WATCH_OUT)"
  hit="$(grep -E -m1 -- "$1" "$WATCH_OUT")" || (($? == 1)) || fail "$2: cannot be checked, grep failed on $WATCH_OUT"
  [[ -z "$hit" ]] || fail "$2: $hit"
}

# S1: kill -9 the leader (and keep it down): a primary becomes leader, never the observer; no
# acknowledged write lost.
scenario_s1() {
  local t t0 line
  t="$(drill_topic s1)"
  start_watch "$t"
  produce "$t" 1000 all pre >/dev/null
  t0="$(now_ms)"
  node_stop 1
  line="$(await "$t" 30000 leader-in=2,3)"
  log "S1: leader moved to a primary $(( ${line%% *} - t0 )) ms after the stop began (cordon, kill -9): ${line#* }"
  produce "$t" 1000 all post >/dev/null
  sleep 1
  stop_watch
  never_in_watch ' leader=4 ' "the observer was leader"
  never_in_watch ' isr=[0-9,]*4' "the observer was in the ISR"
  node_up 1
  await "$t" 60000 isr=1,2,3 >&2
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(consume_count "$t" read_uncommitted)" == 2000 ]] || fail "records lost: $(dc consume "$t" read_uncommitted)"
}

# S2: kill an ISR follower: writes continue (acks=all, min ISR 2 still met), it rejoins after restart.
scenario_s2() {
  local t
  t="$(drill_topic s2)"
  produce "$t" 500 all pre >/dev/null
  node_stop 3
  produce "$t" 1000 all during >/dev/null
  await "$t" 30000 leader=1 isr=1,2 >&2
  node_up 3
  await "$t" 60000 leader=1 isr=1,2,3 >&2
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(consume_count "$t" read_uncommitted)" == 1500 ]] || fail "records lost: $(dc consume "$t" read_uncommitted)"
}

segments_md5() { # segments_md5 <node> <topic>: "<file> <md5>" of every log segment of partition 0
  local d
  d="$(node_data "$1")/$2-0"   # the node's local PersistentVolume on the host
  [[ -d "$d" ]] || return 0
  (cd "$d" && md5sum -- *.log 2>/dev/null | awk '{print $2, $1}')
}
# same_segments <topic>: the leader 1 and the observer hold the same segments of partition 0, and
# some (two empty answers, a volume not found or not yet written, are not "the same").
same_segments() {
  local a b
  a="$(segments_md5 1 "$1")" && b="$(segments_md5 "$OBSERVER" "$1")" && [[ -n "$a" && "$a" == "$b" ]]
}

# S3: kill the observer: no write impact; after its restart its segments equal the leader's (md5).
scenario_s3() {
  local t before during deadline
  t="$(drill_topic s3)"
  start_watch "$t"
  before="$(produce "$t" 2000 all pre)"
  node_stop "$OBSERVER"
  during="$(produce "$t" 2000 all during)"
  log "S3: 2000 acks=all records took ${before##*ms=} before, ${during##*ms=} with the observer dead"
  node_up "$OBSERVER"
  stop_watch
  never_in_watch ' isr=[0-9,]*4' "the observer was in the ISR"
  never_in_watch ' isr=([0-9]|[0-9],[0-9]) ' "the ISR shrank while the observer was dead"
  deadline=$((SECONDS + 60))
  until same_segments "$t"; do
    # shellcheck disable=SC2312 # only the text of the failure being reported
    ((SECONDS < deadline)) ||
      fail "segments differ 60 s after the restart: leader [$(segments_md5 1 "$t" | tr '\n' ' ')] observer [$(segments_md5 "$OBSERVER" "$t" | tr '\n' ' ')]"
    sleep 1
  done
  # shellcheck disable=SC2312 # message text only
  log "S3: leader and observer segments identical: $(segments_md5 1 "$t" | tr '\n' ' ')"
}

# S4: kill every primary: Leader none, even with an unclean election; promote the observer and
# elect it (unclean: it is not in the ISR), it serves reads and writes.
scenario_s4() {
  local t deadline out n
  t="$(drill_topic s4)"
  produce "$t" 1000 all pre >/dev/null
  deadline=$((SECONDS + 30))
  until same_segments "$t"; do
    ((SECONDS < deadline)) || fail "the observer did not catch up before the kill"
    sleep 0.5
  done
  node_stop 1 && node_stop 2 && node_stop 3
  await "$t" 30000 leader=none >&2
  out="$(dc elect "$t" unclean || true)"
  log "S4: unclean election with the observer not promoted: $out"
  [[ "$out" == error=* ]] || fail "an unclean election succeeded while broker 4 was an observer: $out"
  sleep 2
  await "$t" 1000 leader=none >&2
  # Brokers 1-3 are stopped: only the controllers' and broker 4's files change now; their new
  # pods mount the promoted lists when they start.
  set_observers_all ""
  out="$(dc elect "$t" unclean)" || fail "the unclean election did not elect the promoted observer: $out"
  await "$t" 10000 leader=4 >&2
  # One live copy left: Kafka 4 (KIP-966) advances the HW only while the ISR holds
  # min.insync.replicas members, so with min ISR 2 the survivor can neither commit writes nor
  # answer a consumer's ListOffsets. Lowering the topic's min ISR to 1 is the operator's part of
  # this disaster recovery; then the promoted observer serves everything.
  dc config "$t" min.insync.replicas 1 >&2 || fail "cannot lower min.insync.replicas of $t"
  produce "$t" 200 all after >/dev/null
  n="$(consume_count "$t" read_uncommitted)"
  [[ "$n" == 1200 ]] || fail "the promoted observer served $n records, expected 1200"
  node_up 1 2 3
  await "$t" 60000 leader=4 isr=1,2,3,4 >&2
}

# S5: promote a lagging observer: it joins the ISR only once caught up, the HW never goes back.
scenario_s5() {
  local t size_at_promotion lag_at_promotion join hw_back
  t="$(drill_topic s5)"
  node_stop "$OBSERVER"
  produce "$t" 60000 all backlog >/dev/null
  start_watch "$t" 1 "$OBSERVER"
  wait_watch_samples 2
  set_observers_all ""
  size_at_promotion="$(tail -n1 "$WATCH_OUT" | sed -n 's/.* size\.1=\([0-9]*\).*/\1/p')"
  # Stopped before the backlog was written: its own segments on its volume are what it has.
  # shellcheck disable=SC2312 # no segment yet is 0 bytes of lag: the check below then fails as not lagging
  lag_at_promotion="$(cat "$(node_data "$OBSERVER")/$t-0/"*.log 2>/dev/null | wc -c)"
  local t_start line
  t_start="$(now_ms)"
  KAFKA_START_WAIT=0 node_up "$OBSERVER"
  produce "$t" 5000 all trickle >/dev/null &
  local producer=$!
  line="$(await "$t" 90000 isr=1,2,3,4)"
  log "S5: the promoted observer joined the ISR $(( ${line%% *} - t_start )) ms after its pod was let start (scheduling, container and JVM start-up included)"
  wait "$producer" || fail "acks=all writes failed while the observer caught up"
  sleep 1
  stop_watch
  # The first sample that shows 4 in the ISR: its log already holds everything the leader had
  # when it was promoted.
  join="$(grep -m1 -E ' isr=[0-9,]*4' "$WATCH_OUT" || true)"
  [[ -n "$join" ]] || fail "no watch sample shows the observer in the ISR"
  local size4="${join##* size.4=}"
  size4="${size4%% *}"
  log "S5: leader size at promotion $size_at_promotion, observer size when it joined: $size4 ($join)"
  [[ "$size4" =~ ^[0-9]+$ && "$size_at_promotion" =~ ^[0-9]+$ ]] || fail "no partition sizes sampled ($join)"
  ((size4 >= size_at_promotion)) || fail "the observer joined the ISR with $size4 bytes, the leader had $size_at_promotion at promotion"
  ((lag_at_promotion < size_at_promotion)) ||
    fail "the observer was not lagging at promotion ($lag_at_promotion of $size_at_promotion bytes)"
  hw_back="$(awk '{for(i=1;i<=NF;i++) if ($i ~ /^hw=[0-9]+$/) {split($i,a,"="); if (a[2] < last) {print $0; exit} last=a[2]}}' "$WATCH_OUT")"
  [[ -z "$hw_back" ]] || fail "the high watermark went back: $hw_back"
  # shellcheck disable=SC2312 # message text only
  log "S5: $(wc -l < "$WATCH_OUT") samples, HW monotonic from $(grep -o 'hw=[0-9]*' "$WATCH_OUT" | head -n1) to $(grep -o 'hw=[0-9]*' "$WATCH_OUT" | tail -n1)"
}
