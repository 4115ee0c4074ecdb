# shellcheck shell=bash
# D15-D18: a whole zone lost as clouds lose one, on the bed's node-per-zone layout
# (e2e/testbed/node.sh): nothing is deleted in the API, the lost zone's pods stay Running (then
# Terminating) while its node turns NotReady/Unknown, and the zone holds one of the three KRaft
# controllers besides a primary broker. Sourced by run.sh.
#
#   D15 zone c partitioned (or, when c holds the active KRaft controller, a zone that holds
#       neither it nor the operator's leader: quiet_zone): its link cut while its kubelet,
#       containerd and JVMs keep running, cut off; then the link back (the zone's controller
#       and broker rejoin with the lists they held in memory)
#   D16 the same zone powered off: every process of the zone SIGKILLed at once, link down; then on again
#   D17 the zone of the operator's leader (a, b or c) partitioned: the other replica takes the
#       Lease and promotes
#   D18 the observer's own zone d powered off: nothing is promoted (no partition goes under min
#       ISR), and the operator says so: the observer is not alive in Kafka
#   D20 the zone of the active KRaft controller (a, b or c) partitioned: the survivors elect a
#       new active controller first, which then fences the lost broker; D15's expectations
#
# The expectations of D15-D17 are D1's (the operator promotes 4 on its own, controllers' list
# first, writes resume, 4 demoted again after the zone returns, every acknowledged record read
# back exactly once), plus: the lost zone's pods stay in the API (no tidy deletion), the rollout
# goes on without the unreachable controller and says so (Event StepWentOnWithout), and no
# observer leads once its demotion began.

# shellcheck disable=SC2154 # root, tb: set by e2e/lib.sh, sourced by run.sh before this file
NODE_SH="$root/e2e/testbed/node.sh"

scenario_d15() { local z; z="$(quiet_zone)" || fail "the active controller cannot be read"; ACTIVE_KEPT=1 zone_outage D15 "$z" partition; }
scenario_d16() { local z; z="$(quiet_zone)" || fail "the active controller cannot be read"; ACTIVE_KEPT=1 zone_outage D16 "$z" power; }
# The zone D15 and D16 lose: c, unless c holds the active KRaft controller (that is D20's case,
# with a timeline of its own: the survivors elect a new active controller first) or runs the
# operator's leader (that is D17's case, with the hand-over); then the first of a and b that
# holds neither. The active controller
# moves between runs (a drill that restarts a controller, a controller that was cut off).
quiet_zone() {
  local active leader node z controller
  active="$(current_active_controller)" && [[ -n "$active" ]] || return 1
  leader="$(operator_leader)" || leader=""
  node=""
  [[ -z "$leader" ]] || node="$(kubectl -n "$OPERATOR_NS" get pod "$leader" -o jsonpath='{.spec.nodeName}' 2>/dev/null)" || node=""
  for z in c a b; do
    case "$z" in a) controller=101 ;; b) controller=102 ;; *) controller=103 ;; esac
    [[ "koo-$z" == "$node" || "$active" == "$controller" ]] || { echo "$z"; return 0; }
  done
  return 1
}
scenario_d17() {
  local leader zone
  leader="$(operator_leader)"
  [[ -n "$leader" ]] || fail "no operator leader (Lease kafka-observer-operator has no holder)"
  zone="$(kubectl -n "$OPERATOR_NS" get pod "$leader" -o jsonpath='{.spec.nodeName}')" || fail "no pod $leader"
  zone="${zone#koo-}"
  [[ "$zone" == a || "$zone" == b || "$zone" == c ]] || fail "the leader $leader runs in zone '$zone', not a, b or c (e2e/testbed/operator-values.yaml)"
  LEADER_LOST="$leader" zone_outage D17 "$zone" partition
}
scenario_d20() {
  local active zone
  active="$(current_active_controller)" || fail "the active controller cannot be read"
  case "$active" in
    101) zone=a ;;
    102) zone=b ;;
    103) zone=c ;;
    *) fail "the active controller is '$active', not one of 101-103" ;;
  esac
  ACTIVE_LOST="$active" zone_outage D20 "$zone" partition
}

# zone_cut MODE ZONE / zone_back MODE ZONE: the failure and its end (node.sh). zone_cut sets
# CUT_AT to the moment node.sh cut the link or killed the zone (its at_ms=): before the kill,
# power-off spends a second or more gathering the zone's processes, which must not count.
CUT_AT=""
zone_cut() {
  local out cmd=partition
  [[ "$1" == power ]] && cmd=power-off
  out="$(bash "$NODE_SH" "$cmd" "$2" 2>&1)" || { echo "$out" >&2; fail "node.sh $cmd $2 failed"; }
  echo "$out" >&2
  CUT_AT="$(sed -n 's/.* at_ms=\([0-9]*\)$/\1/p' <<<"$out")"
  [[ "$CUT_AT" =~ ^[0-9]+$ ]] || fail "node.sh $cmd $2 did not say when it cut the zone (no at_ms=)"
}
zone_back() {
  if [[ "$1" == power ]]; then bash "$NODE_SH" power-on "$2" >&2 || fail "node.sh power-on $2 failed"
  else bash "$NODE_SH" heal "$2" >&2 || fail "node.sh heal $2 failed"; fi
}

# Every 500 ms the Ready status of the zone's Node and the phase (with a deletion mark) of the
# zone's Kafka pods: "<ms> node=<True|False|Unknown|?> <pod>=<phase>[,deleting] ...".
start_zone_sampler() {
  local node="$1"; shift
  # shellcheck disable=SC2312 # cat of a here-document: nothing to fail
  start_bg zone "$(cat <<EOF
while :; do
  t=\$(date +%s%3N)
  r=\$("$tb/bin/kubectl" --kubeconfig "$tb/kubeconfig" get node $node -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || r='?'
  p=\$("$tb/bin/kubectl" --kubeconfig "$tb/kubeconfig" -n $KAFKA_NS get pods $* -o go-template='{{range .items}}{{.metadata.name}}={{.status.phase}}{{if .metadata.deletionTimestamp}},deleting{{end}} {{end}}' 2>/dev/null) || p='?'
  echo "\$t node=\${r:-?} \$p"
  sleep 0.5
done
EOF
)"
}

# zone_outage LABEL ZONE partition|power: the drill described above, for the zone holding
# controller 100+i and broker i (i the zone's position, 1-3).
zone_outage() {
  local label="$1" zone="$2" mode="$3" active i b c x others=() o1 o2 topic t0 zone_name broker_pod ctrl_pod t_end t_cut t_under t_ctrl t_brk t_isr4 t_res0 t_res2 t_nr t_back t_rejoin t_lease=""
  i="$(zone_index "$zone")" || fail "unknown zone $zone"
  b="$i" c=$((100 + i))
  (( b >= 1 && b <= 3 )) || fail "zone $zone holds no primary broker"
  for x in 1 2 3; do ((x == b)) || others+=("$x"); done
  o1="${others[0]}" o2="${others[1]}"
  zone_name="koo-$zone" broker_pod="kafka-broker-$((b - 1))" ctrl_pod="kafka-controller-$((c - 101))"
  # p0 led by the lost broker, p1 without it (a control), p2 with it as a follower.
  topic="$(new_drill_topic "${label,,}" "$b:$o1:4,$o1:$o2:4,$o2:$b:4")"
  start_isr_sampler "$topic"
  start_cm_sampler
  start_zone_sampler "$zone_name" "$broker_pod" "$ctrl_pod"
  start_stream "$topic" 20
  if [[ "$mode" == power ]]; then on_restore "bash '$NODE_SH' power-on $zone >&2"; else on_restore "bash '$NODE_SH' heal $zone >&2"; fi
  t0="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t0" 'isr_none(4) && isr_min() == 2' 60 "every ISR two primaries, without 4" >/dev/null
  wait_ack 0 "$t0" 60 "records acknowledged before the drill" >/dev/null
  lists_4_everywhere || fail "the ConfigMaps do not list observer 4 at the start"
  wait_cooldown_over
  log "precondition ok: $topic ($b:$o1:4,$o1:$o2:4,$o2:$b:4), zone $zone holds controller $c and broker $b"
  # Whether the lost zone holds the active controller shapes the timeline: the survivors first
  # elect a new one, which then gives every broker a fresh session before it fences the lost one.
  active="$(current_active_controller)"
  # D20 must lose the active controller: if it moved since the drill picked the zone, say so.
  [[ -z "${ACTIVE_LOST:-}" || "$active" == "$c" ]] ||
    fail "the active controller is $active at the cut, not $c of zone $zone: D20 would not lose it"
  # D15 and D16 must keep it: if it moved into the zone since the drill picked it, say so.
  [[ -z "${ACTIVE_KEPT:-}" || "$active" != "$c" ]] ||
    fail "the active controller moved to $c of zone $zone before the cut: that is D20's outage, not $label's"

  log "== zone $zone lost ($mode)"
  zone_cut "$mode" "$zone"
  t_cut="$CUT_AT"
  t_under="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_cut" 'ok() && isr_min() == 1' 90 "a partition under min ISR")"
  t_ctrl="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_cut" 'lacks($2, 4)' 120 "the controllers' ConfigMap without 4")"
  t_brk="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_cut" 'lacks($3, 4)' 120 "the brokers' ConfigMap without 4")"
  ((t_ctrl <= t_brk)) || fail "the brokers' ConfigMap changed before the controllers' one ($t_brk < $t_ctrl)"
  never_sample "$SCENARIO_DIR/cm.log" "$t_cut" "$t_brk" 'lacks($3, 4) && lists($2, 4)' \
    "a sample shows the brokers promoted while the controllers still list 4"
  local promoted
  promoted="$(auto_promoted)" || fail "status.autoPromotions cannot be read"
  [[ " $promoted " == *" 4 "* ]] || fail "status.autoPromotions does not record node 4: [$promoted]"
  t_isr4="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_cut" 'isr_all(4)' 120 "4 in every ISR")"
  t_res0="$(wait_ack 0 "$t_under" 120 "writes resumed")"
  t_res2="$(wait_ack 2 "$t_under" 120 "writes resumed")"
  # The failure as clouds have it: the zone's pods were never deleted, and its node went NotReady.
  t_nr="$(zone_first "$t_cut" '$2 != "node=True" && $2 != "node=?"' 60 "the node $zone_name NotReady/Unknown")"
  t_end="$(now_ms)"
  never_zone "$t_cut" "$t_end" "! (\$0 ~ /$ctrl_pod=Running/)" "the controller's pod $ctrl_pod left the Running phase in the API during the outage (a tidy deletion, not an outage)"
  went_on_without "$ctrl_pod"
  if [[ -n "${LEADER_LOST:-}" ]]; then
    local holder
    holder="$(operator_leader)"
    [[ -n "$holder" && "$holder" != "$LEADER_LOST" ]] || fail "the Lease is still held by '$holder' (the lost leader $LEADER_LOST)"
    t_lease="$(lease_taken_at)"
  fi
  # shellcheck disable=SC2312 # secs is awk arithmetic on two numbers: message text only
  echo "DRILL $label mode=$mode zone=$zone active_controller_at_cut=${active:-?} cut_to_node_not_ready_s=$(secs "$t_cut" "$t_nr") cut_to_under_min_isr_s=$(secs "$t_cut" "$t_under") ${t_lease:+cut_to_lease_taken_s=$(secs "$t_cut" "$t_lease") }cut_to_controllers_cm_s=$(secs "$t_cut" "$t_ctrl") cut_to_brokers_cm_s=$(secs "$t_cut" "$t_brk") cut_to_4_in_every_isr_s=$(secs "$t_cut" "$t_isr4") cut_to_writes_resumed_s=$(secs "$t_cut" "$((t_res0 > t_res2 ? t_res0 : t_res2))")"

  log "== zone $zone back"
  t_back="$(now_ms)"
  zone_back "$mode" "$zone"
  t_rejoin="$(wait_sample "$SCENARIO_DIR/isr.log" "$t_back" "\$3 ~ /,$b,/ && \$7 ~ /,$b,/" 300 "$b back in the ISRs of partitions 0 and 2")"
  wait_demotion "$t_back"
  t_end="$(now_ms)"
  wait_obs 30 "status.autoPromotions empty after the demotion" no_auto_promotion
  wait_ack 1 "$t_end" 30 "writes after the demotion" >/dev/null
  # shellcheck disable=SC2312 # secs is awk arithmetic on two numbers: message text only
  echo "DRILL $label back_to_${b}_in_isr_s=$(secs "$t_back" "$t_rejoin") back_to_controllers_cm_s=$(secs "$t_back" "$T_DCTRL") back_to_brokers_cm_s=$(secs "$t_back" "$T_DBRK") back_to_4_out_of_every_isr_s=$(secs "$t_back" "$T_OUT")"
  touch "$SCENARIO_DIR/isr.stop"
  drill_accounting "$label" "$topic"
}

# zone_first AFTER_MS AWK_CONDITION TIMEOUT_S WHAT: the first zone sample at or after AFTER_MS
# that matches; never_zone FROM TO CONDITION WHAT: none in the window matches (and the window has
# samples).
zone_first() {
  local deadline=$((SECONDS + $3)) t
  while :; do
    t="$(awk -v after="$1" '$1 >= after && ('"$2"') { print $1; exit }' "$SCENARIO_DIR/zone.log")"
    [[ -n "$t" ]] && { echo "$t"; return; }
    ((SECONDS < deadline)) || fail "$4: not seen within $3s"
    sleep 0.5
  done
}
never_zone() {
  local out n hit
  out="$(awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b && $0 !~ /=\?/ { n++; if (!hit && ('"$3"')) hit = $0 } END { print n + 0, hit }' "$SCENARIO_DIR/zone.log")" ||
    fail "$4: cannot be checked (awk failed)"
  read -r n hit <<<"$out"
  ((n > 0)) || fail "$4: cannot be checked, no readable zone sample in the window"
  [[ -z "$hit" ]] || fail "$4 (sample: $hit)"
}

# went_on_without POD: a Warning Event StepWentOnWithout about the ObserverSet names POD.
went_on_without() {
  local events
  events="$(obs_events StepWentOnWithout)" || fail "cannot list the Events of $OBS"
  [[ "$events" == *"Warning"*"$1"* ]] ||
    fail "no Warning Event StepWentOnWithout names $1, the unreachable controller the rollout went on without (got: ${events:-none})"
}

# The time (epoch ms) the current holder acquired the operator's Lease.
lease_taken_at() {
  local at
  at="$(kubectl -n "$OPERATOR_NS" get lease kafka-observer-operator -o jsonpath='{.spec.acquireTime}')" || return 1
  date -d "$at" +%s%3N
}

# D18: the observer's zone d powered off while everything else is fine: no partition goes under
# min ISR (observers never count), so nothing is promoted and neither list changes for 30 s;
# the operator reports the observer as not alive in Kafka (condition ObserversAvailable False,
# Warning Event ObserverUnavailable). Zone d back: the condition turns True again.
scenario_d18() {
  local before t_cut t_cond t_back t_ok
  wait_obs 60 "ObserversAvailable True at the start" 'observers_available True'
  before="$(cm_snapshot)" || fail "the ConfigMaps cannot be read at the start"
  on_restore "bash '$NODE_SH' power-on d >&2"
  zone_cut power d
  t_cut="$CUT_AT"
  wait_obs 60 "ObserversAvailable False" 'observers_available False'
  t_cond="$(now_ms)"
  local message events
  message="$(obs_get '{.status.conditions[?(@.type=="ObserversAvailable")].message}')" || fail "the ObserverSet cannot be read"
  [[ "$message" == *"4"* ]] || fail "ObserversAvailable False does not name observer 4: $message"
  events="$(obs_events ObserverUnavailable)" || fail "cannot list the Events of $OBS"
  [[ "$events" == *"Warning"*"4"* ]] || fail "no Warning Event ObserverUnavailable names observer 4 (got: ${events:-none})"
  for _ in {1..30}; do
    expect_no_auto_promotion "nothing promoted while only the observer's zone was lost"
    expect_lists_unchanged "$before" "the lists unchanged while only the observer's zone was lost"
    sleep 1
  done
  t_back="$(now_ms)"
  zone_back power d
  wait_obs 180 "ObserversAvailable True again" 'observers_available True'
  t_ok="$(now_ms)"
  # shellcheck disable=SC2312 # secs is awk arithmetic on two numbers: message text only
  echo "DRILL D18 cut_to_condition_false_s=$(secs "$t_cut" "$t_cond") no_action_for_s=30 back_to_condition_true_s=$(secs "$t_back" "$t_ok")"
}
# observers_available STATUS: the ObserverSet was read and its ObserversAvailable is STATUS.
observers_available() {
  local s
  s="$(obs_get '{.status.conditions[?(@.type=="ObserversAvailable")].status}')" && [[ "$s" == "$1" ]]
}
# Both ConfigMaps were read and list the observer 4.
lists_4_everywhere() {
  local c b
  c="$(configmap_ids controller)" && b="$(configmap_ids broker)" && [[ ",$c," == *",4,"* && ",$b," == *",4,"* ]]
}
