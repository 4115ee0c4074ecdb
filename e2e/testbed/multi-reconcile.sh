#!/usr/bin/env bash
# The observer lists written across the three members of the multi-cluster bed
# (docs/multi-cluster.md, build order step 9, the reconciler's part), by one operator per member
# as the chart runs them, each reaching the others only as their kafka-observer-remote:
#   1. west's operator started first, so that it leads (the others then stand by): neither lost
#      member below is the leader's;
#   2. examples/multi-cluster/observerset.yaml applied in every member: every member's
#      ConfigMaps (controllers in east, west and tie, brokers in east and west) list 4, every
#      copy's phase Ready at one revision, MembersReachable True;
#   3. promotion of 4 (promoted: [4] in every copy): the lists of every member without 4, every
#      copy Ready at a later revision, and in the leader's log every member's controllers' list
#      written before any member's brokers' list;
#   4. tie lost whole (`multi.sh lose tie`: its control plane and node SIGKILLed, its addresses
#      dropped), then the demotion of 4 in east's and west's copies (a majority): the demotion
#      does not start while tie is unreachable (no list changes for HOLD seconds, sampled every
#      second), and east's copy says why (MembersReachable False naming tie);
#   5. tie returns (`multi.sh return tie`): the demotion goes through, tie's controllers' list
#      included, every copy Ready, MembersReachable True;
#   6. east lost whole, then the promotion of 4 by hand in west's and tie's copies: it goes
#      through in west and tie without east's pods (Kafka no longer lists brokers 1 and 2, nor
#      controller 101 among the voters it hears: the engine's scans over members tell the
#      reconciler), west's and tie's lists without 4;
#   7. east returns: its lists are brought to the current revision and its copy written, every
#      copy Ready at that revision.
# The set's bootstrapServers are the brokers' pod IPs (the operators run on the host, which does
# not resolve the members' DNS names).
# Prints a timeline. Needs the multi bed up (`multi.sh up`); stops its operators, deletes the
# ObserverSets (deletionPolicy Retain: the lists stay, back at the seed's content "4") and what
# it created on exit. Usage: multi-reconcile.sh [HOLD_SECONDS] (default 20).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
log_tag="multi-reconcile" log_time="%T"
hold="${1:-20}"
work="$(mktemp -d)"
source "$here/multi-operators.sh"
set_file="$root/examples/multi-cluster/observerset.yaml"
lost=""

clean_up() {
  if [[ -n "${KOO_KEEP:-}" ]]; then log "KOO_KEEP: operators left running, nothing deleted (work dir $work)"; return; fi
  if [[ -n "$lost" ]]; then bash "$here/multi.sh" return "$lost" >/dev/null 2>&1 || true; fi
  local m
  for m in "${MEMBERS[@]}"; do
    kc "$m" -n "$kafka_ns" delete observerset kafka --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  # The finalizer is on the leader's own copy: give the operators a moment to release it.
  sleep 3
  members_clean_up
}
trap clean_up EXIT

members_set_up
rm -f "$east_tb/logs/operator-east.log" "$east_tb/logs/operator-west.log" "$east_tb/logs/operator-tie.log"
leader_log="$east_tb/logs/operator-west.log"

# 1. west first: it takes the three Leases; then the standbys.
t0=$SECONDS
# west leads throughout: its log is $leader_log.
start_operator west
leads_west() { leads west; }
wait_for 60 "operator-west leading" leads_west
start_operator east
start_operator tie
sleep 2
found="$(leaders)"
[[ "$found" == west ]] || die "expected operator-west alone to lead, got: ${found//$'\n'/ }"
log "operator-west leads; east and tie stand by ($((SECONDS - t0)) s)"

# copy_field MEMBER JQ: a field of MEMBER's copy of the set.
copy_field() { kc "$1" -n "$kafka_ns" get observerset kafka -o json | jq -r "$2"; }
# list MEMBER ROLE: "<revision>:<ids>" of MEMBER's ConfigMap of ROLE.
list() {
  kc "$1" -n "$kafka_ns" get configmap "kafka-observers-$2" -o json |
    jq -r '(.metadata.annotations["kafkaobserver.io/revision"] // "-") + ":" + ((.data["observer.ids"] // "") | split("\n") | map(select(length > 0 and (startswith("#") | not))) | join(","))'
}
lists() { # every member's lists but a lost one's, one line
  local m role got out=""
  for role in controller broker; do
    for m in "${MEMBERS[@]}"; do
      [[ "$m" != tie || "$role" != broker ]] || continue
      [[ "$m" != "$lost" ]] || continue
      got="$(list "$m" "$role")" || got="unread"
      out+="$m/${role:0:1}=$got "
    done
  done
  echo "$out"
}
# every_copy_ready REVISION_MIN: every member's copy Ready at one revision >= REVISION_MIN.
every_copy_ready() {
  local m phase rev first=""
  for m in "${MEMBERS[@]}"; do
    phase="$(copy_field "$m" '.status.phase // ""')" || return 1
    rev="$(copy_field "$m" '.status.revision // 0')" || return 1
    [[ "$phase" == Ready && "$rev" -ge "$1" ]] || return 1
    [[ -z "$first" || "$first" == "$rev" ]] || return 1
    first="$rev"
  done
}
# lists_are REVISION IDS: every member's ConfigMaps at REVISION listing IDS ("4" or "").
lists_are() { lists_of "$1" "$2" "${MEMBERS[@]}"; }
# lists_of REVISION IDS MEMBER...: those members' ConfigMaps at REVISION listing IDS.
lists_of() {
  local rev="$1" ids="$2" m role got
  shift 2
  for m in "$@"; do
    for role in controller broker; do
      [[ "$m" != tie || "$role" != broker ]] || continue
      got="$(list "$m" "$role")" || return 1
      [[ "$got" == "$rev:$ids" ]] || return 1
    done
  done
}
# ask_promoted IDS MEMBER...: spec.promotion.promoted set to IDS ("[4]" or "[]") in those copies.
ask_promoted() {
  local ids="$1" m
  shift
  for m in "$@"; do
    kc "$m" -n "$kafka_ns" patch observerset kafka --type merge -p "{\"spec\":{\"promotion\":{\"promoted\":$ids}}}" >/dev/null
  done
}
die_lists() { local now; now="$(lists)"; die "$1: $now"; }
members_reachable() { copy_field west '.status.conditions[]? | select(.type=="MembersReachable") | .status + " " + .message'; }
# written_in_order REVISION [WRITES]: in the leader's log, the lists written for REVISION: every
# member's controllers' before any member's brokers', WRITES of them (5: all three members').
written_in_order() {
  local rev="$1" writes="${2:-5}" order
  order="$(jq -r --arg rev "$rev" 'select(.message == "observer list written" and (.revision | tostring) == $rev) | .member + "/" + .role' "$leader_log" 2>/dev/null)"
  local took
  took="$(jq -r --arg rev "$rev" 'select(.message | startswith("every pod reads revision " + $rev + ":")) | .message | capture("took (?<t>[^)]*)").t' "$leader_log" 2>/dev/null | tail -n 1)" || took=""
  local n
  n="$(grep -c . <<<"$order")" || n=0
  log "revision $rev written in this order: ${order//$'\n'/ } (operator: first write to every pod acknowledging: ${took:-?})"
  [[ "$n" == "$writes" ]] || die "revision $rev: expected $writes list writes, got: $order"
  local seen_broker=0 line
  while IFS= read -r line; do
    case "$line" in
      */broker) seen_broker=1 ;;
      */controller) ((seen_broker == 0)) || die "revision $rev: a controllers' list ($line) written after a brokers' list: $order" ;;
    esac
  done <<<"$order"
}

# 2. The set in every member, bootstrapServers the brokers' pod IPs.
t=$SECONDS
ip_of() { kc "$1" -n "$kafka_ns" get pod "$2" -o jsonpath='{.status.podIP}'; }
east_ip="$(ip_of east kafka-broker-east-0)"
west_ip="$(ip_of west kafka-broker-west-0)"
servers="$east_ip:9092,$west_ip:9092"
[[ "$servers" =~ ^[0-9.]+:9092,[0-9.]+:9092$ ]] || die "broker pod IPs not found: $servers"
sed "s|^    bootstrapServers: .*|    bootstrapServers: \"$servers\"|" "$set_file" >"$work/observerset.yaml"
grep -q "bootstrapServers: \"$servers\"" "$work/observerset.yaml" || die "bootstrapServers not replaced in $work/observerset.yaml"
for m in "${MEMBERS[@]}"; do kc "$m" -n "$kafka_ns" apply -f "$work/observerset.yaml" >/dev/null; done
diagnose() { lists >&2; echo >&2; for m in "${MEMBERS[@]}"; do copy_field "$m" '.status | {phase, revision, writerEpoch, leaderEpoch}' >&2 || true; done; tail -n 20 "$leader_log" >&2; }
wait_diag=diagnose
wait_for 120 "every copy Ready" every_copy_ready 1
rev1="$(copy_field west '.status.revision')"
lists_are "$rev1" 4 || die_lists "after the first rollout"
reach="$(members_reachable)"
[[ "$reach" == True* ]] || die "MembersReachable is not True: $reach"
now_lists="$(lists)"
log "set applied in every member: revision $rev1 Ready in every copy, lists $now_lists($((SECONDS - t)) s)"

# 3. Promotion of 4, every copy.
t=$SECONDS
ask_promoted "[4]" "${MEMBERS[@]}"
wait_for 120 "every copy Ready after the promotion" every_copy_ready $((rev1 + 1))
rev2="$(copy_field west '.status.revision')"
lists_are "$rev2" "" || die_lists "after the promotion"
written_in_order "$rev2"
log "promotion of 4: revision $rev2 in every member, controllers first across members ($((SECONDS - t)) s)"

# 4. tie lost; demotion asked in east's and west's copies.
t=$SECONDS
lost_out="$(bash "$here/multi.sh" lose tie 2>&1)" || die "multi.sh lose tie failed: $lost_out"
lost=tie
ask_promoted "[]" west east
before="$(lists)"
samples=0
while ((SECONDS - t < hold)); do
  now_lists="$(lists)"
  [[ "$now_lists" == "$before" ]] || die "a list changed while tie was lost (a demotion must wait): before $before, now $now_lists"
  samples=$((samples + 1))
  sleep 1
done
((samples >= hold / 2)) || die "only $samples samples of the lists in ${hold} s"
# The copies were patched one after the other: a pass between the two saw them differ (phase
# Invalid, retried); the condition is that of the pass after.
says_waiting() { local r; r="$(members_reachable)"; [[ "$r" == "False "*tie* && "$r" == *"waits for them"* ]]; }
wait_for 15 "MembersReachable saying the rollout waits for tie" says_waiting
reach="$(members_reachable)"
log "tie lost, demotion asked: no list changed over $samples samples in ${hold} s; west's copy: MembersReachable $reach"

# 5. tie returns: the demotion goes through in every member.
t=$SECONDS
bash "$here/multi.sh" return tie >/dev/null 2>&1 || die "multi.sh return tie failed"
lost=""
# tie's copy still says promoted [4]: east's and west's copies are the majority that decides.
wait_for 180 "every copy Ready after tie returned" every_copy_ready $((rev2 + 1))
rev3="$(copy_field west '.status.revision')"
lists_are "$rev3" 4 || die_lists "after the demotion"
written_in_order "$rev3"
reach="$(members_reachable)"
[[ "$reach" == True* ]] || die "MembersReachable is not True after tie returned: $reach"
log "tie returned: demotion at revision $rev3 in every member, tie's copy still the old spec ($((SECONDS - t)) s)"
ask_promoted "[]" tie

# 6. east lost whole; 4 promoted by hand in west's and tie's copies (a majority).
copy_ready_past() { # MEMBER REVISION_MIN
  local phase rev
  phase="$(copy_field "$1" '.status.phase // ""')" || return 1
  rev="$(copy_field "$1" '.status.revision // 0')" || return 1
  [[ "$phase" == Ready && "$rev" -gt "$2" ]]
}
promoted_without_east() { copy_ready_past west "$rev3" && copy_ready_past tie "$rev3"; }
t=$SECONDS
lost_out="$(bash "$here/multi.sh" lose east 2>&1)" || die "multi.sh lose east failed: $lost_out"
lost=east
ask_promoted "[4]" west tie
wait_for 90 "the promotion Ready in west's and tie's copies with east lost" promoted_without_east
rev4="$(copy_field west '.status.revision')"
lists_of "$rev4" "" west tie || die_lists "after the promotion without east"
written_in_order "$rev4" 3
excused="$(jq -r 'select(.message | test("without|excused|going on")) | .message' "$leader_log" 2>/dev/null | tail -n 3)" || excused=""
excused="${excused//$'\n'/ }"
log "east lost, 4 promoted by hand: revision $rev4 in west and tie in $((SECONDS - t)) s after the loss (east's pods: $excused)"

# 7. east returns: its lists and its copy brought to the current revision.
t=$SECONDS
bash "$here/multi.sh" return east >/dev/null 2>&1 || die "multi.sh return east failed"
lost=""
east_current() { lists_of "$rev4" "" east && every_copy_ready "$rev4"; }
wait_for 120 "east's lists and copy at revision $rev4" east_current
log "east returned: its lists and copy at revision $rev4 ($((SECONDS - t)) s)"
# east's copy still asks for the demotion of step 4: the same spec as the others again.
ask_promoted "[4]" east
log "PASS"
