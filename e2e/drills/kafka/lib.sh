# shellcheck shell=bash source-path=SCRIPTDIR
# Shared pieces of the Kafka failure suite (e2e/drills/kafka/run.sh) and the Kafka bench
# (e2e/bench/kafka.sh): the drill client, node control, observer-list changes and the restore to
# the bed's default state (broker 4 observer everywhere, every node running). Sourced, never run.
#
# The cluster is the bed's example StatefulSets (e2e/testbed/kafka.sh: examples/kafka/ on the
# real node koo-node) in namespace $KOO_KAFKA_NAMESPACE (default kafka): controllers 101-103 =
# pods kafka-controller-0..2, brokers 1-4 = pods kafka-broker-0..3 (the node table, CONTROLLERS,
# BROKERS, OBSERVER and node_pod, is in e2e/lib.sh). Every node operation goes through kafka.sh
# (stop/start/restart/running/log/observer-dir), which knows the pods.
#
# How observer lists change, exactly as in a cluster: patch the ConfigMap kafka-observers-<role>
# (or, when an ObserverSet owns the ConfigMaps, its spec.promotion.promoted), annotate the role's
# pods so the real kubelet re-projects their ConfigMap volume at once (~1-2 s instead of its
# 60-90 s sync), then wait until every scheduled node's projected file shows the new content.
# Scenarios that simulate a broken file (S7: chmod 000, garbage, deletion) edit a node's
# projected file on the host directly, because that is the failure they simulate; the kubelet
# undoes such an edit at its next sync of the pod, and restore_default repairs and nudges.

# The functions below rely on pipefail (a failed kubectl before `| ids_of` must fail the
# pipeline); every script that sources this file sets it already.
set -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
# Notes: "[<UTC time>] message" on stderr.
log_tag="" log_time="[%T]"
KAFKA_SH="$root/e2e/testbed/kafka.sh"
# The namespace of the Kafka cluster; kafka.sh reads the same variable.
KAFKA_NS="${KOO_KAFKA_NAMESPACE:-kafka}"
export KOO_KAFKA_NAMESPACE="$KAFKA_NS"
# kafka.sh's state directory for that namespace (bootstrap, stopped nodes).
if [[ "$KAFKA_NS" == kafka ]]; then kstate="$tb/kafka"; else kstate="$tb/kafka.$KAFKA_NS"; fi
DEFAULT_OBSERVERS="$OBSERVER"$'\n'
if [[ "$KAFKA_NS" == kafka ]]; then drill_work="${DRILL_WORK:-$tb/drills/kafka}"; else drill_work="${DRILL_WORK:-$tb/drills/kafka.$KAFKA_NS}"; fi
mkdir -p "$drill_work"

now_ms() { date +%s%3N; }

# The kafka-bootstrap Service's ClusterIP:9092 (reachable from the host through kube-proxy),
# resolved once by resolve_bootstrap (run.sh, the bench) and exported for every subshell.
resolve_bootstrap() {
  local b
  b="$(bash "$KAFKA_SH" bootstrap 2>/dev/null)" || true
  [[ "$b" =~ ^[0-9.]+:[0-9]+$ ]] || return 1
  export KAFKA_BOOTSTRAP="$b"
}
bootstrap() {
  [[ -n "${KAFKA_BOOTSTRAP:-}" ]] || resolve_bootstrap || { log "no kafka-bootstrap Service in namespace $KAFKA_NS"; return 1; }
  echo "$KAFKA_BOOTSTRAP"
}
# Whether the nodes run the observer patch: every start of a patched node logs "observer patch
# active" (the image kafka-observer/kafka always has it; a vanilla image would ignore the lists).
# Looked for in the container logs of one running node per role.
nodes_patched() {
  local role id dir seen
  for role in controller broker; do
    seen=""
    for id in $(role_nodes "$role"); do
      # shellcheck disable=SC2312 # node_log empty (no log yet) gives dirname '.', skipped just below
      dir="$(dirname "$(node_log "$id")")"
      [[ "$dir" != . ]] && grep -qs "observer patch active" "$dir"/*.log* && { seen=$id; break; }
    done
    [[ -n "$seen" ]] || return 1
  done
}

# ---- the drill client: compiled once per source and Kafka version ----------------------------
kafka_lib() { echo "$KOO_CACHE/kafka/$KAFKA_VERSION/lib"; }
dc_classes() {
  local sum
  sum="$(cat "$root"/e2e/drills/kafka/java/*.java | sha256sum | cut -c1-12)"
  echo "$KOO_CACHE/drill-client/$KAFKA_VERSION-$sum"
}
dc_build() {
  local out
  out="$(dc_classes)"
  [[ -f "$out/DrillClient.class" ]] && return 0
  mkdir -p "$out.tmp"
  # shellcheck disable=SC2312 # kafka_lib only prints a path
  javac --release 17 -nowarn -cp "$(kafka_lib)/*" -d "$out.tmp" "$root"/e2e/drills/kafka/java/*.java >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
}
# dc <command> [args]: see the header of DrillClient.java.
dc() {
  local out b
  out="$(dc_classes)"
  b="$(bootstrap)" || return 1
  # shellcheck disable=SC2312 # kafka_lib only prints a path
  java -Xmx160m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -Djava.net.preferIPv4Stack=true \
    -Dlog4j2.configurationFile="$root/e2e/testbed/kafka/tools-log4j2.properties" \
    -cp "$out:$(kafka_lib)/*" DrillClient "$b" "$@"
}

# ---- nodes --------------------------------------------------------------------------------------
# node_stop <id>: kill -9 the node's JVM and keep it down until node_up (kafka.sh stop: its zone's
# node labelled to hold this namespace's pods, the JVM SIGKILLed in its container, the pod
# force-deleted; its replacement stays Pending). A plain `kafka.sh kill` would let the kubelet restart the container within seconds,
# while every scenario decides itself when the node comes back.
node_stop() {
  bash "$KAFKA_SH" stop "$1" >&2 || fail "kafka.sh stop $1 failed"
  local _
  for _ in $(seq 50); do node_running "$1" || return 0; sleep 0.2; done
  fail "node $1 still runs 10 s after kafka.sh stop"
}
# The nodes stopped with `kafka.sh stop` and not started since (kafka.sh's own record).
stopped_nodes() { cat "$kstate/stopped" 2>/dev/null || true; }
# node_up <id>...: start stopped nodes and wait until their pods are Ready (KAFKA_START_WAIT=0:
# do not wait). Releasing a node lets every stopped pod of the namespace there start, so kafka.sh
# wants all of them named at once: the other stopped nodes are added here (they would start anyway).
node_up() {
  local ids
  ids="$( { printf '%s\n' "$@"; stopped_nodes; } | sort -nu | paste -sd' ' -)"
  # shellcheck disable=SC2086 # one word per id
  bash "$KAFKA_SH" start $ids >&2
}
# node_pause <id>: SIGSTOP the node's JVM (a stall: alive to the kubelet, silent to Kafka, which
# fences it after broker.session.timeout.ms); restore_default sends SIGCONT to every paused JVM.
node_pause() {
  local pid
  pid="$(bash "$KAFKA_SH" jvm-pid "$1")" || fail "no JVM for node $1"
  pause_pid "$pid" "node $1"
}
# pause_pid <pid> <what>: SIGSTOP a JVM looked up before (a scenario whose next steps race a
# timer resolves the pid first, outside the race); resume_paused continues it.
pause_pid() {
  echo "$1" >> "$SCENARIO_DIR/paused"
  kill -STOP "$1" || fail "cannot SIGSTOP $2 (pid $1)"
}
resume_paused() {
  local pid
  [[ -f "$SCENARIO_DIR/paused" ]] || return 0
  while read -r pid; do kill -CONT "$pid" 2>/dev/null || true; done < "$SCENARIO_DIR/paused"
  rm -f "$SCENARIO_DIR/paused"
}
node_running() { bash "$KAFKA_SH" running "$1" 2>/dev/null; }
# node_scheduled <id>: the node's pod exists and is bound to the node (not a Pending replacement
# of a stopped node, which has no volume yet and mounts the ConfigMap as it is when it starts).
node_scheduled() {
  # shellcheck disable=SC2312 # a pod that cannot be read (deleted, being replaced) is not scheduled: that is the answer
  [[ -n "$(kubectl -n "$KAFKA_NS" get pod "$(node_pod "$1")" -o jsonpath='{.spec.nodeName}' 2>/dev/null)" ]]
}
# The node's data directory on the host: its local PersistentVolume (claim data-<pod>).
node_data() {
  local pv
  # shellcheck disable=SC2312 # node_pod only prints a name
  pv="$(kubectl -n "$KAFKA_NS" get pvc "data-$(node_pod "$1")" -o jsonpath='{.spec.volumeName}' 2>/dev/null)"
  [[ -n "$pv" ]] && kubectl get pv "$pv" -o jsonpath='{.spec.local.path}' 2>/dev/null
}

# ---- node logs ------------------------------------------------------------------------------------
# The node's current kafka container log on the host (CRI format: every line starts with
# "<RFC 3339 time> stdout F "; grep works on it as on a plain log). Its path changes when the
# container restarts (N.log) or the pod is replaced (a new pod directory), and the kubelet
# rotates it at 10 MiB (renamed, same inode).
node_log() { bash "$KAFKA_SH" log "$1" 2>/dev/null; }
# log_mark <node>: "<path> <inode> <size>" of the node's current log.
log_mark() {
  local p
  p="$(node_log "$1")"
  # shellcheck disable=SC2312 # stat of the file tested just before; a vanished file marks offset 0
  if [[ -n "$p" && -f "$p" ]]; then echo "$p $(stat -c '%i %s' "$p")"; else echo "- 0 0"; fi
}
# log_since <node> <mark> <extended regex>: the matching lines written after the mark. When the log
# changed file since (rotation, container restart, replaced pod), the rest of the marked file
# (found by its inode) and the whole current file.
log_since() {
  local path ino off cur old
  read -r path ino off <<< "$2"
  cur="$(node_log "$1")"
  {
    # shellcheck disable=SC2312 # a failed stat compares unequal: the log is read from its rotated file and the current one
    if [[ -n "$cur" && "$cur" == "$path" && "$(stat -c %i "$cur" 2>/dev/null)" == "$ino" ]]; then
      tail -c +"$((off + 1))" "$cur"
    else
      old=""
      [[ "$path" != - && -d "$(dirname "$path")" ]] &&
        old="$(find "$(dirname "$path")" -maxdepth 1 -type f -inum "$ino" 2>/dev/null | head -n1)"
      [[ -n "$old" ]] && tail -c +"$((off + 1))" "$old"
      [[ -n "$cur" && -f "$cur" ]] && cat "$cur"
    fi
  } | grep -E -- "$3"
}
# Strips the CRI prefix ("<time> stdout F ", after an optional "[<node>] ") from log lines, for notes.
cri_strip() { sed -E 's/^(\[[0-9]+\] )?[^ ]+ (stdout|stderr) [FP] /\1/'; }

# Short timeouts: right after the active controller dies, the survivors still name it for ~2 s and
# a tool with default timeouts would keep retrying the dead node for up to a minute. The
# controllers' pod IPs are read at call time: a replaced controller pod has a new one.
# active_controller: the quorum leader's id, or nothing when the tool gives no answer (a dead
# leader, a timeout); never fails, so a caller polling it is not ended by set -e. The tool's
# errors go to the scenario's quorum-tool.err.
active_controller() {
  local cb bb
  printf 'request.timeout.ms=2000\ndefault.api.timeout.ms=4000\n' > "$drill_work/quorum-tool.properties"
  cb="$(bash "$KAFKA_SH" controller-bootstrap 2>/dev/null)" || cb=""
  if [[ -n "$cb" ]] && quorum_leader --bootstrap-controller "$cb"; then return 0; fi
  # Through a broker, which forwards DescribeQuorum to the active controller: answers when the
  # controllers' own path does not. Kafka 4.1's ControllerRegistrationManager can stay stuck
  # after one timed-out registration ("channel manager timed out before sending the request",
  # then "waiting for the previous RPC to complete" for good: seen on a bed restarted while its
  # pods' DNS names still gave their old addresses), and a controller that never registered
  # is missing from what the controllers answer, so --bootstrap-controller times out on
  # "waiting for a node assignment" although the quorum is healthy.
  bb="$(broker_pod_ips)" || bb=""
  [[ -z "$bb" ]] || quorum_leader --bootstrap-server "$bb" || true
}
# quorum_leader --bootstrap-controller|--bootstrap-server ADDRS: prints the leader's id and
# succeeds, or fails printing nothing.
quorum_leader() {
  local status id
  status="$("$tb/bin/kafka-metadata-quorum" "$1" "$2" \
    --command-config "$drill_work/quorum-tool.properties" describe --status \
    2>>"${SCENARIO_DIR:-$drill_work}/quorum-tool.err")" || return 1
  id="$(sed -n 's/^LeaderId: *\([0-9]*\).*/\1/p' <<<"$status")"
  [[ -n "$id" ]] || return 1
  echo "$id"
}
# The brokers' pod IPs (port 9092), read at call time as the controllers' are.
broker_pod_ips() {
  kubectl -n "$KAFKA_NS" get pods -l app.kubernetes.io/component=broker \
    -o jsonpath='{range .items[*]}{.status.podIP}{":9092\n"}{end}' | grep -v '^:' | paste -sd, -
}
# current_active_controller: active_controller asked again until it answers (60 s): with the
# node's CPU busy (make test runs S1-S10 beside the Rust tests, which start a cluster of their
# own) one call's 2 s / 4 s timeouts can run out while the quorum is healthy, and right after a
# zone holding a controller came back every call failed for over 30 s once (two D20 back to
# back, 2026-12-04: "Timed out waiting for a node assignment. Call: listNodes"). Nothing if none.
current_active_controller() {
  local id deadline=$((SECONDS + 60))
  while id="$(active_controller)"; [[ -z "$id" ]]; do
    ((SECONDS < deadline)) || return 0
    sleep 1
  done
  echo "$id"
}

# ---- observer lists -----------------------------------------------------------------------------
# obs_dir <node>: the host path of the node's projected observer-ids volume (the kubelet's
# atomic-writer layout: ..<timestamp>/observer.ids, ..data -> ..<timestamp>, observer.ids ->
# ..data/observer.ids). Its pod's uid is in the path: a replaced pod has another one.
obs_dir() { bash "$KAFKA_SH" observer-dir "$1" 2>/dev/null; }
broker_env() { # broker_env <name> <default>: a setting of the brokers' kafka container
  local v
  v="$(kubectl -n "$KAFKA_NS" get statefulset kafka-broker \
    -o jsonpath="{.spec.template.spec.containers[?(@.name==\"kafka\")].env[?(@.name==\"$1\")].value}")"
  echo "${v:-$2}"
}
# shellcheck disable=SC2312 # obs_dir empty gives /observer.ids, which does not exist: the caller's read fails
obs_file() { echo "$(obs_dir "$1")/observer.ids"; }

# The ids an observer.ids text stands for, per the file contract (comment lines, separators,
# non-integer tokens ignored): "4" or "" or "3,4". Compared instead of bytes, since the seed and
# the operator render header comments.
ids_of() { grep -v '^[[:space:]]*#' | tr ', \t' '\n' | grep -E '^[0-9]+$' | sort -nu | paste -sd, - || true; }
# dir_shows <volume dir> <content>: the projected file has those ids and Kafka's user can read it
# (the test runs as root, which reads a chmod 000 file: the mode is checked instead).
dir_shows() {
  local f="$1/observer.ids" mode
  mode="$(stat -L -c %a "$f" 2>/dev/null)" || return 1
  (((8#$mode & 8#044) == 8#044)) || return 1
  # shellcheck disable=SC2312 # ids_of never fails; the file's existence and mode are checked just above
  [[ "$(ids_of < "$f" 2>/dev/null)" == "$(printf '%s' "$2" | ids_of)" ]]
}
# shellcheck disable=SC2312 # obs_dir empty gives a directory that does not exist: dir_shows is false
file_shows() { dir_shows "$(obs_dir "$1")" "$2"; }
# The ids the role's ConfigMap holds.
configmap_ids() {
  kubectl -n "$KAFKA_NS" get configmap "kafka-observers-$1" -o jsonpath='{.data.observer\.ids}' 2>/dev/null | ids_of
}

# nudge <role>: a new annotation on each of the role's pods; the kubelet then syncs the pod and
# re-projects its ConfigMap volume within ~1-2 s (unnudged: its next sync, up to 60-90 s).
nudge() {
  local id n
  n="$(date +%s%N)"
  for id in $(role_nodes "$1"); do
    # A stopped node's pod may be between deletion and re-creation: nothing to nudge then.
    kubectl -n "$KAFKA_NS" annotate pod "$(node_pod "$id")" "kafkaobserver.io/nudge=$n" --overwrite >/dev/null 2>&1 || true
  done
}

# Whether an operator runs: the Helm chart's pods (namespace kafka-observer-system) or the local
# process of e2e/testbed/operator.sh. Only for messages: ownership is the ConfigMaps' business.
operator_running() {
  live_pid "$tb/pids/operator.pid" >/dev/null && return 0
  kubectl -n kafka-observer-system get pods -l app.kubernetes.io/name=kafka-observer-operator \
    -o jsonpath='{.items[*].status.phase}' 2>/dev/null | grep -qw Running
}

# The ConfigMaps belong to an ObserverSet (the operator, as a pod of the Helm chart or a local
# process, reverts any direct edit): observer lists then change through its API,
# spec.promotion.promoted, and the operator rolls them out (controllers first). Prints the
# ObserverSet's name, or nothing. Owned = the ConfigMap carries the operator's labels AND that
# ObserverSet exists and is not being deleted: labels left behind by a deleted ObserverSet
# (deletionPolicy Retain) leave the ConfigMaps to the drills.
owning_observerset() {
  local name
  name="$(kubectl -n "$KAFKA_NS" get configmap kafka-observers-controller \
    -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.labels.kafkaobserver\.io/observerset}' 2>/dev/null |
    awk '$1 == "kafka-observer-operator" && $2 != "" {print $2}')"
  [[ -n "$name" ]] || return 0
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(kubectl -n "$KAFKA_NS" get observerset "$name" -o jsonpath='{.metadata.name}|{.metadata.deletionTimestamp}' 2>/dev/null)" == "$name|" ]] &&
    echo "$name"
  return 0
}

# wait_role_shows <role> <content> <timeout s>: until every node of the role whose pod is
# scheduled shows the content (a stopped node's Pending pod mounts the ConfigMap as it is when it
# starts). Sets LAST_FILE_CHANGE_MS to the moment the last node's file changed (the mtime of its
# ..data symlink, renamed in by the kubelet's atomic writer) and ROLE_PENDING to the nodes that
# did not show it in time (then returns non-zero).
wait_role_shows() {
  local role="$1" content="$2" id deadline still m=0 f
  local -A dir=()
  for id in $(role_nodes "$role"); do
    if node_scheduled "$id"; then dir[$id]="$(obs_dir "$id")"; else log "node $id is stopped: its pod mounts the list when it starts"; fi
  done
  deadline=$((SECONDS + $3))
  while :; do
    still=""
    for id in "${!dir[@]}"; do
      [[ -n "${dir[$id]}" && -d "${dir[$id]}" ]] || dir[$id]="$(obs_dir "$id")"
      dir_shows "${dir[$id]}" "$content" || still="$still $id"
    done
    ROLE_PENDING="$still"
    [[ -z "$still" ]] && break
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
  for id in "${!dir[@]}"; do
    f="$(stat -c %.3Y "${dir[$id]}/..data" 2>/dev/null | tr -d .)"
    [[ -n "$f" ]] && ((f > m)) && m=$f
  done
  # shellcheck disable=SC2034 # read by e2e/bench/kafka.sh
  LAST_FILE_CHANGE_MS="$m"
}

# set_observers <controller|broker> <content>: through the ConfigMap (or the owning ObserverSet)
# and a nudge of the role's pods, then waits until every scheduled node of the role shows the
# content (wait_role_shows, which sets LAST_FILE_CHANGE_MS).
set_observers() {
  local role="$1" content="$2" json owner timeout="${OBSERVER_SYNC_TIMEOUT_S:-40}" why=""
  owner="$(owning_observerset)"
  if [[ -n "$owner" ]]; then
    # promoted = the bed's observer unless the wanted list still holds it (both roles at once).
    local promoted="[]"
    # shellcheck disable=SC2312 # ids_of over a string never fails (it ends in || true)
    [[ ",$(printf '%s' "$content" | ids_of)," == *",$OBSERVER,"* ]] || promoted="[$OBSERVER]"
    kubectl -n "$KAFKA_NS" patch observerset "$owner" --type merge -p "{\"spec\":{\"promotion\":{\"promoted\":$promoted}}}" >/dev/null ||
      fail "kubectl patch observerset $owner failed"
    # The operator nudges the pods itself once it has written the ConfigMaps.
  else
    json="$(printf '%s' "$content" | python3 -c 'import json,sys; print(json.dumps({"data": {"observer.ids": sys.stdin.read()}}))')"
    kubectl -n "$KAFKA_NS" patch configmap "kafka-observers-$role" --type merge -p "$json" >/dev/null ||
      fail "kubectl patch configmap $KAFKA_NS/kafka-observers-$role failed"
    nudge "$role"
  fi
  if ! wait_role_shows "$role" "$content" "$timeout"; then
    [[ -n "$owner" ]] && why=" (through ObserverSet $KAFKA_NS/$owner$(operator_running || echo '; no operator seems to run'))"
    fail "observer.ids of $role node(s)$ROLE_PENDING did not show the new list within ${timeout}s$why"
  fi
  # shellcheck disable=SC2312 # message text only
  log "observers($role) = [$(printf '%s' "$content" | ids_of)] on every running $role${owner:+ (through ObserverSet $KAFKA_NS/$owner)}"
}

# Both roles, in the order the operator uses: controllers first (promotion and demotion).
set_observers_all() { set_observers controller "$1" && set_observers broker "$1"; }

# ---- scenario plumbing --------------------------------------------------------------------------
# run_scenarios NAME...: runs scenario_<name> for each, one after the other, each in a subshell
# with its own $SCENARIO_DIR ($drill_work/<NAME>: log, reason, topics), after `precondition` and
# followed by `restore_scenario` (restore_default unless the suite defines its own), failed or
# not. Prints "<NAME> PASS <s>s" or "<NAME> FAIL <reason> (<s>s)"; non-zero if any failed.
run_scenarios() {
  local s started rc took reason failed=0
  declare -F restore_scenario >/dev/null || restore_scenario() { restore_default; }
  # Called in an if, a ! or an && / || list, bash ignores set -e in everything below, the
  # scenario's subshell included: an assertion whose failure only set -e catches (a failed
  # `t=$(wait_sample ...)`) would not stop its drill. Refused rather than run half-blind.
  ( set -e; false; exit 0 )
  # shellcheck disable=SC2181 # the status of the probe just above, which cannot sit in an if
  if (($? == 0)); then
    echo "run_scenarios: called where set -e is ignored (inside an if, a ! or an && / || list): call it on its own line" >&2
    return 2
  fi
  for s in "$@"; do
    s="${s^^}"
    SCENARIO_DIR="$drill_work/$s"
    rm -rf "$SCENARIO_DIR" && mkdir -p "$SCENARIO_DIR"
    started=$(date +%s)
    (
      set -eE
      export SCENARIO_DIR
      # Restore even on failure; a failing restore fails the scenario too.
      trap 'rc=$?; trap - EXIT; restore_scenario || { [[ -s "$SCENARIO_DIR/reason" ]] || echo "could not restore the default state" > "$SCENARIO_DIR/reason"; rc=1; }; exit $rc' EXIT
      log "==== $s"
      precondition
      "scenario_${s,,}"
    ) > "$SCENARIO_DIR/log" 2>&1
    rc=$?
    took=$(($(date +%s) - started))
    # A fail inside a command substitution leaves its reason but may not end the subshell's
    # status: the reason alone fails the scenario.
    [[ $rc -ne 0 || ! -s "$SCENARIO_DIR/reason" ]] || rc=1
    if [[ $rc -eq 0 ]]; then
      echo "$s PASS ${took}s"
    else
      reason="$(head -n1 "$SCENARIO_DIR/reason" 2>/dev/null)"
      echo "$s FAIL ${reason:-exit $rc, see $SCENARIO_DIR/log} (${took}s)"
      # The log's end goes to CI's record too: the bed (and this file) is gone after the run.
      tail -n 25 "$SCENARIO_DIR/log" | sed "s/^/    $s| /"
      [[ ! -s "$SCENARIO_DIR/diagnosis" ]] || sed "s/^/    $s diagnosis| /" "$SCENARIO_DIR/diagnosis"
      failed=$((failed + 1))
    fi
  done
  [[ $failed -eq 0 ]]
}

# fail <reason>: ends the scenario (run in a subshell by run.sh) with that one-line reason. The
# first reason stays: a failing restore after a failed scenario does not hide why it failed.
fail() {
  if [[ ! -s "$SCENARIO_DIR/reason" ]]; then
    echo "$*" > "$SCENARIO_DIR/reason"
    # The state at the first failure, before the restore changes it (a suite may define
    # diagnose_failure; into a file: fail may run inside a command substitution).
    if declare -F diagnose_failure >/dev/null; then
      diagnose_failure > "$SCENARIO_DIR/diagnosis" 2>&1 || true
    fi
  fi
  log "FAIL: $*"
  exit 1
}
# expect <reason> <command...>: fail with the reason if the command fails; its stdout is echoed.
expect() { local why="$1"; shift; "$@" || fail "$why"; }
# shellcheck disable=SC2312 # date does not fail
new_topic() { echo "drill-$1-$(date +%s)"; }
create_topic() { # create_topic <topic> <assignment>: the observer first, min.insync.replicas=2
  dc create "$1" "$2" >&2 || fail "cannot create topic $1"
}
await() { # await <topic> <timeout ms> <cond...>: prints "<epoch ms> <state>"
  local t="$1" ms="$2" err rc=0 last; shift 2
  err="$SCENARIO_DIR/await.err"
  dc await "$t" "$ms" "$@" 2> "$err" || rc=$?
  cat "$err" >&2
  ((rc == 0)) && return 0
  # The reason carries the last state seen, so CI's one line says what the partition was doing.
  last="$(sed -n 's/.*; last: //p' "$err" | tail -n1)"
  fail "$t: not [$*] within ${ms} ms (last: ${last:-no answer})"
}
produce() { # produce <topic> <count> <acks> <prefix>: all must be acknowledged
  local out
  out="$(dc produce "$@")" || fail "produce $2 to $1 (acks=$3): $out"
  log "produce $1 $2 acks=$3: $out"
  echo "$out"
}
consume_count() { dc consume "$1" "$2" | sed -n 's/.*count=\([0-9]*\).*/\1/p'; }

start_watch() { # start_watch <topic> [broker ids whose partition size to sample]: sets WATCH_OUT
  WATCH_OUT="$SCENARIO_DIR/watch.txt"
  rm -f "$SCENARIO_DIR/watch.stop"
  dc watch "$1" "$WATCH_OUT" "${WATCH_PERIOD_MS:-200}" "$SCENARIO_DIR/watch.stop" "${@:2}" &
  WATCH_PID=$!
  wait_watch_samples 1
}
wait_watch_samples() { # wait_watch_samples <n>: until the watch has written n samples (30 s)
  local _
  for _ in $(seq 300); do
    # shellcheck disable=SC2312 # wc of the file tested just before: a failure is no count, the wait goes on
    [[ -f "$WATCH_OUT" && $(wc -l < "$WATCH_OUT") -ge $1 ]] && return 0
    sleep 0.1
  done
  fail "the watch client wrote no samples"
}
stop_watch() {
  [[ -n "${WATCH_PID:-}" ]] || return 0
  touch "$SCENARIO_DIR/watch.stop"
  wait "$WATCH_PID" 2>/dev/null || true
  WATCH_PID=""
}

# An ObserverSet with an automatic policy acts on the drills' failures (S4 kills every primary:
# UnderMinIsr would promote 4 by itself, and its auto-promotion would outlive the restore). The
# suite and the bench therefore set it to Manual for their run, wait until it holds no automatic
# promotion, and give the policy back at the end (give_back_policy).
take_manual_policy() {
  local owner policy auto
  owner="$(owning_observerset)"
  [[ -n "$owner" ]] || return 0
  policy="$(kubectl -n "$KAFKA_NS" get observerset "$owner" -o jsonpath='{.spec.promotion.policy}')"
  if [[ -n "$policy" && "$policy" != Manual ]]; then
    log "ObserverSet $KAFKA_NS/$owner has policy $policy: set to Manual while the Kafka drills run"
    echo "$owner $policy" > "$drill_work/policy-taken"
    kubectl -n "$KAFKA_NS" patch observerset "$owner" --type merge -p '{"spec":{"promotion":{"policy":"Manual"}}}' >/dev/null ||
      { log "cannot set ObserverSet $KAFKA_NS/$owner to Manual"; return 1; }
  fi
  for _ in $(seq 90); do
    auto="$(kubectl -n "$KAFKA_NS" get observerset "$owner" -o jsonpath='{.status.autoPromotions}')"
    [[ -z "$auto" || "$auto" == "[]" ]] && return 0
    sleep 1
  done
  log "ObserverSet $KAFKA_NS/$owner still holds automatic promotions after 90 s: $auto"
  return 1
}
give_back_policy() {
  local owner policy
  [[ -s "$drill_work/policy-taken" ]] || return 0
  read -r owner policy < "$drill_work/policy-taken"
  kubectl -n "$KAFKA_NS" patch observerset "$owner" --type merge -p "{\"spec\":{\"promotion\":{\"policy\":\"$policy\"}}}" >/dev/null &&
    log "ObserverSet $KAFKA_NS/$owner policy back to $policy"
  rm -f "$drill_work/policy-taken"
}

# start_down_nodes: every node whose JVM does not run (or that kafka.sh records as stopped),
# started in one call; returns non-zero if that fails.
start_down_nodes() {
  local id down=()
  for id in "${CONTROLLERS[@]}" "${BROKERS[@]}"; do node_running "$id" || down+=("$id"); done
  # shellcheck disable=SC2312 # stopped_nodes never fails (cat || true of kafka.sh's record)
  while read -r id; do [[ -n "$id" ]] && down+=("$id"); done < <(stopped_nodes)
  ((${#down[@]} == 0)) && return 0
  # shellcheck disable=SC2312 # printf/sort over an array
  mapfile -t down < <(printf '%s\n' "${down[@]}" | sort -un)
  log "nodes down: ${down[*]}: starting them"
  node_up "${down[@]}"
}

# Before a scenario: every node running and every broker registered and unfenced (the bed is
# shared; someone may have stopped a node since the last restore).
precondition() {
  start_down_nodes || fail "precondition: the stopped nodes do not start"
  dc brokers 4 90000 >&2 || fail "precondition: not every broker is registered and unfenced"
}

# The bed's default: every node running, broker 4 observer on every node and in no ISR, the
# scenario's topic gone. Runs at the end of every scenario, failed or not.
restore_default() {
  local id role bad=0 dir
  stop_watch
  resume_paused
  start_down_nodes || { log "restore: the stopped nodes do not start"; bad=1; }
  # Undo direct edits of a projected file (S7): the mode and the visible symlink here; the
  # content (and a ..data the kubelet no longer knows) through a nudge below: the kubelet
  # re-projects whenever a file differs from its ConfigMap.
  for id in "${CONTROLLERS[@]}" "${BROKERS[@]}"; do
    dir="$(obs_dir "$id")"
    [[ -n "$dir" && -d "$dir" ]] || continue
    [[ -e "$dir/..data/observer.ids" ]] && chmod 644 "$dir/..data/observer.ids"
    [[ -L "$dir/observer.ids" || ! -e "$dir/..data" ]] || { rm -f "$dir/observer.ids"; ln -s ..data/observer.ids "$dir/observer.ids"; }
  done
  # The lists: through set_observers when a ConfigMap (or the owning ObserverSet) does not hold
  # the default; else a nudge, so the kubelet re-projects any file that differs from it.
  local default owner promoted=""
  # shellcheck disable=SC2312 # ids_of over a string never fails; owning_observerset never fails
  default="$(printf '%s' "$DEFAULT_OBSERVERS" | ids_of)" owner="$(owning_observerset)"
  [[ -n "$owner" ]] && promoted="$(kubectl -n "$KAFKA_NS" get observerset "$owner" -o jsonpath='{.spec.promotion.promoted}')"
  for role in controller broker; do
    # shellcheck disable=SC2312 # a ConfigMap that cannot be read counts as differing: the default is set again, the safe answer
    if [[ "$(configmap_ids "$role")" != "$default" || ( -n "$promoted" && "$promoted" != "[]" ) ]]; then
      (set_observers "$role" "$DEFAULT_OBSERVERS") || bad=1
    else
      nudge "$role"
      wait_role_shows "$role" "$DEFAULT_OBSERVERS" 30 ||
        { log "restore: node(s)$ROLE_PENDING do not show the default list 30 s after a nudge"; bad=1; }
    fi
  done
  # Every topic the scenario created (drill_topic records them; it runs in a subshell).
  if [[ -f "$SCENARIO_DIR/topics" ]]; then
    while read -r id; do dc delete "$id" >&2 < /dev/null || { log "restore: cannot delete $id"; bad=1; }; done < "$SCENARIO_DIR/topics"
  fi
  dc brokers 4 90000 >&2 || bad=1
  if ! dc observer-free "$OBSERVER" 30000 >&2; then
    # A demoted broker that still leads keeps its leadership until the next partition change:
    # a controlled restart moves it (the controller no longer accepts it as leader).
    log "restore: broker $OBSERVER still leads or sits in an ISR: restarting it"
    bash "$KAFKA_SH" restart "$OBSERVER" >&2 || bad=1
    dc observer-free "$OBSERVER" 60000 >&2 || bad=1
  fi
  return "$bad"
}
