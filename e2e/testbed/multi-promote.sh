#!/usr/bin/env bash
# MC1 on the multi-cluster bed (docs/multi-cluster.md, "Drills"): the member `east` lost whole
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
members_set_up
results=()
for run in $(seq 1 "$runs"); do
  export SCENARIO_DIR="$DRILL_WORK/run-$run"
  mkdir -p "$SCENARIO_DIR"
  rm -f "$east_tb"/logs/operator-{east,west,tie}.log
  # 1. east's operator first: it takes the three Leases.
  start_operator east
  leads_east() { leads east; }
  wait_for 60 "operator-east leading" leads_east
  start_operator west
  start_operator tie
  sleep 2
  found="$(leaders)"
  [[ "$found" == east ]] || die "expected operator-east alone to lead, got: ${found//$'\n'/ }"

  # 2. The set with the automatic policy in every member; bootstrap = the brokers' pod IPs (the
  # host does not resolve the members' names).
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

  # 3. The topic and the producer (an earlier run's topics gone first: their partitions would
  # trigger the policy too).
  "$tb/bin/kafka-topics" --bootstrap-server "$servers" --delete --if-exists --topic 'mc1-.*' >/dev/null 2>&1 || true
  topic="mc1-$run-$(date +%s)"
  "$tb/bin/kafka-topics" --bootstrap-server "$servers" --create --topic "$topic" \
    --replica-assignment 1:2:3:4,2:1:3:4,3:1:2:4 --config min.insync.replicas=2 >/dev/null ||
    die "cannot create topic $topic"
  start_isr_sampler "$topic"
  start_stream "$topic" 20
  t0="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t0" "isr_none(4) && isr_min() >= 3" 60 "every partition led, 4 outside the ISR" >/dev/null
  wait_ack 0 "$t0" 60 "records acknowledged before the loss" >/dev/null
  sleep 2

  # 4. east lost with the leader.
  t_cut="$(now_ms)"
  lost_out="$(bash "$here/multi.sh" lose east 2>&1)" || die "multi.sh lose east failed: $lost_out"
  lost=east
  kill_operator KILL east # the operator's leader, a process of east's too
  [[ "$lost_out" =~ at_ms=([0-9]+) ]] && t_cut="${BASH_REMATCH[1]}"
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
  results+=("$line")

  # 5. east returns; 4 is demoted by the engine once east's brokers are back.
  bash "$here/multi.sh" return east >/dev/null 2>&1 || die "multi.sh return east failed"
  lost=""
  start_operator east
  t_back="$(now_ms)"
  wait_for 240 "4 demoted again and every copy Ready with the lists 4 after east returned" settled
  t_settled="$(now_ms)"
  log "run $run: east back, 4 demoted, every member's lists 4 after $((t_settled - t_back)) ms"
  wait_ack 0 "$t_settled" 60 "writes after the demotion" >/dev/null

  # 6. Accounting.
  stop_stream_and_verify "$topic"
  touch "$SCENARIO_DIR/isr.stop"
  log "run $run: $STREAM_ACCOUNTING"
  "$tb/bin/kafka-topics" --bootstrap-server "$servers" --delete --topic "$topic" >/dev/null 2>&1 || true
  delete_sets
  stop_operators
done
for line in "${results[@]}"; do echo "MC1 $line"; done
log "PASS"
