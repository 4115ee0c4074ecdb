#!/usr/bin/env bash
# Operator drill: lose a zone, the operator promotes the observer (controllers first), writes
# resume; the zone comes back, the operator demotes the observer after its stabilization window.
#
# Against the real bed: the example ObserverSet kafka (policy UnderMinIsr, broker 4 the observer,
# autoDemote on), a topic with replicas 1,2,4 and min ISR 2,
# a synchronous acks=all producer writing 5 records a second and a consumer stamping arrivals.
#
#   1. precondition: ISR = {1,2}, broker 4 (observer) outside it, writes flowing
#   2. kill -9 the partition leader (broker 1 or 2): the ISR shrinks to one replica, under min ISR
#   3. the operator records an automatic promotion of 4; the controllers' ConfigMap loses 4
#      before the brokers' one does; broker 4 joins the ISR; writes resume
#   4. restart the killed broker: it rejoins the ISR; after the stabilization window the operator
#      demotes 4 (both ConfigMaps list 4 again, controllers first) and 4 leaves the ISR
# Each step has a timeout; timings are printed from the kill (and from the restart).
# The observer is listed last: listed first it would be the preferred leader, take leadership once
# promoted (automatic leader rebalance) and could then not be demoted without a restart or a
# reassignment (the operator says so in its log and status; the Kafka suite covers that layout).
#
# Where: the bed's real node: the example StatefulSets in namespace kafka (e2e/testbed/kafka.sh),
# the ObserverSet examples/kafka/observerset/, the operator installed by its Helm chart
# (e2e/testbed/operator-chart.sh, two replicas). A lost zone: koo-node cordoned, the leader's JVM
# killed with SIGKILL in its container and its pod deleted (`kafka.sh stop`); the replacement
# stays Pending until the zone comes back (`kafka.sh start`: uncordon).
#
# Environment: KOO_DRILL_RESUME_TIMEOUT (120 s), KOO_DRILL_DEMOTE_TIMEOUT (300 s).
set -euo pipefail
source "$(dirname "$0")/../../lib.sh"
log_time="%T" log_fd=1
tb="${KOO_TESTBED:-$tb}"
[[ "$tb" != off ]] || { echo "promotion-drill: SKIP (KOO_TESTBED=off)"; exit 0; }
[[ -f "$tb/kubeconfig" ]] || { echo "promotion-drill: no test bed at $tb: run make testbed-up"; exit 1; }
resume_timeout="${KOO_DRILL_RESUME_TIMEOUT:-120}"
demote_timeout="${KOO_DRILL_DEMOTE_TIMEOUT:-300}"
ns=kafka
kafka_sh() { bash "$root/e2e/testbed/kafka.sh" "$@"; }
bootstrap="$(kafka_sh bootstrap)"
topic="drill-promotion-$(date +%s)"
work="$(mktemp -d "${TMPDIR:-/tmp}/koo-drill.XXXXXX")"
operator_log() {
  kubectl -n kafka-observer-system logs -l app.kubernetes.io/name=kafka-observer-operator --tail=2000 \
    --prefix 2>/dev/null
}
# Whether broker ID's pod runs again (someone uncordoned the node).
broker_back() {
  [[ "$(kubectl -n "$ns" get pod "$(node_pod "$1")" -o jsonpath='{.status.phase}' 2>/dev/null)" == Running ]]
}

fail() { log "FAIL: $*"; dump; exit 1; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

bg_pids=()
killed=""
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill -- "-$p" 2>/dev/null || true; done
  if [[ -n "$killed" ]]; then kafka_sh start "$killed" >/dev/null 2>&1 || true; fi
  "$tb/bin/kafka-topics" --bootstrap-server "$bootstrap" --delete --topic "$topic" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

dump() {
  log "ObserverSet:"; kubectl -n "$ns" get obs kafka -o yaml 2>&1 | sed -n '/^status:/,$p' | head -60
  log "last ISR samples:"; tail -n 5 "$work/isr.log" 2>/dev/null
  log "last ConfigMap samples:"; tail -n 5 "$work/cm.log" 2>/dev/null
  log "the promotion engine's last words on $ns/kafka:"
  operator_log | grep 'automation' | grep "observerset=kafka\b\|$ns" | tail -n 8
}

# The ids a ConfigMap lists (comments dropped), space-separated.
cm_ids() {
  kubectl -n "$ns" get configmap "kafka-observers-$1" -o jsonpath='{.data.observer\.ids}' 2>/dev/null \
    | grep -v '^[[:space:]]*#' | tr -s ' ,\n\t' ' ' | sed 's/^ //; s/ $//'
}
auto_promoted() { kubectl -n "$ns" get obs kafka -o jsonpath='{.status.autoPromotions[*].nodeId}' 2>/dev/null; }
has_id() { [[ " $1 " == *" $2 "* ]]; }

# Background samplers, each line prefixed with the sample time.
start_bg() { setsid bash -c "$1" > "$2" 2>&1 < /dev/null & bg_pids+=($!); }

isr_sampler() {
  cat <<EOF
while :; do
  line=\$("$tb/bin/kafka-topics" --bootstrap-server "$bootstrap" --command-config "$work/client.properties" --describe --topic "$topic" 2>/dev/null | grep -m1 'Partition: 0')
  t=\$EPOCHREALTIME
  leader=\$(sed -n 's/.*Leader: *\([-0-9]*\).*/\1/p' <<<"\$line")
  isr=\$(sed -n 's/.*Isr: *\([0-9,]*\).*/\1/p' <<<"\$line")
  echo "\$t leader=\$leader isr=\$isr"
  sleep 0.3
done
EOF
}
cm_sampler() {
  cat <<EOF
# Both lists come from ONE list call, i.e. one consistent resourceVersion: two separate gets
# could straddle the two writes and show the brokers' change first when it came second.
# "?" when the read fails, so a failed read never looks like "4 is gone".
ids() { # ids ROLE < the list output: the role's ids, comma-separated
  awk -v cm="kafka-observers-\$1" '\$0 == "==" cm { on = 1; next } /^==/ { on = 0 } on && !/^[[:space:]]*#/' \
    | tr -s ' ,\n\t' ',' | sed 's/^,//; s/,\$//'
}
while :; do
  t=\$EPOCHREALTIME
  if d=\$("$tb/bin/kubectl" --kubeconfig "$tb/kubeconfig" -n $ns get configmaps \
      -o go-template='{{range .items}}=={{.metadata.name}}{{"\\n"}}{{with .data}}{{index . "observer.ids"}}{{end}}{{"\\n"}}{{end}}' 2>/dev/null); then
    echo "\$t controller=\$(ids controller <<<"\$d") broker=\$(ids broker <<<"\$d")"
  else
    echo "\$t controller=? broker=?"
  fi
  sleep 0.2
done
EOF
}

# First sample time (after $2) at which the sampler file $1 has a line matching the awk condition $3.
first_sample() {
  awk -v after="$2" "\$1 >= after && ($3) { print \$1; exit }" "$1"
}
# wait_sample FILE AFTER COND TIMEOUT WHAT: poll until first_sample finds a line; echo its time.
wait_sample() {
  local file="$1" after="$2" cond="$3" timeout="$4" what="$5" deadline t
  deadline=$(awk -v a="$(now)" -v t="$timeout" 'BEGIN { printf "%d", a + t }')
  while :; do
    t="$(first_sample "$file" "$after" "$cond")"
    [[ -n "$t" ]] && { echo "$t"; return; }
    (( ${EPOCHSECONDS} > deadline )) && { fail "$what: not seen within ${timeout}s" >&2; }
    sleep 0.2
  done
}

# A lost zone's addresses vanish (no connection refused, unlike a killed local process): clients
# with Kafka's default 10-30 s connection and request timeouts would measure their own failover,
# not the cluster's. The drill's clients give up on a silent broker after 1-3 s.
cat > "$work/client.properties" <<EOF
socket.connection.setup.timeout.ms=1000
socket.connection.setup.timeout.max.ms=2000
EOF

log "== setup"
bash "$root/e2e/testbed/operator-chart.sh" up
kafka_sh observerset
# Manual promotions left by someone else (tests, a human) would hide what the drill looks for.
kubectl -n "$ns" patch obs kafka --type merge -p '{"spec":{"promotion":{"promoted":[]}}}' >/dev/null
kubectl -n "$ns" wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=180s >/dev/null \
  || fail "ObserverSet $ns/kafka not Ready after 180s"
# An automatic promotion left by an interrupted run is demoted by the operator itself once the
# cluster is healthy (autoDemote); wait for it rather than start from a promoted state.
for ((i = 0; i < demote_timeout; i += 2)); do [[ -z "$(auto_promoted)" ]] && break; sleep 2; done
[[ -z "$(auto_promoted)" ]] || fail "ObserverSet $ns/kafka still has automatic promotions: $(auto_promoted)"
kubectl -n "$ns" wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=180s >/dev/null \
  || fail "ObserverSet $ns/kafka not Ready after 180s"
has_id "$(cm_ids controller)" 4 && has_id "$(cm_ids broker)" 4 || fail "ConfigMaps do not list observer 4"

"$tb/bin/kafka-topics" --bootstrap-server "$bootstrap" --create --topic "$topic" \
  --replica-assignment 1:2:4 --config min.insync.replicas=2 >/dev/null || fail "cannot create topic $topic"
start_bg "$(isr_sampler)" "$work/isr.log"
start_bg "$(cm_sampler)" "$work/cm.log"
# Consumer: one line per record as it becomes readable (committed), stamped with its arrival time.
start_bg "\"$tb/bin/kafka-console-consumer\" --bootstrap-server $bootstrap --topic $topic --from-beginning \
  --consumer.config \"$work/client.properties\" --consumer-property request.timeout.ms=3000 2>>\"$work/consumer.err\" \
  | while IFS= read -r l; do echo \"\$EPOCHREALTIME \$l\"; done" "$work/consumed.log"
# Producer: synchronous acks=all sends of \"<seq> <generation time>\", at most 5 a second (the
# console producer's default linger of 1 s and 3 retries are overridden). One record is always in
# flight and a record that cannot be written (NOT_ENOUGH_REPLICAS) is retried until it can be. With
# the leader killed nothing can commit until the ISR is back to min ISR, so the first record the
# consumer receives after the partition was seen under min ISR marks the moment writes resumed.
start_bg "seq=0; while :; do seq=\$((seq+1)); echo \"\$seq \$EPOCHREALTIME\"; sleep 0.2; done \
  | \"$tb/bin/kafka-console-producer\" --bootstrap-server $bootstrap --topic $topic --sync \
      --producer-property acks=all --producer-property linger.ms=0 --producer-property retries=2147483647 \
      --producer-property request.timeout.ms=3000 --producer-property delivery.timeout.ms=600000 \
      --producer-property retry.backoff.max.ms=200 --producer.config \"$work/client.properties\"" "$work/producer.log"

t0="$(now)"
wait_sample "$work/consumed.log" "$t0" 'NF >= 3' 120 "first record consumed" >/dev/null
wait_sample "$work/isr.log" "$t0" '$3 == "isr=1,2" || $3 == "isr=2,1"' 60 "ISR {1,2} without the observer" >/dev/null
leader="$(tail -n1 "$work/isr.log" | sed -n 's/.*leader=\([0-9]*\).*/\1/p')"
[[ "$leader" == 1 || "$leader" == 2 ]] || fail "partition leader is '$leader', expected a primary (1 or 2)"
log "precondition ok: replicas 1,2,4, ISR {1,2}, observer 4 outside the ISR, leader $leader, writes flowing"

log "== lose a zone: kill -9 broker $leader (the leader)"
t_kill="$(now)"
killed="$leader"
kafka_sh stop "$leader" >/dev/null
# The first sample without the killed leader in the ISR. With one replica left the partition is
# under min ISR; the sampler (one kafka-topics call per sample, about a second each on a busy
# machine) can miss that state when the promotion is faster, and then sees the observer already in.
t_under="$(wait_sample "$work/isr.log" "$t_kill" "\$3 !~ /[=,]$leader(,|\$)/ && \$3 != \"isr=\"" 60 "ISR shrink without broker $leader")"
log "ISR shrunk after $(since "$t_kill" "$t_under")s ($(awk -v t="$t_under" '$1 == t { print $2, $3 }' "$work/isr.log"))"
t_ctrl="$(wait_sample "$work/cm.log" "$t_kill" '$2 !~ /(^|[=,])4(,|$)/ && $2 !~ /[?]/' "$resume_timeout" "controllers' ConfigMap without 4")"
t_brk="$(wait_sample "$work/cm.log" "$t_kill" '$3 !~ /(^|[=,])4(,|$)/ && $3 !~ /[?]/' "$resume_timeout" "brokers' ConfigMap without 4")"
[[ "$(auto_promoted)" == *4* ]] || fail "status.autoPromotions does not record node 4"
awk -v c="$t_ctrl" -v b="$t_brk" 'BEGIN { exit !(c <= b) }' \
  || fail "brokers' ConfigMap changed before the controllers' one (controllers $t_ctrl, brokers $t_brk)"
t_isr4="$(wait_sample "$work/isr.log" "$t_kill" '$3 ~ /[=,]4(,|$)/' "$resume_timeout" "broker 4 in the ISR")"
t_resume="$(wait_sample "$work/consumed.log" "$t_under" 'NF >= 3' "$resume_timeout" "writes resumed")"
# The bed is shared: if anyone restarted the killed broker meanwhile, these timings mean nothing.
! broker_back "$leader" || fail "broker $leader was restarted by someone else during the outage (another drill on the shared bed?): timings invalid"
awk -v a="$t_under" -v b="$t_resume" -v id="$leader" '$1 >= a && $1 <= b && $3 ~ ("[=,]" id "(,|$)") { bad = 1 } END { exit bad }' "$work/isr.log" \
  || fail "broker $leader was back in the ISR before writes resumed: not this drill's promotion"
log "promotion: controllers' ConfigMap +$(since "$t_kill" "$t_ctrl")s, brokers' +$(since "$t_kill" "$t_brk")s (controllers first: ok)"
log "broker 4 in the ISR +$(since "$t_kill" "$t_isr4")s"
echo "DRILL kill_to_writes_resumed_s=$(since "$t_kill" "$t_resume") kill_to_isr_shrink_s=$(since "$t_kill" "$t_under") kill_to_controllers_cm_s=$(since "$t_kill" "$t_ctrl") kill_to_brokers_cm_s=$(since "$t_kill" "$t_brk") kill_to_isr_with_4_s=$(since "$t_kill" "$t_isr4")"

log "== the zone comes back: restart broker $leader"
t_restart="$(now)"
KAFKA_START_WAIT=0 kafka_sh start "$leader" >/dev/null
killed=""
t_back="$(wait_sample "$work/isr.log" "$t_restart" "\$3 ~ /[=,]$leader(,|\$)/" "$demote_timeout" "broker $leader back in the ISR")"
log "broker $leader back in the ISR +$(since "$t_restart" "$t_back")s"
t_dctrl="$(wait_sample "$work/cm.log" "$t_restart" '$2 ~ /(^|[=,])4(,|$)/' "$demote_timeout" "controllers' ConfigMap lists 4 again (demotion)")"
t_dbrk="$(wait_sample "$work/cm.log" "$t_restart" '$3 ~ /(^|[=,])4(,|$)/' "$demote_timeout" "brokers' ConfigMap lists 4 again (demotion)")"
awk -v c="$t_dctrl" -v b="$t_dbrk" 'BEGIN { exit !(c <= b) }' \
  || fail "demotion: brokers' ConfigMap changed before the controllers' one"
t_out="$(wait_sample "$work/isr.log" "$t_dbrk" '$3 !~ /[=,]4(,|$)/ && $2 != "leader=4"' 120 "broker 4 out of the ISR")"
[[ -z "$(auto_promoted)" ]] || fail "status.autoPromotions still lists $(auto_promoted) after the demotion"
t_after="$(now)"
sleep 2
wait_sample "$work/consumed.log" "$t_after" 'NF >= 3' 30 "writes after the demotion" >/dev/null
log "demotion: controllers' ConfigMap +$(since "$t_restart" "$t_dctrl")s, brokers' +$(since "$t_restart" "$t_dbrk")s after the restart; 4 out of the ISR +$(since "$t_restart" "$t_out")s"
echo "DRILL restart_to_isr_back_s=$(since "$t_restart" "$t_back") restart_to_demotion_cm_s=$(since "$t_restart" "$t_dbrk") restart_to_observer_out_of_isr_s=$(since "$t_restart" "$t_out")"
kubectl -n "$ns" wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=120s >/dev/null || fail "ObserverSet not Ready after the demotion"
log "PASS ($(since "$t_kill" "$(now)")s from the kill)"
