# Shared pieces of the Kafka failure suite (e2e/drills/kafka/run.sh) and the Kafka bench
# (e2e/bench/kafka.sh): the drill client, node control, observer-list changes and the restore to
# the bed's default state (broker 4 observer everywhere, every node running). Sourced, never run.
#
# How observer lists change: when the bed's control plane is up (.testbed/kubeconfig and /readyz
# ok), exactly as in a cluster: patch the ConfigMap kafka-observers-<role>, annotate the role's
# pods so the kubelet stand-in syncs at once, then wait until every node's projected file shows the
# new content. Without a control plane (developing the Kafka side alone with `kafka.sh up`), the
# same files are written here in the kubelet's atomic-writer layout. Scenarios that simulate a
# broken file (S7: chmod 000, garbage, deletion) edit a node's projected file directly, because
# that is the failure they simulate.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
source "$root/e2e/versions.env"
tb="$root/.testbed"
kdir="$tb/kafka"
KAFKA_SH="$root/e2e/testbed/kafka.sh"
CONTROLLERS=(101 102 103)
BROKERS=(1 2 3 4)
OBSERVER=4
DEFAULT_OBSERVERS=$'4\n'
drill_work="${DRILL_WORK:-$tb/drills/kafka}"
mkdir -p "$drill_work"

note() { echo "[$(date -u +%T)] $*" >&2; }
now_ms() { date +%s%3N; }
bootstrap() { cat "$kdir/bootstrap"; }

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
  javac --release 17 -nowarn -cp "$(kafka_lib)/*" -d "$out.tmp" "$root"/e2e/drills/kafka/java/*.java >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
}
# dc <command> [args]: see the header of DrillClient.java.
dc() {
  local out
  out="$(dc_classes)"
  java -Xmx160m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -Djava.net.preferIPv4Stack=true \
    -Dlog4j2.configurationFile="$root/e2e/testbed/kafka/tools-log4j2.properties" \
    -cp "$out:$(kafka_lib)/*" DrillClient "$(bootstrap)" "$@"
}

# ---- nodes --------------------------------------------------------------------------------------
node_up() { bash "$KAFKA_SH" start "$1" >&2; }
node_kill() { bash "$KAFKA_SH" kill "$1" >&2; }
node_stop() { bash "$KAFKA_SH" stop "$1" >&2; }
node_running() { [[ -f "$tb/pids/kafka-$1.pid" ]] && kill -0 "$(cat "$tb/pids/kafka-$1.pid")" 2>/dev/null; }
node_log() { echo "$tb/logs/kafka-$1.log"; }
log_mark() { stat -c %s "$(node_log "$1")"; }
# log_since <node> <mark> <extended regex>: the matching lines written after the mark.
log_since() { tail -c +"$(($2 + 1))" "$(node_log "$1")" | grep -E -- "$3"; }
node_pod() { if (($1 >= 101)); then echo "kafka-controller-$(($1 - 101))"; else echo "kafka-broker-$(($1 - 1))"; fi; }
obs_dir() { echo "$tb/pods/kafka/$(node_pod "$1")/volumes/observer-ids"; }
obs_file() { echo "$(obs_dir "$1")/observer.ids"; }
role_nodes() { if [[ $1 == controller ]]; then echo "${CONTROLLERS[@]}"; else echo "${BROKERS[@]}"; fi; }
# Short timeouts: right after the active controller dies, the survivors still name it for ~2 s and
# a tool with default timeouts would keep retrying the dead node for up to a minute.
active_controller() {
  printf 'request.timeout.ms=2000\ndefault.api.timeout.ms=4000\n' > "$drill_work/quorum-tool.properties"
  "$tb/bin/kafka-metadata-quorum" --bootstrap-controller "$(cat "$kdir/controller-bootstrap")" \
    --command-config "$drill_work/quorum-tool.properties" describe --status 2>/dev/null |
    sed -n 's/^LeaderId: *\([0-9]*\).*/\1/p'
}

# ---- observer lists -----------------------------------------------------------------------------
kubectl() { "$tb/bin/kubectl" --kubeconfig "$tb/kubeconfig" "$@"; }
control_plane_up() {
  [[ -f "$tb/kubeconfig" && -x "$tb/bin/kubectl" ]] && [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]]
}
standin_up() { [[ -f "$tb/pids/kubelet-standin.pid" ]] && kill -0 "$(cat "$tb/pids/kubelet-standin.pid")" 2>/dev/null; }
# configmap (the real path) when the control plane answers and the kubelet stand-in runs; local
# otherwise. DRILL_OBSERVERS_VIA=configmap|local forces one (configmap on a half bed then fails).
observers_via() {
  case "${DRILL_OBSERVERS_VIA:-auto}" in
    configmap | local) echo "$DRILL_OBSERVERS_VIA" ;;
    *) if control_plane_up && standin_up; then echo configmap; else echo local; fi ;;
  esac
}

# The kubelet's atomic-writer layout, for benches/drills run without the control plane:
# ..<timestamp>/observer.ids, ..data -> ..<timestamp> swapped by rename, observer.ids -> ..data/observer.ids.
project_locally() { # project_locally <node> <content>
  local dir ts old
  dir="$(obs_dir "$1")" ts="..$(date -u +%Y_%m_%d_%H_%M_%S.%N)"
  mkdir -p "$dir/$ts"
  printf '%s' "$2" > "$dir/$ts/observer.ids"
  chmod 644 "$dir/$ts/observer.ids"
  old="$(readlink "$dir/..data" 2>/dev/null || true)"
  ln -sfn "$ts" "$dir/..data_tmp" && mv -T "$dir/..data_tmp" "$dir/..data"
  [[ -L "$dir/observer.ids" ]] || { rm -f "$dir/observer.ids"; ln -s ..data/observer.ids "$dir/observer.ids"; }
  [[ -n "$old" && "$old" != "$ts" ]] && rm -rf "${dir:?}/$old"
  return 0
}

# The ids an observer.ids text stands for, per the file contract (comment lines, separators,
# non-integer tokens ignored): "4" or "" or "3,4". Compared instead of bytes, since the operator
# renders its own header comments.
ids_of() { grep -v '^[[:space:]]*#' | tr ', \t' '\n\n\n' | grep -E '^[0-9]+$' | sort -nu | paste -sd, - || true; }
file_shows() { [[ "$(ids_of < "$(obs_file "$1")" 2>/dev/null)" == "$(printf '%s' "$2" | ids_of)" && -r "$(obs_file "$1")" ]]; }

# The ConfigMaps belong to an ObserverSet (the operator runs on the bed and reverts any direct
# edit): observer lists then change through its API, spec.promotion.promoted, and the operator
# rolls them out (controllers first). Prints the ObserverSet's name, or nothing.
# Only while the operator runs (e2e/testbed/operator.sh's pid file) and the ObserverSet exists: a
# label left behind by a stopped operator leaves the ConfigMaps to the drills.
owning_observerset() {
  local name
  [[ -f "$tb/pids/operator.pid" ]] && kill -0 "$(cat "$tb/pids/operator.pid")" 2>/dev/null || return 0
  name="$(kubectl -n kafka get configmap kafka-observers-controller \
    -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.labels.kafkaobserver\.io/observerset}' 2>/dev/null |
    awk '$1 == "kafka-observer-operator" && $2 != "" {print $2}')"
  [[ -n "$name" ]] && kubectl -n kafka get observerset "$name" >/dev/null 2>&1 && echo "$name"
  return 0
}

# set_observers <controller|broker> <content>: through the ConfigMap when the control plane is up,
# then waits until every node of the role shows the content. Sets LAST_FILE_CHANGE_MS to the moment
# the last node's file changed (the mtime of its ..data symlink, renamed in by the atomic writer).
set_observers() {
  local role="$1" content="$2" id pending deadline json n
  local owner=""
  [[ "${OBSERVERS_VIA:=$(observers_via)}" == configmap ]] && owner="$(owning_observerset)"
  if [[ -n "$owner" ]]; then
    # promoted = the bed's observer unless the wanted list still holds it (both roles at once).
    local promoted="[]"
    [[ ",$(printf '%s' "$content" | ids_of)," == *",$OBSERVER,"* ]] || promoted="[$OBSERVER]"
    kubectl -n kafka patch observerset "$owner" --type merge -p "{\"spec\":{\"promotion\":{\"promoted\":$promoted}}}" >/dev/null ||
      fail "kubectl patch observerset $owner failed"
  elif [[ "$OBSERVERS_VIA" == configmap ]]; then
    json="$(printf '%s' "$content" | python3 -c 'import json,sys; print(json.dumps({"data": {"observer.ids": sys.stdin.read()}}))')"
    kubectl -n kafka patch configmap "kafka-observers-$role" --type merge -p "$json" >/dev/null ||
      fail "kubectl patch configmap kafka-observers-$role failed"
    n="$(date +%s%N)"
    for id in $(role_nodes "$role"); do
      kubectl -n kafka annotate pod "$(node_pod "$id")" "kafkaobserver.io/nudge=$n" --overwrite >/dev/null ||
        fail "kubectl annotate pod $(node_pod "$id") failed"
    done
  else
    for id in $(role_nodes "$role"); do project_locally "$id" "$content"; done
  fi
  pending="$(role_nodes "$role")" deadline=$(($(date +%s) + ${OBSERVER_SYNC_TIMEOUT_S:-40}))
  while [[ -n "${pending// /}" ]]; do
    local still=""
    for id in $pending; do file_shows "$id" "$content" || still="$still $id"; done
    pending="$still"
    [[ -z "${pending// /}" ]] && break
    (($(date +%s) < deadline)) || fail "observer.ids of $role node(s)$pending did not show the new list within ${OBSERVER_SYNC_TIMEOUT_S:-40}s${owner:+ (through ObserverSet kafka/$owner)}"
    sleep 0.02
  done
  # When the files changed: the newest ..data symlink of the role (the atomic writer's rename).
  local m=0 f
  for id in $(role_nodes "$role"); do
    f="$(stat -c %.3Y "$(obs_dir "$id")/..data" 2>/dev/null | tr -d .)"
    [[ -n "$f" ]] && ((f > m)) && m=$f
  done
  LAST_FILE_CHANGE_MS="$m"
  note "observers($role) = [$(printf '%s' "$content" | ids_of)] on every $role${owner:+ (through ObserverSet kafka/$owner)}"
}

# Both roles, in the order the operator uses: controllers first (promotion and demotion).
set_observers_all() { set_observers controller "$1" && set_observers broker "$1"; }

# ---- scenario plumbing --------------------------------------------------------------------------
# fail <reason>: ends the scenario (run in a subshell by run.sh) with that one-line reason.
fail() {
  echo "$*" > "$SCENARIO_DIR/reason"
  note "FAIL: $*"
  exit 1
}
# expect <reason> <command...>: fail with the reason if the command fails; its stdout is echoed.
expect() { local why="$1"; shift; "$@" || fail "$why"; }
new_topic() { echo "drill-$1-$(date +%s)"; }
create_topic() { # create_topic <topic> <assignment>: the observer first, min.insync.replicas=2
  dc create "$1" "$2" >&2 || fail "cannot create topic $1"
}
await() { # await <topic> <timeout ms> <cond...>: prints "<epoch ms> <state>"
  local t="$1" ms="$2"; shift 2
  dc await "$t" "$ms" "$@" || fail "$t: not [$*] within ${ms} ms"
}
produce() { # produce <topic> <count> <acks> <prefix>: all must be acknowledged
  local out
  out="$(dc produce "$@")" || fail "produce $2 to $1 (acks=$3): $out"
  note "produce $1 $2 acks=$3: $out"
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
  local i
  for i in $(seq 300); do
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
  local owner policy auto i
  [[ "$(observers_via)" == configmap ]] || return 0
  owner="$(owning_observerset)"
  [[ -n "$owner" ]] || return 0
  policy="$(kubectl -n kafka get observerset "$owner" -o jsonpath='{.spec.promotion.policy}')"
  if [[ -n "$policy" && "$policy" != Manual ]]; then
    note "ObserverSet kafka/$owner has policy $policy: set to Manual while the Kafka drills run"
    echo "$owner $policy" > "$drill_work/policy-taken"
    kubectl -n kafka patch observerset "$owner" --type merge -p '{"spec":{"promotion":{"policy":"Manual"}}}' >/dev/null ||
      { note "cannot set ObserverSet kafka/$owner to Manual"; return 1; }
  fi
  for i in $(seq 90); do
    auto="$(kubectl -n kafka get observerset "$owner" -o jsonpath='{.status.autoPromotions}')"
    [[ -z "$auto" || "$auto" == "[]" ]] && return 0
    sleep 1
  done
  note "ObserverSet kafka/$owner still holds automatic promotions after 90 s: $auto"
  return 1
}
give_back_policy() {
  local owner policy
  [[ -s "$drill_work/policy-taken" ]] || return 0
  read -r owner policy < "$drill_work/policy-taken"
  kubectl -n kafka patch observerset "$owner" --type merge -p "{\"spec\":{\"promotion\":{\"policy\":\"$policy\"}}}" >/dev/null &&
    note "ObserverSet kafka/$owner policy back to $policy"
  rm -f "$drill_work/policy-taken"
}

# Before a scenario: every node running and every broker registered and unfenced (the bed is
# shared; someone may have stopped a node since the last restore).
precondition() {
  local id
  for id in "${CONTROLLERS[@]}" "${BROKERS[@]}"; do
    node_running "$id" || { note "precondition: node $id was down: starting it"; node_up "$id"; }
  done
  dc brokers 4 90000 >&2 || fail "precondition: not every broker is registered and unfenced"
}

# The bed's default: every node running, broker 4 observer on every node and in no ISR, the
# scenario's topic gone. Runs at the end of every scenario, failed or not.
restore_default() {
  local id role bad=0 dir
  stop_watch
  # Undo direct edits of a projected file (S7): mode, content, the visible symlink.
  for id in "${CONTROLLERS[@]}" "${BROKERS[@]}"; do
    dir="$(obs_dir "$id")"
    [[ -e "$dir/..data/observer.ids" ]] && chmod 644 "$dir/..data/observer.ids"
    [[ -L "$dir/observer.ids" || ! -e "$dir/..data" ]] || { rm -f "$dir/observer.ids"; ln -s ..data/observer.ids "$dir/observer.ids"; }
  done
  for id in "${CONTROLLERS[@]}" "${BROKERS[@]}"; do
    node_running "$id" || node_up "$id" || { note "restore: node $id does not start"; bad=1; }
  done
  for role in controller broker; do
    for id in $(role_nodes "$role"); do
      if ! file_shows "$id" "$DEFAULT_OBSERVERS"; then
        (set_observers "$role" "$DEFAULT_OBSERVERS") || bad=1
        break
      fi
    done
  done
  # Every topic the scenario created (drill_topic records them; it runs in a subshell).
  for id in $(cat "$SCENARIO_DIR/topics" 2>/dev/null); do dc delete "$id" >&2 || { note "restore: cannot delete $id"; bad=1; }; done
  dc brokers 4 90000 >&2 || bad=1
  if ! dc observer-free "$OBSERVER" 30000 >&2; then
    # A demoted broker that still leads keeps its leadership until the next partition change:
    # a controlled restart moves it (the controller no longer accepts it as leader).
    note "restore: broker $OBSERVER still leads or sits in an ISR: restarting it"
    bash "$KAFKA_SH" restart "$OBSERVER" >&2 || bad=1
    dc observer-free "$OBSERVER" 60000 >&2 || bad=1
  fi
  return "$bad"
}
