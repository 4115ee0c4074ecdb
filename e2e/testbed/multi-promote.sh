#!/usr/bin/env bash
# MC1-MC4 on the multi-cluster bed (docs/multi-cluster.md, "Drills"). MC1: the member `east` lost whole
# (its apiserver, node and every process SIGKILLed at once, its addresses dropped: `multi.sh
# lose east`), the operator's leader with it, under policy UnderMinIsr. Per run:
#   1. one operator per member as the chart runs them, east's started first so that it leads;
#   2. examples/multi-cluster/observerset.yaml applied in every member with the single-cluster
#      example's automatic policy (UnderMinIsr, scans every 1 s, two confirmations, autoDemote
#      after 30 s); every copy Ready, every member's lists "4";
#   3. a topic with the layout of the docs (replicas 1,2,3,4 / 2,1,3,4 / 3,1,2,4, min ISR 2, 4 the
#      observer) and an acks=all idempotent producer at 20 records/s;
#   4. east lost: west or tie takes the Leases, its engine promotes 4 (status.autoPromotions on a
#      majority of the copies), the lists of west and tie go out controllers first, 4 joins the
#      ISR of every partition, writes resume;
#   5. east returns: its lists and copy brought to the current state, then the engine demotes 4
#      once east's brokers are back in the ISR (autoDemote), every copy Ready with the lists "4"
#      in every member;
#   6. every acknowledged record read back exactly once (the operator drills' accounting).
# Then once, with the same set, topic layout and producer, the losses that need no promotion:
#   MC3: tie lost whole (a KRaft voter, no broker): for 30 s (KOO_QUIET_S) no list of east or
#        west changes, nothing is promoted, writes go on, east's copy says MembersReachable
#        False naming tie (the leader's next pass sees it: over members passes are at most 10 s
#        apart; waited for up to 50 s from the loss, the time printed);
#   MC2: west lost whole (brokers 3 and 4, 4 the observer): the partitions keep 1 and 2 in
#        their ISR, at min ISR: for 30 s no list changes, nothing is promoted, writes resume
#        once Kafka fences west's brokers, and east's copy says MembersReachable False naming
#        west and ObserversAvailable False naming 4; each member returns and every copy is
#        Ready with the lists 4 again.
#   MC4: the link between east and west cut both ways (`multi.sh cut east west`: their nodes,
#        pods, apiservers and operator replicas no longer reach each other; tie reaches both),
#        the leader in east, the active controller outside west: for 30 s east alone leads, no
#        list changes, nothing is promoted, writes go on, east's copy says MembersReachable
#        False naming west; healed, every copy Ready with the lists 4.
# Prints each run's timeline from the kill (ms): new leader, 4 promoted by the engine, first
# list written, 4 in the ISR of every partition, writes resumed (the end of the longest gap
# between acknowledgements), against the issue's bound (the brokers' session timeout, 6 s on
# the bed, + that run's leadership hand-over + 2 s). The bound is reported, not asserted (a
# shared machine's timing); a lost or duplicated record, a promotion that never comes or a
# member left behind fails the drill.
# Needs the multi bed up (`multi.sh up`) and `make build`. Usage: multi-promote.sh [RUNS] (1).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
runs="${1:-1}"
work="$(mktemp -d)"
# The operator drills' producer, ISR sampler and accounting, working in this run's directory;
# sourced first, so that multi-operators.sh's operator_log (a host process's log) wins.
export DRILL_WORK="$work/drill"
mkdir -p "$DRILL_WORK"
# shellcheck source=../drills/operator/lib.sh
source "$root/e2e/drills/operator/lib.sh"
source "$here/multi-operators.sh"
set_file="$root/examples/multi-cluster/observerset.yaml"
lost=""
log_tag="multi-promote" log_time="%T"
session_timeout_ms=6000 # KAFKA_CFG_BROKER_SESSION_TIMEOUT_MS of examples/kafka

clean_up() {
  if [[ -n "${SCENARIO_DIR:-}" ]]; then
    touch "$SCENARIO_DIR/stream.stop" "$SCENARIO_DIR/isr.stop" 2>/dev/null || true
  fi
  if [[ -n "${KOO_KEEP:-}" ]]; then log "KOO_KEEP: operators left running, nothing deleted (work dir $work)"; return; fi
  if [[ -n "$lost" ]]; then bash "$here/multi.sh" return "$lost" >/dev/null 2>&1 || true; fi
  if [[ -n "${cut_open:-}" ]]; then bash "$here/multi.sh" heal east west >/dev/null 2>&1 || true; fi
  delete_sets
  members_clean_up
}
trap clean_up EXIT
delete_sets() {
  local m
  for m in "${MEMBERS[@]}"; do
    kc "$m" -n "$kafka_ns" delete observerset kafka --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  sleep 3 # the finalizer is on the leader's own copy: a moment to release it
  # A copy whose finalizer a former leader set (east's, after the leader moved on) is released by
  # no one: the operators watch their own member's copy only (docs/multi-cluster.md, "Not built").
  for m in "${MEMBERS[@]}"; do
    if kc "$m" -n "$kafka_ns" get observerset kafka >/dev/null 2>&1; then
      kc "$m" -n "$kafka_ns" patch observerset kafka --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    fi
  done
}

copy_field() { kc "$1" -n "$kafka_ns" get observerset kafka -o json | jq -r "$2"; }
list() { # MEMBER ROLE: "<ids>" of that member's ConfigMap
  kc "$1" -n "$kafka_ns" get configmap "kafka-observers-$2" -o json |
    jq -r '(.data["observer.ids"] // "") | split("\n") | map(select(length > 0 and (startswith("#") | not))) | join(",")'
}
lists_are() { # IDS: every member's lists ("4" or "")
  local m role got
  for m in "${MEMBERS[@]}"; do
    for role in controller broker; do
      [[ "$m" != tie || "$role" != broker ]] || continue
      got="$(list "$m" "$role")" || return 1
      [[ "$got" == "$1" ]] || return 1
    done
  done
}
every_copy_ready() {
  local m phase
  for m in "${MEMBERS[@]}"; do
    phase="$(copy_field "$m" '.status.phase // ""')" || return 1
    [[ "$phase" == Ready ]] || return 1
  done
}
auto_promoted_in() { # MEMBER: ids in that copy's status.autoPromotions
  copy_field "$1" '[.status.autoPromotions[]?.nodeId] | map(tostring) | join(",")'
}
settled() { # every copy Ready, the lists 4 everywhere, nothing promoted in west's copy
  local auto
  auto="$(auto_promoted_in west)" || return 1
  [[ -z "$auto" ]] && every_copy_ready && lists_are 4
}
# ms_of ISO: epoch milliseconds of an RFC 3339 timestamp (the operators' JSON logs).
ms_of() { date -d "$1" +%s%3N; }
# log_ms MEMBER JQ_FILTER AFTER_MS: the time of the first line of MEMBER's operator log at or
# after AFTER_MS that the filter selects, in epoch ms; nothing when there is none.
log_ms() {
  local ts line stamps file
  file="$(operator_log "$1")"
  stamps="$(jq -r "select($2) | .timestamp" "$file" 2>/dev/null)" || return 0
  while IFS= read -r ts; do
    [[ -n "$ts" ]] || continue
    line="$(ms_of "$ts")" || continue
    if ((line >= $3)); then echo "$line"; return 0; fi
  done <<<"$stamps"
}
# longest_gap ACKED_LOG FROM_MS: "<gap_ms> <end_ms>" of the longest pause between consecutive
# acknowledgements from FROM_MS on (the outage the producer saw).
longest_gap() {
  sort -n -k4 "$1" | awk -v from="$2" '$4 >= from - 1000 { if (prev != "" && $4 - prev > gap) { gap = $4 - prev; end = $4 }; prev = $4 } END { if (end == "") exit 1; print gap, end }'
}

ip_of() { kc "$1" -n "$kafka_ns" get pod "$2" -o jsonpath='{.status.podIP}'; }

# members_kubeconfig: one kubeconfig with a context per member named after it (namespace kafka),
# as a user of the three clusters keeps one; written to $work/members.kubeconfig.
members_kubeconfig() {
  local m
  for m in "${MEMBERS[@]}"; do
    kc "$m" config view --raw --minify -o json >"$work/kubeconfig-view-$m.json" || return 1
    jq --arg m "$m" '{cluster: (.clusters[0] | .name = $m), user: (.users[0] | .name = $m),
      context: {name: $m, context: {cluster: $m, user: $m, namespace: "kafka"}}}' \
      "$work/kubeconfig-view-$m.json" >"$work/kubeconfig-part-$m.json" || return 1
  done
  jq -s '{apiVersion: "v1", kind: "Config", clusters: map(.cluster), users: map(.user),
    contexts: map(.context), "current-context": "east"}' "$work"/kubeconfig-part-*.json >"$work/members.kubeconfig"
}
plugin="${KOO_PLUGIN_BIN:-$CARGO_TARGET_DIR/release/kubectl-observer}"
[[ -x "$plugin" ]] || die "no kubectl-observer binary at $plugin: make build"
# members_seen GID WANT: `kubectl observer status --context east --context west --context tie -o
# json` run under group GID (a member's host processes, lib.sh member_gid; 0 for root's, which
# reaches every member) answers, per member, WANT ("east=true west=true tie=false": which
# member's copy answered). Prints what it saw.
members_seen() {
  local rc=0 seen err
  KUBECONFIG="$work/members.kubeconfig" setpriv --regid "$1" --clear-groups "$plugin" -n "$kafka_ns" \
    status --context east --context west --context tie -o json >"$work/members-seen.json" 2>"$work/members-seen.err" || rc=$?
  err="$(<"$work/members-seen.err")"
  [[ -s "$work/members-seen.json" ]] || die "kubectl observer status --context ... (group $1, exit $rc) printed nothing: $err"
  seen="$(jq -r '.members | map(.context + "=" + (.answered | tostring)) | join(" ")' "$work/members-seen.json")" ||
    die "kubectl observer status --context ... (group $1, exit $rc) printed no members view: $err"
  [[ "$seen" == "$2" ]] || die "kubectl observer status --context ... (group $1) saw [$seen], expected [$2]"
  echo "$seen"
}

# operators_up: one operator per member, east's first so that it takes the three Leases.
operators_up() {
  # The previous run's operator logs stay with that run's files.
  local m
  for m in east west tie; do
    if [[ -f "$east_tb/logs/operator-$m.log" ]]; then mv "$east_tb/logs/operator-$m.log" "${SCENARIO_DIR:-$work}/operator-$m.log.before"; fi
  done
  start_operator east
  leads_east() { leads east; }
  wait_for 60 "operator-east leading" leads_east
  start_operator west
  start_operator tie
  sleep 2
  local found
  found="$(leaders)"
  [[ "$found" == east ]] || die "expected operator-east alone to lead, got: ${found//$'\n'/ }"
}

# set_applied: the set with the automatic policy in every member, bootstrap the brokers' pod
# IPs (the host does not resolve the members' names); waits until every copy is Ready with the
# lists 4. Sets `servers` and exports KAFKA_BOOTSTRAP for the drill client.
set_applied() {
  local east_ip west_ip m
  east_ip="$(ip_of east kafka-broker-east-0)"
  west_ip="$(ip_of west kafka-broker-west-0)"
  servers="$east_ip:9092,$west_ip:9092"
  [[ "$servers" =~ ^[0-9.]+:9092,[0-9.]+:9092$ ]] || die "broker pod IPs not found: $servers"
  export KAFKA_BOOTSTRAP="$servers"
  sed -e "s|^    bootstrapServers: .*|    bootstrapServers: \"$servers\"|" \
    -e 's|^    policy: Manual$|    policy: UnderMinIsr\n    maxLagMessages: 1000\n    confirmations: 2\n    scanInterval: 1s\n    cooldown: 30s\n    maxConcurrentPromotions: 1\n    topics: {include: [".*"], exclude: ["^__"]}\n    autoDemote: {enabled: true, stabilizationWindow: 30s}|' \
    "$set_file" >"$work/observerset.yaml"
  grep -q "policy: UnderMinIsr" "$work/observerset.yaml" || die "the policy was not replaced in $work/observerset.yaml"
  for m in "${MEMBERS[@]}"; do kc "$m" -n "$kafka_ns" apply -f "$work/observerset.yaml" >/dev/null; done
  wait_for 120 "every copy Ready with the lists 4" settled
}

# topic_streaming NAME [ASSIGNMENT]: the docs' layout (replicas 1,2,3,4 / 2,1,3,4 / 3,1,2,4, min
# ISR 2, 4 the observer) or ASSIGNMENT, the ISR sampler and an acks=all producer at 20
# records/s, once every partition is led with 4 outside the ISR and records are acknowledged.
# Sets `topic`. An earlier run's topics go first: their partitions would trigger the policy too.
topic_streaming() {
  "$tb/bin/kafka-topics" --bootstrap-server "$servers" --delete --if-exists --topic 'mc.*' >/dev/null 2>&1 || true
  topic="$1-$(date +%s)"
  "$tb/bin/kafka-topics" --bootstrap-server "$servers" --create --topic "$topic" \
    --replica-assignment "${2:-1:2:3:4,2:1:3:4,3:1:2:4}" --config min.insync.replicas=2 >/dev/null ||
    die "cannot create topic $topic"
  start_isr_sampler "$topic"
  start_stream "$topic" 20
  local t0
  t0="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t0" "isr_none(4) && isr_min() >= 3" 60 "every partition led, 4 outside the ISR" >/dev/null
  wait_ack 0 "$t0" 60 "records acknowledged before the loss" >/dev/null
  sleep 2
}

# accounted: every acknowledged record of `topic` read back exactly once; the topic deleted.
accounted() {
  stop_stream_and_verify "$topic"
  touch "$SCENARIO_DIR/isr.stop"
  log "$1: $STREAM_ACCOUNTING"
  "$tb/bin/kafka-topics" --bootstrap-server "$servers" --delete --topic "$topic" >/dev/null 2>&1 || true
}

# lose MEMBER: `multi.sh lose` (and its operator, a process of that member); sets t_cut to the
# kill's time.
lose_member() {
  local out
  t_cut="$(now_ms)"
  out="$(bash "$here/multi.sh" lose "$1" 2>&1)" || die "multi.sh lose $1 failed: $out"
  lost="$1"
  kill_operator KILL "$1"
  [[ "$out" =~ at_ms=([0-9]+) ]] && t_cut="${BASH_REMATCH[1]}"
}
return_member() {
  bash "$here/multi.sh" return "$1" >/dev/null 2>&1 || die "multi.sh return $1 failed"
  lost=""
  start_operator "$1"
}

# controllers_first MEMBER: in MEMBER's operator log, the first brokers' list written (revision
# R) comes after the controllers' lists of revision R were written in west and tie, and every
# running controller pod acknowledged R. The acknowledgement is logged once the pass's writes are
# done (its Event is reported after them), so its line may follow the brokers' write in the log:
# only its presence is checked here; that the brokers' step waits for it is the rollout model's
# (property-tested) and multi-reconcile.sh's. Prints "revision R: ...".
controllers_first() {
  local file lines
  file="$(operator_log "$1")"
  lines="$(jq -r 'if .message == "observer list written" then "W \(.role) \(.member) \(.revision)"
    elif .reason == "RoleAcknowledged" then "A \(.message)" else empty end' "$file")" || return 1
  awk '
    $1 == "W" && $2 == "broker" && r == "" { r = $4; ok = (c[r " west"] && c[r " tie"]) }
    $1 == "W" && $2 == "controller" { c[$4 " " $3] = 1 }
    $1 == "A" && $0 ~ /every running controller pod acknowledged revision/ {
      for (i = 1; i <= NF; i++) if ($i == "revision") a[$(i + 1)] = 1 }
    END {
      if (r == "") { print "no brokers list written"; exit 1 }
      if (!ok) { printf "revision %s: a brokers list written before the controllers of west (%d) and tie (%d)\n", r, c[r " west"], c[r " tie"]; exit 1 }
      if (!a[r]) { printf "revision %s: no acknowledgement of the controllers logged\n", r; exit 1 }
      print "revision " r ": the controllers of west and tie written before any brokers list, and acknowledged"
    }' <<<"$lines"
}
members_set_up
members_kubeconfig || die "the members' kubeconfig could not be written"
results=()
for run in $(seq 1 "$runs"); do
  export SCENARIO_DIR="$DRILL_WORK/run-$run"
  mkdir -p "$SCENARIO_DIR"
  operators_up
  set_applied
  t_start="$(now_ms)"
  topic_streaming "mc1-$run"

  # east lost with the leader.
  lose_member east
  never_sample "$SCENARIO_DIR/isr.log" "$t_start" "$t_cut" 'leads(4)' "run $run: 4 led a partition while an observer, before the loss"
  new_leader() { local l; l="$(leaders)"; [[ "$l" == west || "$l" == tie ]]; }
  wait_for 60 "west or tie leading" new_leader
  t_seen_lead="$(now_ms)"
  leader="$(leaders)"
  t_isr="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_cut" "isr_all(4)" 120 "4 in the ISR of every partition")"
  t_ack="$(wait_ack 0 "$t_isr" 60 "writes after the promotion")"
  promoted="$(auto_promoted_in west)"
  [[ "$promoted" == 4 ]] || die "4 in the ISR, but west's copy shows autoPromotions [$promoted]"
  promoted_tie="$(auto_promoted_in tie)"
  [[ "$promoted_tie" == 4 ]] || die "tie's copy shows autoPromotions [$promoted_tie]: the engine's record is not on a majority"
  order="$(controllers_first "$leader")" || die "run $run: controllers first across members: $order"
  log "run $run: $order"
  t_lead="$(log_ms "$leader" '.message | startswith("acquired the leader Lease")' "$t_cut")"
  [[ -n "$t_lead" ]] || t_lead="$t_seen_lead"
  t_auto="$(log_ms "$leader" '.message | startswith("promoting observer 4")' "$t_cut")"
  t_first="$(log_ms "$leader" '.message == "observer list written"' "$t_cut")"
  gap_line="$(longest_gap "$SCENARIO_DIR/acked.log" "$t_cut")" || die "no acknowledgements to measure the outage from"
  read -r gap t_resume <<<"$gap_line"
  ((t_resume >= t_cut)) || die "the longest pause in acknowledgements ended before the loss (at $t_resume)"
  hand_over=$((t_lead - t_cut))
  bound=$((session_timeout_ms + hand_over + 2000))
  t_claim="$(log_ms "$leader" '.message == "leadership epoch claimed"' "$t_cut")"
  line="run $run: leader $leader after $((t_lead - t_cut)) ms (its reconciler's epoch claimed $((${t_claim:-$t_cut} - t_cut)) ms), 4 promoted $((${t_auto:-$t_cut} - t_cut)) ms, first list written $((${t_first:-$t_cut} - t_cut)) ms, 4 in every ISR $((t_isr - t_cut)) ms, first record acknowledged after that $((t_ack - t_cut)) ms, writes resumed $((t_resume - t_cut)) ms (longest pause $gap ms), bound $bound ms"
  log "$line"
  results+=("MC1 $line")

  # east returns; 4 is demoted by the engine once east's brokers are back.
  return_member east
  t_back="$(now_ms)"
  wait_for 240 "4 demoted again and every copy Ready with the lists 4 after east returned" settled
  t_settled="$(now_ms)"
  log "run $run: east back, 4 demoted, every member's lists 4 after $((t_settled - t_back)) ms"
  wait_ack 0 "$t_settled" 60 "writes after the demotion" >/dev/null
  sleep 2 # a few ISR samples after the demotion
  t_now="$(now_ms)"
  never_sample "$SCENARIO_DIR/isr.log" "$t_settled" "$t_now" 'leads(4)' "run $run: 4 led a partition after its demotion"
  accounted "run $run"
  delete_sets
  stop_operators
done

# MC3 and MC2, once: losses that need no promotion. tie (a KRaft voter, no broker) lost: nothing
# changes and writes go on. west (brokers 3 and 4, 4 the observer) lost: the partitions keep 1
# and 2 in their ISR, at min ISR, so nothing is promoted, and ObserversAvailable says 4 is gone.
# Each for QUIET_S seconds, sampled every second: the lists of the members left, east's copy's
# autoPromotions, and the acknowledgements (writes resume within 30 s; a pause while Kafka fences
# west's brokers is expected).
quiet_s="${KOO_QUIET_S:-30}"
export SCENARIO_DIR="$DRILL_WORK/quiet"
mkdir -p "$SCENARIO_DIR"
operators_up
set_applied
topic_streaming mc23
lists_left() { # the lists of every member but the lost one, one line
  local m role got out=""
  for m in "${MEMBERS[@]}"; do
    [[ "$m" != "$lost" ]] || continue
    for role in controller broker; do
      [[ "$m" != tie || "$role" != broker ]] || continue
      got="$(list "$m" "$role")" || got="unread"
      out+="$m/${role:0:1}=$got "
    done
  done
  echo "$out"
}
# reachable_in_east: east's copy's MembersReachable, "<status> <message>".
reachable_in_east() { copy_field east '.status.conditions[]? | select(.type=="MembersReachable") | .status + " " + .message'; }
# lost_said MEMBER: east's copy says MEMBER is unreachable (MembersReachable False naming it).
lost_said() { reachable_in_east | grep -q "^False .*$1"; }
quiet_loss() { # MC MEMBER
  local mc="$1" m="$2" before now_lists auto samples=0 t
  said_ms=""
  before="$(lists_left)"
  [[ "$before" != *unread* ]] || die "$mc: a list could not be read before the loss: $before"
  lose_member "$m"
  before="$(lists_left)"
  t=$SECONDS
  while ((SECONDS - t < quiet_s)); do
    now_lists="$(lists_left)"
    [[ "$now_lists" == "$before" ]] || die "$mc: a list changed while $m was lost (no action is needed): before $before, now $now_lists"
    auto="$(auto_promoted_in east)" || die "$mc: east's copy could not be read"
    [[ -z "$auto" ]] || die "$mc: east's copy shows autoPromotions [$auto] while $m was lost (no promotion is needed)"
    if [[ -z "$said_ms" ]] && lost_said "$m"; then said_ms=$(($(now_ms) - t_cut)); fi
    samples=$((samples + 1))
    sleep 1
  done
  ((samples >= quiet_s / 2)) || die "$mc: only $samples samples in $quiet_s s"
  # A lost member is seen by the leader's next reconcile pass: nothing in the other members
  # wakes one, so that is the periodic pass over members (at most 10 s apart, members.rs
  # LOOK_EVERY) plus the lost member's timeouts. Waited for up to 50 s from the loss (at least
  # 5 s more); the time it was first seen (sampled every second) is reported.
  if [[ -z "$said_ms" ]]; then
    local limit=$((50 - (SECONDS - t)))
    ((limit >= 5)) || limit=5
    wait_for "$limit" "east's copy saying $m is unreachable (MembersReachable False)" lost_said "$m"
    said_ms=$(($(now_ms) - t_cut))
  fi
  reach="$(reachable_in_east)" || die "$mc: east's copy could not be read"
  [[ "$reach" == "False "*"$m"* ]] || die "$mc: east's copy does not say $m is unreachable: MembersReachable $reach"
  t_resume="$(wait_ack 0 "$t_cut" 30 "$mc: writes with $m lost")"
  # The longest pause in acknowledgements since the loss, and when it ended (gap, t_end).
  local gap_line
  gap_line="$(longest_gap "$SCENARIO_DIR/acked.log" "$t_cut")" || die "$mc: no acknowledgements"
  read -r gap t_end <<<"$gap_line"
}
# reached_in_east MEMBER: east's copy's status.members entry of MEMBER, "<reachable> <message>".
reached_in_east() { copy_field east ".status.members[]? | select(.name == \"$1\") | (.reachable | tostring) + \" \" + (.message // \"\")"; }
# event_said REASON MEMBER [IN]: an Event of IN's (default east's) Kafka namespace with REASON
# naming member cluster MEMBER (the leader publishes in its own member and sends a copy to every
# other member's copy of the set).
event_said() {
  local events
  events="$(kc "${3:-east}" -n "$kafka_ns" get events --field-selector "reason=$1" -o json)" || return 1
  jq -e --arg m "member cluster $2 " '[.items[] | select((.message // "") | contains($m))] | length > 0' <<<"$events" >/dev/null
}
# returned MEMBER SECONDS: MEMBER back, and every copy Ready again within SECONDS.
returned() {
  return_member "$1"
  wait_for "$2" "every copy Ready after $1 returned" settled
}
quiet_loss MC3 tie
seen="$(members_seen 0 "east=true west=true tie=false")"
entry="$(reached_in_east tie)" || die "MC3: east's copy could not be read"
[[ "$entry" == "false "?* ]] || die "MC3: east's copy's status.members says of tie [$entry], not unreachable with why"
wait_for 10 "a Warning MemberUnreachable naming tie in east" event_said MemberUnreachable tie
wait_for 10 "the same Event in west (a copy of the leader's Events goes to every member)" event_said MemberUnreachable tie west
results+=("MC3 tie lost: no list changed and nothing promoted over $quiet_s s; longest pause in acknowledgements $gap ms; MembersReachable False in east's copy after $said_ms ms: $reach; status.members: tie $entry; Event MemberUnreachable in east and west; kubectl observer status --context x3: $seen")
log "${results[-1]}"
returned tie 120
back_in_east() { local e; e="$(reached_in_east tie)" && [[ "$e" == "true "* ]]; }
wait_for 30 "east's copy's status.members saying tie is reached again" back_in_east
wait_for 10 "a MemberReturned Event naming tie in east" event_said MemberReturned tie
wait_for 10 "the same Event in tie, the member that returned" event_said MemberReturned tie tie

quiet_loss MC2 west
says_gone() { local c; c="$(copy_field east '.status.conditions[]? | select(.type=="ObserversAvailable") | .status + " " + .message')" && [[ "$c" == False* && "$c" == *4* ]]; }
wait_for 30 "ObserversAvailable False naming 4 in east's copy" says_gone
why="$(copy_field east '.status.conditions[]? | select(.type=="ObserversAvailable") | .message')"
results+=("MC2 west lost: no list changed and nothing promoted over $quiet_s s; writes resumed $((t_end - t_cut)) ms after the loss (longest pause $gap ms); MembersReachable False in east's copy after $said_ms ms; ObserversAvailable: $why")
log "${results[-1]}"
returned west 180
accounted "MC2 and MC3"

# MC4: the link between east and west cut both ways, tie reachable from both, the operator's
# leader in east (it holds east's and tie's Leases: a majority). Kafka, with the active
# controller in east or tie (moved off west first, its pod deleted: with it in west, east's
# brokers are fenced and the case is east's loss, MC1), drops 3 from the ISR of east's partitions, fenced or
# lagging; {1,2} keeps min ISR, so nothing is to be promoted. For QUIET_S seconds, sampled every
# second: east alone leads (west's replica, with its own and tie's apiserver, never takes a
# majority), no member's list changes, nothing is promoted; east's copy says MembersReachable
# False naming west; writes are acknowledged with the link still cut; healed, every copy is
# Ready with the lists 4 and every acknowledged record is read back.
# active_controller: the KRaft quorum's leader id.
active_controller() {
  local boot out
  local m ip
  boot=""
  for m in "${MEMBERS[@]}"; do
    ip="$(ip_of "$m" "kafka-controller-$m-0")" || return 1
    boot+="$ip:9093,"
  done
  out="$("$tb/bin/kafka-metadata-quorum" --bootstrap-controller "${boot%,}" describe --status 2>/dev/null)" || return 1
  sed -n 's/^LeaderId:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out"
}
not_west_controller() { local id; id="$(active_controller)" && [[ -n "$id" && "$id" != 102 ]]; }
# view_is MEMBER STANDING [LEADER]: MEMBER's copy holds its own replica's view (status.localView),
# with that standing and leader.
view_is() {
  local got
  got="$(copy_field "$1" '.status.localView // {} | "\(.replica // "-") \(.standing // "-") \(.leader // "")"')" || return 1
  [[ "$got" == "operator-$1 $2 ${3:-}" ]]
}
# event_since MEMBER REASON SINCE_MS: an Event of REASON about the ObserverSet in MEMBER, last
# seen at or after SINCE_MS (to the second).
event_since() {
  local since n
  since="$(date -u -d "@$(($3 / 1000))" +%Y-%m-%dT%H:%M:%S)"
  n="$(kc "$1" -n "$kafka_ns" get events --field-selector "reason=$2,involvedObject.name=kafka" -o json |
    jq --arg since "$since" '[.items[] | [.series.lastObservedTime, .eventTime, .lastTimestamp, .metadata.creationTimestamp] | map(select(. != null) | .[0:19]) | max | select(. >= $since)] | length')" || return 1
  ((n > 0))
}
export SCENARIO_DIR="$DRILL_WORK/cut"
mkdir -p "$SCENARIO_DIR"
if ! not_west_controller; then
  log "MC4: the active controller is 102 (west): its pod deleted (a controlled shutdown resigns) so that 101 or 103 leads"
  kc west -n "$kafka_ns" delete pod kafka-controller-west-0 --timeout=120s >/dev/null ||
    die "MC4: kafka-controller-west-0 could not be deleted"
  wait_for 120 "an active controller outside west" not_west_controller
  west_controller_ready() {
    local r
    r="$(kc west -n "$kafka_ns" get pod kafka-controller-west-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" &&
      [[ "$r" == True ]]
  }
  wait_for 180 "kafka-controller-west-0 Ready again" west_controller_ready
  wait_for 180 "every copy Ready after the controller's restart" settled
fi
controller_before="$(active_controller)"
topic_streaming mc4 1:2:3:4,2:1:3:4
before="$(lists_left)"
[[ "$before" != *unread* ]] || die "MC4: a list could not be read before the cut: $before"
out="$(bash "$here/multi.sh" cut east west 2>&1)" || die "multi.sh cut east west failed: $out"
[[ "$out" =~ at_ms=([0-9]+) ]] || die "multi.sh cut printed no time: $out"
t_cut="${BASH_REMATCH[1]}"
cut_open=1
said_ms="" samples=0 t=$SECONDS
while ((SECONDS - t < quiet_s)); do
  # A replica that did not answer its metrics scrape in 1 s reads as not leading: the rule is
  # that no one but east leads; that east still does is checked once after the window.
  found="$(leaders)"
  [[ "$found" != *west* && "$found" != *tie* ]] || die "MC4: with the link cut, the leaders are [${found//$'\n'/ }], not east alone"
  now_lists="$(lists_left)"
  [[ "$now_lists" == "$before" ]] || die "MC4: a list changed with the link cut (no action is needed): before $before, now $now_lists"
  for m in east tie; do
    auto="$(auto_promoted_in "$m")" || die "MC4: $m's copy could not be read"
    [[ -z "$auto" ]] || die "MC4: $m's copy shows autoPromotions [$auto] with the link cut (no promotion is needed)"
  done
  if [[ -z "$said_ms" ]] && lost_said west; then said_ms=$(($(now_ms) - t_cut)); fi
  samples=$((samples + 1))
  sleep 1
done
((samples >= quiet_s / 2)) || die "MC4: only $samples samples in $quiet_s s"
wait_for 10 "east still leading at the end of the cut's window" leads_east
[[ -n "$said_ms" ]] || { wait_for 20 "east's copy saying west is unreachable" lost_said west; said_ms=$(($(now_ms) - t_cut)); }
# The side without a majority says so, in its own member: west's replica, once no one has held a
# majority of the Leases it reaches for two lease durations; the leader's view is that it leads.
wait_for 20 "west's copy holding west's view: NoAuthority" view_is west NoAuthority
wait_for 10 "a NoAuthority Event in west since the cut" event_since west NoAuthority "$t_cut"
wait_for 10 "east's copy holding east's view: Leads" view_is east Leads
why_none="$(copy_field west '.status.localView.message')"
# The plugin from either side of the cut: from west's side east does not answer, from east's
# side west does not; tie answers both.
gid_west="$(member_gid west)" || die "no group for west"
gid_east="$(member_gid east)" || die "no group for east"
seen_west="$(members_seen "$gid_west" "east=false west=true tie=true")"
view_west="$(jq -r '.members[] | select(.context == "west") | .view // "none"' "$work/members-seen.json")" ||
  die "MC4: the plugin's members view has no west"
[[ "$view_west" == "operator-west NoAuthority" ]] || die "MC4: the plugin from west's side shows west's operator as [$view_west], not [operator-west NoAuthority]"
seen_east="$(members_seen "$gid_east" "east=true west=false tie=true")"
t_now="$(now_ms)"
wait_ack 0 "$t_now" 30 "MC4: writes to partition 0 with the link cut" >/dev/null
wait_ack 1 "$t_now" 30 "MC4: writes to partition 1 with the link cut" >/dev/null
gap_line="$(longest_gap "$SCENARIO_DIR/acked.log" "$t_cut")" || die "MC4: no acknowledgements"
read -r gap t_end <<<"$gap_line"
bash "$here/multi.sh" heal east west >/dev/null 2>&1 || die "multi.sh heal east west failed"
cut_open=""
t_heal="$(now_ms)"
wait_for 120 "every copy Ready with the lists 4 after the link healed" settled
wait_for 30 "west's copy holding west's view: it follows operator-east" view_is west FollowsLeader operator-east
wait_for 10 "an AuthorityVisible Event in west since the heal" event_since west AuthorityVisible "$t_heal"
results+=("MC4 link east-west cut (active controller $controller_before, leader east): east alone led and no list changed over $quiet_s s, nothing promoted; longest pause in acknowledgements $gap ms, ended $((t_end - t_cut)) ms after the cut; MembersReachable False naming west in east's copy after $said_ms ms; kubectl observer status --context x3 from west's side: $seen_west, from east's: $seen_east; west's copy and the plugin: $view_west ($why_none); healed, every copy Ready after $(($(now_ms) - t_heal)) ms")
log "${results[-1]}"
accounted "MC4"

for line in "${results[@]}"; do echo "$line"; done
log "PASS"
