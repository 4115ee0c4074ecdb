# shellcheck shell=bash
# D3 and D9: the operator's two replicas. Sourced by run.sh.

# D3: the leading operator pod killed with SIGKILL in the middle of a rollout. The controllers'
# agents are paused (SIGSTOP) so the promotion of 4 stops after the controllers' ConfigMap is
# written, waiting for their acknowledgement; then the leader's process gets SIGKILL and its pod
# is force-deleted (so it cannot come back under the same name and simply renew its own Lease)
# with every bed node cordoned (its replacement stays Pending: a fresh candidate would otherwise race
# the other replica for the expired Lease), and the agents resume. The other replica takes the Lease and finishes the rollout: the
# brokers' ConfigMap is written only after the controllers', each exactly once, and the
# successor does not write the controllers' step again (no ObserverListWritten for the
# controllers from it).
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d3() {
  local leader follower pid id t t_ctrl t_kill t_takeover t_brk holder lf
  # Not `read < <(leader_and_follower)`: its fail would end only the process substitution.
  lf="$(leader_and_follower)" || fail "cannot tell the operator's leader from its follower"
  read -r leader follower <<<"$lf"
  start_cm_sampler
  t="$(now_ms)"
  t_ctrl="$(promote_until_controllers_written)"
  # The revision of this promotion's controllers' step: the successor must not write it again.
  # (Only this revision counts: the same replica may have written other revisions as an earlier
  # leader, e.g. after a zone drill or a soak that failed a leader over.)
  local rev
  rev="$(kubectl -n "$KAFKA_NS" get configmap kafka-observers-controller -o jsonpath='{.metadata.annotations.kafkaobserver\.io/revision}')" ||
    fail "the controllers' ConfigMap cannot be read"
  [[ "$rev" =~ ^[0-9]+$ ]] || fail "the controllers' ConfigMap has no revision annotation ('$rev')"
  sleep 1
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ ",$(cm_ids broker)," == *",4,"* ]] || fail "the brokers' ConfigMap changed while the controllers' agents were paused (acknowledgement skipped)"
  pid="$(bash "$KAFKA_SH" container-pid "$OPERATOR_NS" "$leader" operator)" || fail "no operator container in the leader pod $leader"
  # shellcheck disable=SC2154 # the bed's node name(s): set by e2e/lib.sh, sourced by run.sh before this file
  kubectl cordon "${node_names[@]}" >/dev/null || fail "cannot cordon ${node_names[*]}"
  on_restore "kubectl uncordon ${node_names[*]} >/dev/null"
  t_kill="$(now_ms)"
  kill -KILL "$pid"
  kubectl -n "$OPERATOR_NS" delete pod "$leader" --grace-period=0 --force --wait=false >/dev/null 2>&1
  log "leader $leader: operator pid $pid killed (-9), pod force-deleted; controllers' agents resume"
  resume_paused
  holder="$(lease_holder_after "$leader")"
  [[ "$holder" == "$follower" ]] || fail "the Lease went to '$holder', not to the other replica $follower"
  t_takeover="$(now_ms)"
  t_brk="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_kill" 'lacks($3, 4)' 60 "the brokers' ConfigMap without 4 (the successor finishes the rollout)")"
  never_sample "$SCENARIO_DIR/cm.log" "$t" "$t_brk" 'lacks($3, 4) && lists($2, 4)' "a sample shows the brokers' list changed before the controllers'"
  assert_each_list_changed_once "$t"
  wait_obs 60 "phase Ready after the rollout" '[[ "$(obs_get "{.status.phase}")" == Ready ]]'
  local rewrites
  rewrites="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS,reason=ObserverListWritten" \
    -o jsonpath='{range .items[*]}{.reportingInstance} {.message}{"\n"}{end}' | grep -c "^$follower revision $rev written to ConfigMap kafka-observers-controller" || true)"
  ((rewrites == 0)) || fail "the successor $follower wrote the controllers' step (revision $rev) again ($rewrites ObserverListWritten events)"
  kubectl uncordon "${node_names[@]}" >/dev/null
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D3 controllers_written_to_kill_s=$(secs "$t_ctrl" "$t_kill") kill_to_lease_taken_s=$(secs "$t_kill" "$t_takeover") kill_to_brokers_written_s=$(secs "$t_kill" "$t_brk") new_leader=$follower"
}

# D9: two operator replicas, only the leader acts. A promotion and a demotion by hand, then:
# every Event about the ObserverSet since the start came from the Lease holder; over the same
# window the other replica's /metrics counted no reconcile, no Event, no scan and no promotion
# and shows leader 0, the holder's leader 1 and reconciles counted. Counters are compared
# before and after: a replica that led earlier (after D3's kill or D5's apiserver restart) keeps
# what it counted then, and must only count nothing more.
scenario_d9() {
  local leader follower t_iso n_before n_after lf
  lf="$(leader_and_follower)" || fail "cannot tell the operator's leader from its follower"
  read -r leader follower <<<"$lf"
  local counters=(kafka_observer_reconciles_total kafka_observer_events_total
                  kafka_observer_kafka_scan_duration_seconds_count kafka_observer_automation_promotions_total)
  local -A before
  local m v
  for m in "${counters[@]}"; do
    before[$m]="$(metric "$follower" "$m")"
    [[ "${before[$m]}" =~ ^[0-9]+$ ]] || fail "cannot read $m from the non-leader $follower (${before[$m]})"
  done
  t_iso="$(date -u +%Y-%m-%dT%H:%M:%S)"
  n_before="$(metric "$leader" kafka_observer_reconciles_total)"
  [[ "$n_before" =~ ^[0-9]+$ ]] || fail "cannot read kafka_observer_reconciles_total from the leader $leader ($n_before)"
  obs_patch '{"spec":{"promotion":{"promoted":[4]}}}'
  wait_obs 60 "the brokers' ConfigMap without 4" cm_lacks broker 4
  obs_patch '{"spec":{"promotion":{"promoted":[]}}}'
  wait_obs 60 "the brokers' ConfigMap lists 4 again" '[[ ",$(cm_ids broker)," == *",4,"* ]]'
  n_after="$(metric "$leader" kafka_observer_reconciles_total)"
  [[ "$n_after" =~ ^[0-9]+$ ]] || fail "cannot read kafka_observer_reconciles_total from the leader $leader ($n_after)"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(leader_and_follower)" == "$leader $follower" ]] || fail "the Lease moved during the drill: $(leader_and_follower)"
  ((n_after > n_before)) || fail "the leader's reconciles_total did not grow ($n_before -> $n_after)"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(metric "$leader" kafka_observer_leader)" == 1 ]] || fail "the leader $leader does not report kafka_observer_leader 1"
  v="$(metric "$follower" kafka_observer_leader)"
  [[ "$v" == 0 ]] || fail "the non-leader $follower reports kafka_observer_leader = $v, expected 0"
  for m in "${counters[@]}"; do
    v="$(metric "$follower" "$m")"
    [[ "$v" == "${before[$m]}" ]] || fail "the non-leader $follower counted $m ${before[$m]} -> $v while the leader acted, expected no change"
  done
  local by
  by="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS" \
    -o jsonpath='{range .items[*]}{.reportingInstance} {.eventTime}{.lastTimestamp} {.series.lastObservedTime}{"\n"}{end}' |
    awk -v since="$t_iso" '$2 >= since || $3 >= since { print $1 }' | sort | uniq -c)"
  # shellcheck disable=SC2312 # message text only
  log "Events since $t_iso by reporting instance: $(tr '\n' ';' <<<"$by")"
  grep -q " $leader$" <<<"$by" || fail "no Event from the leader $leader since $t_iso"
  ! grep -q " $follower$" <<<"$by" || fail "the non-leader $follower published Events: $by"
  echo "DRILL D9 leader=$leader reconciles=$((n_after - n_before)) non_leader_reconciles=0 non_leader_events=0"
}

# "<Lease holder> <the other operator pod>"; fails unless there are exactly two, one holding.
leader_and_follower() {
  local pods leader other
  # shellcheck disable=SC2312 # operator_pods failing is no pod: the count check below fails
  mapfile -t pods < <(operator_pods)
  ((${#pods[@]} == 2)) || fail "expected two operator pods, found ${#pods[@]}: ${pods[*]}"
  leader="$(operator_leader)"
  case "$leader" in
    "${pods[0]}") other="${pods[1]}" ;;
    "${pods[1]}") other="${pods[0]}" ;;
    *) fail "the Lease holder '$leader' is not one of the operator pods ${pods[*]}" ;;
  esac
  echo "$leader $other"
}
# metric POD NAME: the sum of NAME's samples on the pod's /metrics (0 when absent).
metric() {
  local ip
  ip="$(kubectl -n "$OPERATOR_NS" get pod "$1" -o jsonpath='{.status.podIP}')"
  local text
  # "unreachable" (never a number) when the pod does not answer: no check passes on a silent pod.
  text="$(curl -sf --max-time 5 "http://$ip:8080/metrics")" || { echo unreachable; return; }
  awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }' <<<"$text"
}

# D5: the apiserver restarted during a rollout. As in D3, the promotion of 4 waits after the
# controllers' ConfigMap (their agents paused); then kube-apiserver gets SIGKILL and is started
# again 5 s later (`control-plane.sh up`), and the agents resume. The operator converges: the
# brokers' ConfigMap is written after the controllers', each list changes once, phase Ready, and
# every node's projected file shows the promotion (the kubelet's watches reconnect too).
scenario_d5() {
  local pid id t t_ctrl t_kill t_back t_brk
  start_cm_sampler
  t="$(now_ms)"
  t_ctrl="$(promote_until_controllers_written)"
  # shellcheck disable=SC2154 # tb: set by e2e/lib.sh, sourced by run.sh before this file
  pid="$(cat "$tb/pids/kube-apiserver.pid" 2>/dev/null)" && kill -0 "$pid" 2>/dev/null || fail "kube-apiserver does not run"
  # shellcheck disable=SC2154 # root: set by e2e/lib.sh, sourced by run.sh before this file
  on_restore "bash '$root/e2e/testbed/control-plane.sh' up >/dev/null"
  t_kill="$(now_ms)"
  kill -KILL "$pid"
  log "kube-apiserver (pid $pid) killed (-9) with the controllers' step written, not acknowledged"
  sleep 5
  resume_paused
  bash "$root/e2e/testbed/control-plane.sh" up >&2 || fail "kube-apiserver does not start again"
  t_back="$(now_ms)"
  t_brk="$(wait_sample "$SCENARIO_DIR/cm.log" "$t_back" 'lacks($3, 4)' 90 "the brokers' ConfigMap without 4 after the restart")"
  never_sample "$SCENARIO_DIR/cm.log" "$t" "$t_brk" 'lacks($3, 4) && lists($2, 4)' "a sample shows the brokers' list changed before the controllers'"
  assert_each_list_changed_once "$t"
  wait_obs 120 "phase Ready after the rollout" '[[ "$(obs_get "{.status.phase}")" == Ready ]]'
  local role t_files
  # The kubelet's ConfigMap watches reconnect after the restart; the nodes' files converge too.
  for role in controller broker; do
    wait_role_shows "$role" "" 120 || fail "${role}s$ROLE_PENDING do not show the promotion 120 s after the apiserver came back"
  done
  t_files="$(now_ms)"
  # And back: the demotion reaches every node too (restore_scenario allows only 40 s per role).
  obs_patch '{"spec":{"promotion":{"promoted":[]}}}'
  for role in controller broker; do
    wait_role_shows "$role" "4" 180 || fail "${role}s$ROLE_PENDING do not show the demotion 180 s after it was made"
  done
  # shellcheck disable=SC2312 # message text only
  log "the demotion reached every node $(secs "$t_files" "$(now_ms)") s after it was made"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D5 apiserver_down_s=$(secs "$t_kill" "$t_back") apiserver_back_to_brokers_written_s=$(secs "$t_back" "$t_brk") apiserver_back_to_every_file_s=$(secs "$t_back" "$t_files") operator_leader=$(operator_leader)"
}

# assert_each_list_changed_once SINCE_MS: in cm.log from SINCE, each role's list changed at most
# once (no step repeated or undone on the way); fails too when no readable sample is there.
assert_each_list_changed_once() {
  local counts flips samples
  counts="$(awk -v a="$1" "$AWK_CM"'$1 >= a && $0 !~ /[?]/ { s++; c = lists($2, 4); b = lists($3, 4); if (seen && (c != pc || b != pb)) n++; pc = c; pb = b; seen = 1 } END { print n + 0, s + 0 }' "$SCENARIO_DIR/cm.log")" ||
    fail "cannot read $SCENARIO_DIR/cm.log"
  read -r flips samples <<<"$counts"
  ((samples > 0)) || fail "the ConfigMaps' changes cannot be counted: no readable cm.log sample since $1"
  ((flips <= 2)) || fail "the ConfigMaps changed $flips times during the rollout, expected once each"
}

# promote_until_controllers_written: the controllers' agents paused (SIGSTOP; resume_paused sends
# SIGCONT, restore too), then 4 promoted by hand; waits until the controllers' ConfigMap is
# written (the rollout then waits for their acknowledgement) and echoes that sample's time.
promote_until_controllers_written() {
  local id pid t
  for id in "${CONTROLLERS[@]}"; do
    # shellcheck disable=SC2312 # node_pod only prints a name; kafka.sh's status is checked
    pid="$(bash "$KAFKA_SH" container-pid "$KAFKA_NS" "$(node_pod "$id")" observer-agent)" || fail "no observer-agent container for node $id"
    echo "$pid" >> "$SCENARIO_DIR/paused"
    kill -STOP "$pid"
  done
  t="$(now_ms)"
  obs_patch '{"spec":{"promotion":{"promoted":[4]}}}'
  wait_sample "$SCENARIO_DIR/cm.log" "$t" 'lacks($2, 4)' 30 "the controllers' ConfigMap without 4"
}
