# Shared definitions for e2e/testbed/kafka.sh: the node table, paths, the classpath (with the
# observer patch jar first when one is named), config rendering and storage formatting.
# Sourced, never run. Expects $root (repo root) and e2e/versions.env already sourced.

tb="$root/.testbed"
kdir="$tb/kafka"
tmpl="$root/e2e/testbed/kafka"
CONTROLLER_IDS=(101 102 103)
BROKER_IDS=(1 2 3 4)
ALL_IDS=("${CONTROLLER_IDS[@]}" "${BROKER_IDS[@]}")

# Deterministic ids (base64url of 16 ASCII bytes) so every format of every node agrees and a
# re-created bed keeps the same identity. .testbed/kafka/cluster-id stays the source of truth.
DEFAULT_CLUSTER_ID="a29vLXRlc3RiZWQtMDAwMQ" # "koo-testbed-0001"

KAFKA_NODE_HEAP_OPTS="${KAFKA_NODE_HEAP_OPTS:--Xmx256m -Xms128m}"
KAFKA_TOOL_HEAP_OPTS="${KAFKA_TOOL_HEAP_OPTS:--Xmx192m -Xms32m}"
# C1 only and the serial collector: seven nodes and their tools share two busy cores.
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true}"
KAFKA_REPLICA_LAG_TIME_MAX_MS="${KAFKA_REPLICA_LAG_TIME_MAX_MS:-10000}"
KAFKA_OBSERVER_IDS_TTL_MS="${KAFKA_OBSERVER_IDS_TTL_MS:-500}"
KAFKA_OBSERVER_FALLBACK_IDS="${KAFKA_OBSERVER_FALLBACK_IDS-4}"
KAFKA_STOP_TIMEOUT_S="${KAFKA_STOP_TIMEOUT_S:-60}"
KAFKA_START_TIMEOUT_S="${KAFKA_START_TIMEOUT_S:-120}"

say() { echo "kafka.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

is_controller() { [[ "$1" -ge 101 ]]; }
node_role() { if is_controller "$1"; then echo controller; else echo broker; fi; }
node_addr() { echo "127.0.1.$1"; }
node_port() { if is_controller "$1"; then echo 9093; else echo 9092; fi; }
node_pod() {
  if is_controller "$1"; then echo "kafka-controller-$(($1 - 101))"; else echo "kafka-broker-$(($1 - 1))"; fi
}
node_dir() { echo "$kdir/nodes/$1"; }
node_log() { echo "$tb/logs/kafka-$1.log"; }
node_pidfile() { echo "$tb/pids/kafka-$1.pid"; }
node_observer_file() { echo "$tb/pods/kafka/$(node_pod "$1")/volumes/observer-ids/observer.ids"; }

check_node_id() {
  local id
  for id in "${ALL_IDS[@]}"; do [[ "$1" == "$id" ]] && return 0; done
  die "unknown node id '$1': controllers are ${CONTROLLER_IDS[*]}, brokers are ${BROKER_IDS[*]}"
}

join_by() { local IFS="$1"; shift; echo "$*"; }
controller_bootstrap() {
  local id out=()
  for id in "${CONTROLLER_IDS[@]}"; do out+=("$(node_addr "$id"):$(node_port "$id")"); done
  join_by , "${out[@]}"
}
broker_bootstrap() {
  local id out=()
  for id in "${BROKER_IDS[@]}"; do out+=("$(node_addr "$id"):$(node_port "$id")"); done
  join_by , "${out[@]}"
}
controller_dir_id() { printf 'koo-ctrl-dir-%03d' "$1" | base64 | tr '+/' '-_' | tr -d '='; }
initial_controllers() {
  local id out=()
  for id in "${CONTROLLER_IDS[@]}"; do
    out+=("$id@$(node_addr "$id"):$(node_port "$id"):$(controller_dir_id "$id")")
  done
  join_by , "${out[@]}"
}

cluster_id() {
  [[ -s "$kdir/cluster-id" ]] || echo "$DEFAULT_CLUSTER_ID" > "$kdir/cluster-id"
  tr -d '[:space:]' < "$kdir/cluster-id"
}

# The Kafka runtime jars; kafka-jars.sh returns at once when its cache is warm.
kafka_lib() {
  if [[ -z "${_kafka_lib:-}" ]]; then
    _kafka_lib="$(bash "$root/e2e/build/kafka-jars.sh" "$KAFKA_VERSION" | tail -n1)/lib"
    [[ -f "$_kafka_lib/kafka_$SCALA_BINARY_VERSION-$KAFKA_VERSION.jar" ]] ||
      die "no Kafka $KAFKA_VERSION jars in $_kafka_lib: run 'make kafka-jars'"
    # A cache fetched before the pom fix has the slf4j 2 binding next to slf4j-api 1.7: every
    # node would log nothing.
    if compgen -G "$_kafka_lib/log4j-slf4j2-impl-*.jar" >/dev/null &&
      compgen -G "$_kafka_lib/slf4j-api-1.*.jar" >/dev/null; then
      die "$_kafka_lib has log4j-slf4j2-impl with slf4j-api 1.x (Kafka would log nothing): refetch with 'rm $(dirname "$_kafka_lib")/.complete && make kafka-jars'"
    fi
  fi
  echo "$_kafka_lib"
}

# The observer patch jar named by $KAFKA_PATCH_JAR or .testbed/kafka/patch-jar; empty = vanilla.
# A name that does not resolve to a file is an error, never a silent fallback to vanilla.
patch_jar() {
  local jar="" from=""
  if [[ -n "${KAFKA_PATCH_JAR:-}" ]]; then
    jar="$KAFKA_PATCH_JAR" from="KAFKA_PATCH_JAR"
  elif [[ -s "$kdir/patch-jar" ]]; then
    jar="$(tr -d '\n' < "$kdir/patch-jar")" from="$kdir/patch-jar"
  fi
  [[ -z "$jar" || -f "$jar" ]] ||
    die "patch jar '$jar' (named by $from) does not exist: run 'make kafka-patched', or unset it for vanilla Kafka"
  echo "$jar"
}

# Env wins over the file; record it so later single-node starts use the same classpath as the
# running nodes (a cluster of mixed patched and vanilla nodes would be a silent lie).
record_patch_jar() {
  if [[ -n "${KAFKA_PATCH_JAR:-}" ]]; then
    [[ -f "$KAFKA_PATCH_JAR" ]] || die "KAFKA_PATCH_JAR='$KAFKA_PATCH_JAR' does not exist"
    echo "$KAFKA_PATCH_JAR" > "$kdir/patch-jar"
  fi
}

kafka_classpath() {
  local jar lib
  jar="$(patch_jar)" && lib="$(kafka_lib)" || exit 1
  if [[ -n "$jar" ]]; then echo "$jar:$lib/*"; else echo "$lib/*"; fi
}

describe_classpath() {
  local jar
  jar="$(patch_jar)" || exit 1
  if [[ -n "$jar" ]]; then
    echo "patched Kafka $KAFKA_VERSION: $jar first on the classpath"
  else
    echo "VANILLA Kafka $KAFKA_VERSION: no KAFKA_PATCH_JAR and no $kdir/patch-jar (observer.ids is ignored)"
  fi
}

# server.properties = role template + common settings + optional bed-wide overrides.
render_config() {
  local id="$1" dir role
  dir="$(node_dir "$id")" role="$(node_role "$id")"
  mkdir -p "$dir/data" "$dir/logs"
  {
    cat "$tmpl/$role.properties"
    echo
    cat "$tmpl/common.properties"
    if [[ -f "$kdir/overrides.properties" ]]; then
      printf '\n# From %s\n' "$kdir/overrides.properties"
      cat "$kdir/overrides.properties"
    fi
    if [[ -f "$dir/overrides.properties" ]]; then
      printf '\n# From %s\n' "$dir/overrides.properties"
      cat "$dir/overrides.properties"
    fi
  } | sed -e "s|@NODE_ID@|$id|g" -e "s|@POD@|$(node_pod "$id")|g" \
    -e "s|@ADDRESS@|$(node_addr "$id")|g" -e "s|@PORT@|$(node_port "$id")|g" \
    -e "s|@DATA_DIR@|$dir/data|g" -e "s|@CONTROLLER_BOOTSTRAP@|$(controller_bootstrap)|g" \
    -e "s|@REPLICA_LAG_TIME_MAX_MS@|$KAFKA_REPLICA_LAG_TIME_MAX_MS|g" > "$dir/server.properties.tmp"
  mv "$dir/server.properties.tmp" "$dir/server.properties"
}

is_formatted() { [[ -f "$(node_dir "$1")/data/meta.properties" ]]; }

# Format one node's storage once. Every node gets the same --initial-controllers (dynamic quorum,
# kraft.version 1), as the 4.x StorageTool requires.
format_node() {
  local id="$1" cp
  is_formatted "$id" && return 0
  cp="$(kafka_classpath)" || exit 1
  # shellcheck disable=SC2086
  java $KAFKA_TOOL_HEAP_OPTS $KAFKA_JVM_OPTS -Dlog4j2.configurationFile="$tmpl/tools-log4j2.properties" \
    -cp "$cp" kafka.tools.StorageTool format --config "$(node_dir "$id")/server.properties" \
    --cluster-id "$(cluster_id)" --initial-controllers "$(initial_controllers)" \
    >> "$(node_log "$id")" 2>&1 ||
    die "formatting node $id failed: see $(node_log "$id")"
}

# The pid of a running node, if its pid file names a live java for this node's config (a reused
# pid belonging to something else does not count).
node_pid() {
  local pidfile pid
  pidfile="$(node_pidfile "$1")"
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $(node_dir "$1")/server.properties" ||
    return 1
  echo "$pid"
}

# As root: drop the capabilities that bypass file permissions (see launch_node); else nothing.
drop_dac_caps() {
  [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null &&
    echo "setpriv --bounding-set=-dac_override,-dac_read_search --inh-caps=-dac_override,-dac_read_search"
  return 0
}

port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }
