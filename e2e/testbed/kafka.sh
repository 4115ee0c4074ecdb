#!/usr/bin/env bash
# The test bed's Apache Kafka KRaft cluster: 3 dedicated controllers (101-103 on 127.0.1.10x:9093)
# and 4 brokers (1-4 on 127.0.1.x:9092), local java processes with the observer patch jar first on
# the classpath when $KAFKA_PATCH_JAR or .testbed/kafka/patch-jar names one (vanilla otherwise).
#
#   kafka.sh up                         configure, format once, start what is not running, wait healthy
#   kafka.sh start|stop|kill|restart ID stop = SIGTERM + wait (controlled shutdown); kill = kill -9
#   kafka.sh down                       stop every node that has a pid file (brokers, then controllers)
#   kafka.sh status                     per node: pid alive, port answering
#   kafka.sh wrappers                   (re)generate the .testbed/bin tool wrappers only
#
# Environment: KAFKA_VERSION (e2e/versions.env), KAFKA_PATCH_JAR (recorded into
# .testbed/kafka/patch-jar by `up`), KAFKA_REPLICA_LAG_TIME_MAX_MS (10000),
# KAFKA_OBSERVER_IDS_TTL_MS (500), KAFKA_OBSERVER_FALLBACK_IDS (4: every node's
# KAFKA_OBSERVER_BROKER_IDS, used only while its observer.ids file is missing), KAFKA_START_WAIT=0 (start/restart return without waiting for
# "Kafka Server started"), KAFKA_START_TIMEOUT_S (120), KAFKA_STOP_TIMEOUT_S (60, then kill -9),
# KAFKA_NODE_HEAP_OPTS, KAFKA_TOOL_HEAP_OPTS, KAFKA_JVM_OPTS, KAFKA_CDS=off.
# Any other setting: key=value lines in .testbed/kafka/overrides.properties, applied to every node
# at its next start, then .testbed/kafka/nodes/<id>/overrides.properties for that node only.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/e2e/versions.env"
source "$here/kafka/lib.sh"
source "$here/kafka/cds.sh"
source "$here/kafka/wrappers.sh"

# A zombie still answers kill -0; only a running or sleeping process counts as alive.
alive() { [[ -e "/proc/$1" ]] && ! grep -q '^[^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

launch_node() {
  local id="$1" dir log pidfile cp cds
  dir="$(node_dir "$id")" log="$(node_log "$id")" pidfile="$(node_pidfile "$id")"
  cp="$(kafka_classpath)" && cds="$(cds_opts "node-$id")" || exit 1
  rm -f "$pidfile"
  echo "==== $(date -u +%FT%TZ) kafka.sh: starting node $id ($(node_role "$id"), pod $(node_pod "$id")): $(describe_classpath)" >> "$log"
  # Where kafka.sh waits for this start's "Kafka Server started" line.
  stat -c %s "$log" > "$dir/start-offset"
  # The kubelet stand-in projects observer.ids; it may not exist yet, and is never created here.
  # setsid: the node outlives the shell that started it. The inner shell writes its own pid, then
  # execs java, so the pid file names the JVM itself.
  # KAFKA_OBSERVER_BROKER_IDS is the pod spec's static fail-safe for a missing file (contract:
  # missing file -> this variable -> empty): a deleted file then keeps the bed's default observer.
  # As root, the JVM runs without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH (like Kafka's non-root
  # container user), so file permissions apply to it: a chmod 000 observer.ids is really unreadable.
  # shellcheck disable=SC2016,SC2086
  KAFKA_OBSERVER_IDS_FILE="$(node_observer_file "$id")" KAFKA_OBSERVER_IDS_TTL_MS="$KAFKA_OBSERVER_IDS_TTL_MS" \
    KAFKA_OBSERVER_BROKER_IDS="$KAFKA_OBSERVER_FALLBACK_IDS" \
    setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pidfile" \
    $(drop_dac_caps) java $KAFKA_NODE_HEAP_OPTS $KAFKA_JVM_OPTS $cds \
    -Dkafka.logs.dir="$dir/logs" -Dlog4j2.configurationFile="$tmpl/log4j2.properties" \
    -cp "$cp" kafka.Kafka "$dir/server.properties" >> "$log" 2>&1 < /dev/null &
  local i
  for i in $(seq 50); do [[ -s "$pidfile" ]] && break; sleep 0.1; done
  [[ -s "$pidfile" ]] || die "node $id did not start: see $log"
  say "node $id started (pid $(cat "$pidfile")), log $log"
}

# Until this start's log shows "Kafka Server started" (a broker logs it only once unfenced).
wait_started() {
  local id="$1" deadline="$2" log offset pid
  log="$(node_log "$id")" offset="$(cat "$(node_dir "$id")/start-offset")"
  # Not `tail | grep -q`: grep quitting at the match kills tail with SIGPIPE, and with pipefail a
  # long log then never counts as started.
  while ! grep -q 'Kafka Server started' < <(tail -c +"$((offset + 1))" "$log"); do
    pid="$(cat "$(node_pidfile "$id")" 2>/dev/null || true)"
    if [[ -z "$pid" ]] || ! alive "$pid"; then
      tail -n 20 "$log" >&2
      die "node $id exited during startup: see $log"
    fi
    [[ $(date +%s) -lt $deadline ]] || die "node $id not started after ${KAFKA_START_TIMEOUT_S}s: see $log"
    sleep 0.3
  done
}

start_node() {
  local id="$1" pid
  mkdir -p "$tb/logs" "$tb/pids" "$kdir"
  if pid="$(node_pid "$id")"; then say "node $id already running (pid $pid)"; return 0; fi
  render_config "$id"
  format_node "$id"
  launch_node "$id"
}

# Wait for exit; a zombie (parent not yet reaped) counts as exited.
wait_exit() {
  local pid="$1" timeout_s="$2" i
  for i in $(seq $((timeout_s * 10))); do alive "$pid" || return 0; sleep 0.1; done
  return 1
}

stop_node() {
  local id="$1" pid started
  if ! pid="$(node_pid "$id")"; then say "node $id not running"; rm -f "$(node_pidfile "$id")"; return 0; fi
  started=$(date +%s%N)
  kill -TERM "$pid"
  if ! wait_exit "$pid" "$KAFKA_STOP_TIMEOUT_S"; then
    say "node $id (pid $pid) ignored SIGTERM for ${KAFKA_STOP_TIMEOUT_S}s: kill -9"
    kill -9 "$pid" 2>/dev/null || true
    wait_exit "$pid" 10 || die "node $id (pid $pid) survived kill -9"
  fi
  rm -f "$(node_pidfile "$id")"
  say "node $id stopped (pid $pid, $((($(date +%s%N) - started) / 1000000)) ms)"
}

kill_node() {
  local id="$1" pid
  if ! pid="$(node_pid "$id")"; then say "node $id not running"; rm -f "$(node_pidfile "$id")"; return 0; fi
  kill -9 "$pid"
  wait_exit "$pid" 10 || die "node $id (pid $pid) survived kill -9"
  rm -f "$(node_pidfile "$id")"
  say "node $id killed (pid $pid)"
}

# The cluster as the tools see it: voters in the quorum and unfenced registered brokers.
quorum_voters() {
  KOO_KAFKA_CLASSLIST="$(cds_tool_list quorum)" "$tb/bin/kafka-metadata-quorum" --bootstrap-controller "$(controller_bootstrap)" describe --status \
    2>/dev/null | grep '^CurrentVoters:' | grep -o '"id": *[0-9]*' | wc -l
}
unfenced_brokers() {
  KOO_KAFKA_CLASSLIST="$(cds_tool_list cluster)" "$tb/bin/kafka-cluster" list-endpoints --bootstrap-server "$(broker_bootstrap)" --include-fenced-brokers \
    2>/dev/null | grep -cw unfenced
}

wait_healthy() {
  local deadline="$1" voters=0 brokers=0
  while true; do
    voters="$(quorum_voters || true)"
    [[ "$voters" == "${#CONTROLLER_IDS[@]}" ]] && brokers="$(unfenced_brokers || true)"
    [[ "$voters" == "${#CONTROLLER_IDS[@]}" && "$brokers" == "${#BROKER_IDS[@]}" ]] && break
    [[ $(date +%s) -lt $deadline ]] ||
      die "cluster not healthy after ${KAFKA_START_TIMEOUT_S}s: $voters voters, $brokers unfenced brokers (see $tb/logs/kafka-*.log)"
    sleep 1
  done
  say "quorum has $voters voters, $brokers brokers registered and unfenced"
}

cmd_up() {
  local started id pid cp pids=() deadline
  started=$(date +%s%N)
  mkdir -p "$tb/logs" "$tb/pids" "$kdir"
  record_patch_jar
  say "$(describe_classpath)"
  echo "$(broker_bootstrap)" > "$kdir/bootstrap"
  echo "$(controller_bootstrap)" > "$kdir/controller-bootstrap"
  cluster_id > /dev/null
  generate_wrappers
  local to_start=()
  cp="$(kafka_classpath)" || exit 1
  for id in "${ALL_IDS[@]}"; do
    if pid="$(node_pid "$id")"; then
      say "node $id already running (pid $pid), left alone"
      # Restarting is the caller's call; a silent mix of classpaths is not.
      tr '\0' '\n' < "/proc/$pid/cmdline" | grep -qxF "$cp" ||
        say "WARNING: node $id runs with another classpath than '$cp': 'kafka.sh restart $id' to switch"
    else
      to_start+=("$id")
    fi
  done
  for id in "${to_start[@]}"; do render_config "$id"; done
  # Format in parallel: one short JVM per unformatted node.
  for id in "${to_start[@]}"; do
    is_formatted "$id" || { format_node "$id" & pids+=($!); }
  done
  for pid in "${pids[@]}"; do wait "$pid" || die "storage format failed"; done
  for id in "${to_start[@]}"; do launch_node "$id"; done
  deadline=$(($(date +%s) + KAFKA_START_TIMEOUT_S))
  for id in "${to_start[@]}"; do wait_started "$id" "$deadline"; done
  wait_healthy "$deadline"
  cds_build_async
  say "up in $((($(date +%s%N) - started) / 1000000)) ms; bootstrap $(cat "$kdir/bootstrap")"
}

cmd_down() {
  local group id jobs
  cds_stop_builder
  for group in brokers controllers; do
    jobs=()
    if [[ $group == brokers ]]; then set -- "${BROKER_IDS[@]}"; else set -- "${CONTROLLER_IDS[@]}"; fi
    for id in "$@"; do
      [[ -f "$(node_pidfile "$id")" ]] || continue
      stop_node "$id" & jobs+=($!)
    done
    for id in "${jobs[@]}"; do wait "$id" || true; done
  done
}

cmd_status() {
  local id pid state port
  printf '%-5s %-10s %-18s %-17s %-8s %-8s %s\n' NODE ROLE POD LISTENER PID PROCESS PORT
  for id in "${ALL_IDS[@]}"; do
    pid="$(node_pid "$id" || true)"
    state=down port=closed
    [[ -n "$pid" ]] && state=running
    port_open "$(node_addr "$id")" "$(node_port "$id")" && port=open
    printf '%-5s %-10s %-18s %-17s %-8s %-8s %s\n' "$id" "$(node_role "$id")" "$(node_pod "$id")" \
      "$(node_addr "$id"):$(node_port "$id")" "${pid:--}" "$state" "$port"
  done
  (describe_classpath) || true
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

start_and_wait() {
  start_node "$1"
  [[ "${KAFKA_START_WAIT:-1}" == 0 ]] || wait_started "$1" $(($(date +%s) + KAFKA_START_TIMEOUT_S))
}

main() {
  local cmd="${1:-}"
  case "$cmd" in up | start | restart | wrappers) cds_init ;; esac
  case "$cmd" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    wrappers) generate_wrappers ;;
    start | stop | kill | restart)
      [[ $# -eq 2 ]] || usage
      check_node_id "$2"
      case "$cmd" in
        start) generate_wrappers; start_and_wait "$2" ;;
        stop) stop_node "$2" ;;
        kill) kill_node "$2" ;;
        restart) stop_node "$2"; start_and_wait "$2" ;;
      esac
      ;;
    *) usage ;;
  esac
}

main "$@"
