#!/bin/bash
# Entrypoint of kafka-observer/kafka: one KRaft node (controller or broker) of a patched Apache
# Kafka, configured from the environment. Contract (see images/README.md):
#
#   KAFKA_ROLE                      controller | broker (required)
#   KAFKA_NODE_ID                   explicit node.id; else pod ordinal + KAFKA_NODE_ID_OFFSET, the
#   KAFKA_NODE_ID_OFFSET            ordinal being the numeric suffix of $POD_NAME (or $HOSTNAME)
#                                   after the last '-' (kafka-broker-3 -> 3)
#   KAFKA_CLUSTER_ID                cluster id used to format storage (required)
#   KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS   host:port,... (required)
#   KAFKA_CONTROLLER_QUORUM_VOTERS  static voters id@host:port,... (controller.quorum.voters):
#                                   required for controllers, and brokers need it too (with a
#                                   static quorum they find the active controller only through it)
#   KAFKA_ADVERTISED_HOST           default $POD_IP
#   KAFKA_CFG_<NAME>                extra server.properties line <name>=<value> (lowercase,
#                                   '_' -> '.'), appended last so it overrides the defaults
#   KAFKA_DATA_DIR                  default /var/lib/kafka/data (log.dirs; a volume)
#   KAFKA_CONFIG_DIR                where server.properties is written, default
#                                   /var/lib/kafka/config, falling back to /tmp/kafka-config
#                                   (mount an emptyDir at either for readOnlyRootFilesystem)
#   KAFKA_HEAP_OPTS                 default "-Xmx256m -XX:+UseSerialGC"
#   KAFKA_JVM_OPTS                  default: see below; KAFKA_EXTRA_JVM_OPTS is appended
#   KAFKA_OBSERVER_IDS_FILE         read by the observer patch; default
#                                   /etc/kafka/observer/observer.ids (ConfigMap mounted as a dir)
#   KAFKA_OBSERVER_BROKER_IDS, KAFKA_OBSERVER_IDS_TTL_MS   passed through to the patch
#   KAFKA_CLASSPATH                 the JVM's classpath, default
#                                   $KAFKA_HOME/patch/observer-patch.jar:$KAFKA_HOME/libs/* (add
#                                   plugin jars after the patch jar). Refused before any JVM
#                                   starts when a Kafka jar (kafka_*.jar, kafka-*.jar) or class
#                                   directory with kafka classes comes before observer-patch.jar,
#                                   when observer-patch.jar is missing, or when it shares a
#                                   wildcard entry with Kafka jars (the JVM's order there is
#                                   unspecified): such a JVM would load vanilla classes and run
#                                   without the observer gates.
#   KAFKA_OBSERVER_PATCH_PROOF_FILE where the patched JVM writes its start-up proof line, default
#                                   /tmp/kafka-observer-patch.proof; deleted here before the JVM
#                                   starts, read by the probe kafka-patch-probe
#
# Listeners: controller CONTROLLER://0.0.0.0:9093 (advertised CONTROLLER://$host:9093), broker
# PLAINTEXT://0.0.0.0:9092 (advertised PLAINTEXT://$host:9092). Storage is formatted only when
# $KAFKA_DATA_DIR/meta.properties is absent; then the JVM is exec'd (it gets the signals).
set -euo pipefail

KAFKA_HOME="${KAFKA_HOME:-/opt/kafka}"
CLASSPATH_KAFKA="${KAFKA_CLASSPATH:-$KAFKA_HOME/patch/observer-patch.jar:$KAFKA_HOME/libs/*}"
export KAFKA_OBSERVER_PATCH_PROOF_FILE="${KAFKA_OBSERVER_PATCH_PROOF_FILE:-/tmp/kafka-observer-patch.proof}"
DATA_DIR="${KAFKA_DATA_DIR:-/var/lib/kafka/data}"
export KAFKA_OBSERVER_IDS_FILE="${KAFKA_OBSERVER_IDS_FILE:-/etc/kafka/observer/observer.ids}"
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx256m -XX:+UseSerialGC}"
# C1 only, for many JVMs on few cores (the test bed runs seven Kafka pods on two).
# No hsperfdata file, so /tmp need not be writable.
JVM_OPTS="${KAFKA_JVM_OPTS:--XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true}"
JVM_OPTS="$JVM_OPTS ${KAFKA_EXTRA_JVM_OPTS:-}"

say() { echo "kafka-entrypoint: $*" >&2; }
die() { say "error: $*"; exit 1; }

# check_classpath CP: the patch jar must be loaded before any Kafka class. The JVM itself proves
# it at start-up (ObserverPatch.verifyOrExit), but only if the patched KafkaRaftServer is the one
# loaded: with a vanilla Kafka jar first the proof never runs. So refuse such a classpath here.
is_kafka_jar() { [[ "$1" == kafka_*.jar || "$1" == kafka-*.jar ]]; }
check_classpath() {
  local entry jar base seen="" kafka
  local -a entries jars
  IFS=':' read -r -a entries <<<"$1"
  for entry in "${entries[@]}"; do
    [[ -n "$entry" ]] || continue
    if [[ "$entry" == */\* || "$entry" == \* ]]; then
      jars=()
      for jar in "${entry%\*}"*.jar "${entry%\*}"*.JAR; do [[ -f "$jar" ]] && jars+=("$jar"); done
      kafka=""
      for jar in "${jars[@]}"; do
        base="${jar##*/}"
        if [[ "$base" == observer-patch.jar ]]; then
          [[ -z "$seen" ]] || continue
          seen="$jar"
        elif is_kafka_jar "$base"; then
          kafka="${kafka:-$jar}"
        fi
      done
      if [[ -n "$kafka" && "$seen" == "${entry%\*}"observer-patch.jar ]]; then
        echo "observer-patch.jar shares the wildcard entry $entry with Kafka jars ($kafka): the JVM's order there is unspecified; give the patch jar its own entry first"
        return 1
      fi
      [[ -z "$kafka" || -n "$seen" ]] ||
        { echo "vanilla Kafka jar $kafka (entry $entry) comes before observer-patch.jar"; return 1; }
    elif [[ -d "$entry" ]]; then
      [[ -n "$seen" || ! ( -d "$entry/kafka" || -d "$entry/org/apache/kafka" ) ]] ||
        { echo "class directory $entry with Kafka classes comes before observer-patch.jar"; return 1; }
    else
      base="${entry##*/}"
      if [[ "$base" == observer-patch.jar ]]; then
        [[ -f "$entry" ]] || { echo "$entry does not exist"; return 1; }
        seen="${seen:-$entry}"
      elif [[ -z "$seen" ]] && is_kafka_jar "$base"; then
        echo "vanilla Kafka jar $entry comes before observer-patch.jar"
        return 1
      fi
    fi
  done
  [[ -n "$seen" ]] || { echo "no observer-patch.jar on it"; return 1; }
}
if ! why="$(check_classpath "$CLASSPATH_KAFKA")"; then
  die "refusing to start: the classpath would run Kafka without the observer patch: $why (classpath $CLASSPATH_KAFKA; the patch jar must come first, e.g. $KAFKA_HOME/patch/observer-patch.jar:$KAFKA_HOME/libs/*)"
fi

role="${KAFKA_ROLE:-}"
case "$role" in
  controller | broker) ;;
  *) die "KAFKA_ROLE must be 'controller' or 'broker' (got '${role}')" ;;
esac

if [[ -n "${KAFKA_NODE_ID:-}" ]]; then
  node_id="$KAFKA_NODE_ID"
else
  pod="${POD_NAME:-${HOSTNAME:-$(hostname)}}"
  ordinal="${pod##*-}"
  [[ "$ordinal" =~ ^[0-9]+$ ]] ||
    die "no KAFKA_NODE_ID and no pod ordinal in '$pod' (POD_NAME/HOSTNAME must end in -<number>)"
  offset="${KAFKA_NODE_ID_OFFSET:-0}"
  [[ "$offset" =~ ^[0-9]+$ ]] || die "KAFKA_NODE_ID_OFFSET must be a non-negative integer (got '$offset')"
  node_id=$((10#$ordinal + offset))
fi
[[ "$node_id" =~ ^[0-9]+$ ]] || die "node id must be a non-negative integer (got '$node_id')"

cluster_id="${KAFKA_CLUSTER_ID:-}"
[[ -n "$cluster_id" ]] || die "KAFKA_CLUSTER_ID is required (22-character base64url cluster id)"
bootstrap="${KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS:-}"
[[ -n "$bootstrap" ]] || die "KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS is required (host:port,...)"
voters="${KAFKA_CONTROLLER_QUORUM_VOTERS:-}"
[[ "$role" == broker || -n "$voters" ]] ||
  die "KAFKA_CONTROLLER_QUORUM_VOTERS is required for controllers (static voters id@host:port,...)"
# Controllers run a static quorum (controller.quorum.voters): the metadata log then carries no
# controller endpoints, so a broker finds the active controller only through the voters list.
[[ "$role" == controller || -n "$voters" ]] ||
  say "warning: broker without KAFKA_CONTROLLER_QUORUM_VOTERS: with a static controller quorum it never registers ('Unable to register the broker')"
host="${KAFKA_ADVERTISED_HOST:-${POD_IP:-}}"
[[ -n "$host" ]] || die "KAFKA_ADVERTISED_HOST or POD_IP is required (the address other nodes reach)"

# A writable config dir, so the root filesystem can be read-only.
config_dir=""
for d in "${KAFKA_CONFIG_DIR:-/var/lib/kafka/config}" /tmp/kafka-config; do
  if mkdir -p "$d" 2>/dev/null && [[ -w "$d" ]]; then config_dir="$d"; break; fi
done
[[ -n "$config_dir" ]] ||
  die "no writable config dir (tried ${KAFKA_CONFIG_DIR:-/var/lib/kafka/config} and /tmp/kafka-config): mount an emptyDir there"
mkdir -p "$DATA_DIR" 2>/dev/null || true
[[ -d "$DATA_DIR" && -w "$DATA_DIR" ]] || die "data dir $DATA_DIR is missing or not writable by uid $(id -u)"

config="$config_dir/server.properties"
{
  echo "# Rendered by kafka-entrypoint.sh at $(date -u +%FT%TZ) for $role $node_id."
  echo "process.roles=$role"
  echo "node.id=$node_id"
  if [[ "$role" == controller ]]; then
    echo "listeners=CONTROLLER://0.0.0.0:9093"
    echo "advertised.listeners=CONTROLLER://$host:9093"
  else
    echo "listeners=PLAINTEXT://0.0.0.0:9092"
    echo "advertised.listeners=PLAINTEXT://$host:9092"
    echo "inter.broker.listener.name=PLAINTEXT"
  fi
  echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
  echo "controller.listener.names=CONTROLLER"
  echo "controller.quorum.bootstrap.servers=$bootstrap"
  [[ -z "$voters" ]] || echo "controller.quorum.voters=$voters"
  echo "log.dirs=$DATA_DIR"
  echo "# From KAFKA_CFG_* (later keys win)"
  while IFS='=' read -r name value; do
    [[ "$name" == KAFKA_CFG_* ]] || continue
    key="${name#KAFKA_CFG_}"; key="${key,,}"; key="${key//_/.}"
    echo "$key=$value"
  done < <(env | LC_ALL=C sort)
} > "$config.tmp"
mv -f "$config.tmp" "$config"
say "$role node.id=$node_id advertised $host; config $config; data $DATA_DIR; observer ids $KAFKA_OBSERVER_IDS_FILE"

# shellcheck disable=SC2086 # word splitting of the JVM options is intended
if [[ ! -f "$DATA_DIR/meta.properties" ]]; then
  say "formatting $DATA_DIR (cluster id $cluster_id)"
  java -Xmx192m -XX:+UseSerialGC $JVM_OPTS \
    -Dlog4j2.configurationFile="$KAFKA_HOME/config/tools-log4j2.properties" \
    -cp "$CLASSPATH_KAFKA" kafka.tools.StorageTool format \
    --config "$config" --cluster-id "$cluster_id" ||
    die "formatting $DATA_DIR failed (kafka.tools.StorageTool format)"
fi

# This JVM writes its own proof; an earlier container's must not make the probe pass.
rm -f "$KAFKA_OBSERVER_PATCH_PROOF_FILE" 2>/dev/null ||
  die "cannot delete the stale start-up proof $KAFKA_OBSERVER_PATCH_PROOF_FILE"
[[ ! -e "$KAFKA_OBSERVER_PATCH_PROOF_FILE" ]] ||
  die "cannot delete the stale start-up proof $KAFKA_OBSERVER_PATCH_PROOF_FILE"
# shellcheck disable=SC2086
exec java $HEAP_OPTS $JVM_OPTS \
  -Dlog4j2.configurationFile="$KAFKA_HOME/config/log4j2.properties" \
  -cp "$CLASSPATH_KAFKA" kafka.Kafka "$config"
