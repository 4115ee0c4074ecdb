# shellcheck shell=bash
# shellcheck disable=SC2154 # tb (the bed's directory): set by e2e/lib.sh, sourced by run.sh before this file
# D21: fenced writes (docs/architecture.md, "Fenced writes"). Sourced by run.sh.

# D21: the leading operator process paused (SIGSTOP) past its Lease, and its pod cut from the
# apiserver (iptables in the pod's network namespace: a paused VM or a partitioned node, whose
# process resumes with its last view and its leading flag unchanged); the other replica takes the
# Lease and acts (4 promoted by hand: both lists without 4). While the old leader is stopped the
# drill creates a topic on brokers 1, 2 and 4 at min ISR 2: by the old leader's view (4 still an
# observer) that partition sits exactly at min ISR, so the first scan after it resumes (Kafka is
# not cut) has a status.partitions write to make, attempted while its Lease renewal waits out the
# cut (1 s). The old leader then resumes (SIGCONT). For RESUMED_WINDOW seconds, sampled every
# 200 ms: the lists keep lacking 4, the ConfigMaps keep the resourceVersions the new leader left,
# the status stays Ready with 4 promoted; the old pod logs writes refused by the fence and that it
# stepped down, and writes no observer list. Then the cut is lifted.
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
RESUMED_WINDOW=20

# The two ConfigMaps' resourceVersions and the status every 200 ms into versions.log:
# "<ms> <controller rv> <broker rv> <phase> <promoted>", "<ms> ?" when the read fails.
start_versions_sampler() {
  # shellcheck disable=SC2312 # cat of a here-document
  start_bg versions "$(cat <<EOF
while :; do
  t=\$(date +%s%3N)
  k=("$tb/bin/kubectl" --kubeconfig "$tb/kubeconfig" -n $KAFKA_NS)
  if c=\$("\${k[@]}" get configmap kafka-observers-controller -o jsonpath='{.metadata.resourceVersion}' 2>/dev/null) &&
     b=\$("\${k[@]}" get configmap kafka-observers-broker -o jsonpath='{.metadata.resourceVersion}' 2>/dev/null) &&
     s=\$("\${k[@]}" get obs $OBS -o jsonpath='{.status.phase} [{.spec.promotion.promoted[*]}]' 2>/dev/null) &&
     [[ -n "\$c" && -n "\$b" ]]; then
    echo "\$t \$c \$b \$s"
  else
    echo "\$t ?"
  fi
  sleep 0.2
done
EOF
)"
}

# operator_restarts POD: the restart count of its operator container.
operator_restarts() {
  local n
  n="$(kubectl -n "$OPERATOR_NS" get pod "$1" -o jsonpath='{.status.containerStatuses[?(@.name=="operator")].restartCount}')" && [[ "$n" =~ ^[0-9]+$ ]] && echo "$n"
}

# cut_from_apiserver PID add|remove: drops the traffic between PID's network namespace and the
# apiserver address its in-cluster config uses (KUBERNETES_SERVICE_HOST:PORT, as the pod sees it,
# before the node's kube-proxy translates it).
cut_from_apiserver() {
  local env host port op
  env="$(tr '\0' '\n' < "/proc/$1/environ")" || return 1
  host="$(sed -n 's/^KUBERNETES_SERVICE_HOST=//p' <<<"$env")" && port="$(sed -n 's/^KUBERNETES_SERVICE_PORT=//p' <<<"$env")" || return 1
  [[ -n "$host" && -n "$port" ]] || return 1
  case "$2" in add) op=-I ;; remove) op=-D ;; *) return 2 ;; esac
  nsenter -t "$1" -n iptables "$op" OUTPUT -p tcp -d "$host" --dport "$port" -j DROP &&
    nsenter -t "$1" -n iptables "$op" INPUT -p tcp -s "$host" --sport "$port" -j DROP
}

scenario_d21() {
  local leader follower lf pid holder t_stop t_taken t_cont t_end since c_rv b_rv counts n other refused stepped written topic
  lf="$(leader_and_follower)" || fail "cannot tell the operator's leader from its follower"
  read -r leader follower <<<"$lf"
  pid="$(bash "$KAFKA_SH" container-pid "$OPERATOR_NS" "$leader" operator)" || fail "no operator container in the leader pod $leader"
  # The chart's liveness probe (every 10 s, 3 failures) restarts a process stopped for 20-30 s;
  # a restarted one resumes nothing, so the drill checks the container was not restarted.
  local restarts
  restarts="$(operator_restarts "$leader")" || fail "the restart count of $leader cannot be read"
  start_cm_sampler
  t_stop="$(now_ms)"
  kill -STOP "$pid" || fail "cannot stop the leader's operator process $pid"
  # Failed or not, the old leader runs again, reaching the apiserver, before the restore.
  on_restore "kill -CONT $pid"
  on_restore "cut_from_apiserver $pid remove 2>/dev/null || true"
  cut_from_apiserver "$pid" add || fail "cannot cut the leader's pod $leader from the apiserver (iptables in its network namespace)"
  log "leader $leader: operator pid $pid stopped (SIGSTOP) and cut from the apiserver"
  holder="$(lease_holder_after "$leader")"
  [[ "$holder" == "$follower" ]] || fail "the Lease went to '$holder', not to the other replica $follower, while $leader was stopped"
  t_taken="$(now_ms)"
  # The new leader acts: 4 promoted by hand, both lists without 4, phase Ready.
  obs_patch '{"spec":{"promotion":{"promoted":[4]}}}'
  wait_sample "$SCENARIO_DIR/cm.log" "$t_taken" 'lacks($2, 4) && lacks($3, 4)' 90 "both lists without 4 (written by the new leader $follower)" >/dev/null
  wait_obs 60 "phase Ready after the promotion" '[[ "$(obs_get "{.status.phase}")" == Ready ]]'
  # What the old leader's first scan will want to write (by its view: exactly at min ISR).
  topic="$(new_drill_topic d21 1:2:4)"
  log "topic $topic on brokers 1, 2, 4 created while the old leader is stopped"
  c_rv="$(kubectl -n "$KAFKA_NS" get configmap kafka-observers-controller -o jsonpath='{.metadata.resourceVersion}')" || fail "the controllers' ConfigMap cannot be read"
  b_rv="$(kubectl -n "$KAFKA_NS" get configmap kafka-observers-broker -o jsonpath='{.metadata.resourceVersion}')" || fail "the brokers' ConfigMap cannot be read"
  [[ -n "$c_rv" && -n "$b_rv" ]] || fail "the ConfigMaps have no resourceVersion ('$c_rv', '$b_rv')"
  start_versions_sampler
  sleep 1
  since="$(date -u +%FT%TZ)"
  t_cont="$(now_ms)"
  kill -CONT "$pid" || fail "cannot resume the old leader's operator process $pid"
  local stopped_s after
  stopped_s="$(secs "$t_stop" "$t_cont")"
  log "old leader $leader resumed (SIGCONT) after $stopped_s s, still cut from the apiserver; watching ${RESUMED_WINDOW} s"
  sleep "$RESUMED_WINDOW"
  t_end="$(now_ms)"
  cut_from_apiserver "$pid" remove || fail "cannot lift the cut of $leader from the apiserver"
  after="$(operator_restarts "$leader")" || fail "the restart count of $leader cannot be read after the window"
  [[ "$after" == "$restarts" ]] ||
    fail "the old leader's container was restarted while stopped (liveness probe; stopped $stopped_s s): nothing resumed, the drill proves nothing"
  stop_bg versions
  stop_bg cm
  # No list with 4 again (the old leader's view): never_sample also fails on an empty window.
  never_sample "$SCENARIO_DIR/cm.log" "$t_cont" "$t_end" 'lists($2, 4) || lists($3, 4)' "a list holds 4 again after the old leader resumed"
  # No write to either ConfigMap at all, and the status as the new leader left it.
  counts="$(awk -v a="$t_cont" -v b="$t_end" -v c="$c_rv" -v r="$b_rv" '
    $1 >= a && $1 <= b && $2 != "?" { n++; if (!hit && ($2 != c || $3 != r || $4 != "Ready" || $5 != "[4]")) hit = $0 }
    END { print n + 0, (hit == "" ? "-" : hit) }' "$SCENARIO_DIR/versions.log")" || fail "cannot read $SCENARIO_DIR/versions.log"
  read -r n other <<<"$counts"
  ((n > 0)) || fail "the ConfigMaps' versions cannot be checked: no readable sample in the ${RESUMED_WINDOW} s window"
  [[ "$other" == "-" ]] || fail "a ConfigMap or the status changed after the old leader resumed (expected rv $c_rv/$b_rv, Ready, [4]; sample: $other)"
  # The old pod's own account: it tried, was refused, stepped down, and wrote no list. Read
  # after the cut is lifted (the log comes from the node, not through the pod's network).
  local logs
  logs="$(kubectl -n "$OPERATOR_NS" logs "$leader" --since-time="$since" 2>/dev/null)" || fail "the old leader's log cannot be read"
  [[ -n "$logs" ]] || fail "the old leader $leader logged nothing after it resumed"
  refused="$(grep -c "write refused by the fence" <<<"$logs" || true)"
  stepped="$(grep -c -E "stepping down|no longer leading" <<<"$logs" || true)"
  written="$(grep -c "observer list written" <<<"$logs" || true)"
  ((written == 0)) || fail "the old leader $leader wrote $written observer list(s) after it resumed"
  ((stepped > 0)) || fail "the old leader $leader did not log that it stepped down after it resumed"
  ((refused > 0)) || fail "the old leader $leader logged no write refused by the fence after it resumed (it attempted none, or the fence let them through)"
  local taken_s
  taken_s="$(secs "$t_stop" "$t_taken")"
  echo "DRILL D21 stopped_s=$stopped_s stop_to_lease_taken_s=$taken_s window_samples=$n refused_writes=$refused new_leader=$follower"
}
