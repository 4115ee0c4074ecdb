#!/bin/bash
# Entrypoint of kafka-observer/kafka: one KRaft node (controller, broker or both) of a patched
# Apache Kafka, configured from the environment. Contract (see images/README.md):
#
#   KAFKA_ROLE                      controller | broker | combined | auto (required). combined is
#                                   KRaft combined mode, process.roles=broker,controller: one JVM,
#                                   so one observer.ids file for both parts; its node id must be
#                                   one of the voters. auto: combined when the node id is one of
#                                   KAFKA_CONTROLLER_QUORUM_VOTERS, broker otherwise (one
#                                   StatefulSet whose first pods are the voters and whose others,
#                                   e.g. observers, are brokers only)
#   KAFKA_NODE_ID                   explicit node.id; else pod ordinal + KAFKA_NODE_ID_OFFSET, the
#   KAFKA_NODE_ID_OFFSET            ordinal being the numeric suffix of $POD_NAME (or $HOSTNAME)
#                                   after the last '-' (kafka-broker-3 -> 3)
#   KAFKA_CLUSTER_ID                cluster id used to format storage (required)
#   KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS   host:port,... (required)
#   KAFKA_CONTROLLER_QUORUM_VOTERS  static voters id@host:port,... (controller.quorum.voters):
#                                   required for controllers and combined nodes, and brokers need it too (with a
#                                   static quorum they find the active controller only through it)
#   KAFKA_ADVERTISED_HOST           default $POD_IP
#   KAFKA_EXTRA_LISTENERS           brokers: more client listeners, PROTOCOL:PORT,... with PROTOCOL
#                                   one of SSL, SASL_SSL, SASL_PLAINTEXT (e.g. SASL_SSL:9094,SSL:9095):
#                                   each listens on 0.0.0.0:PORT under the listener name PROTOCOL
#                                   and is advertised as KAFKA_EXTRA_ADVERTISED_HOST:PORT
#   KAFKA_EXTRA_ADVERTISED_HOST     the name TLS clients connect to, default the pod's DNS name
#                                   from /etc/hosts (<pod>.<service>.<ns>.svc.<domain>, which the
#                                   kubelet writes for a StatefulSet pod), so one certificate for
#                                   *.<service>.<ns>.svc.<domain> serves every broker
#   KAFKA_TLS_DIR                   a directory with tls.key (PKCS#8 PEM, unencrypted), tls.crt
#                                   and ca.crt (a kubernetes.io/tls Secret, as cert-manager writes
#                                   it): the key store (key + certificate, a PEM file written to
#                                   the config dir) and the trust store of the TLS listeners.
#                                   Read at start-up: a renewed certificate needs a pod restart
#   KAFKA_EXTRA_CONFIG_DIR          every *.properties file in it is appended to server.properties
#                                   (in name order, after KAFKA_CFG_*): for settings whose names
#                                   KAFKA_CFG_ cannot spell, such as
#                                   listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config
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
# PLAINTEXT://0.0.0.0:9092 (advertised PLAINTEXT://$host:9092, also the inter-broker listener)
# plus KAFKA_EXTRA_LISTENERS; a combined node has both. Storage is formatted only when
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
  controller | broker | combined | auto) ;;
  *) die "KAFKA_ROLE must be 'controller', 'broker', 'combined' or 'auto' (got '${role}')" ;;
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
if [[ "$role" == auto ]]; then
  [[ -n "$voters" ]] ||
    die "KAFKA_ROLE=auto needs KAFKA_CONTROLLER_QUORUM_VOTERS (voters run combined, every other node as a broker only)"
  if [[ ",$voters" == *",$node_id@"* ]]; then role=combined; else role=broker; fi
  # shellcheck disable=SC2312 # message text only
  say "KAFKA_ROLE=auto: node $node_id is $role ($([[ $role == combined ]] && echo "one of the voters" || echo "not a voter"))"
fi
# process.roles, and whether this node runs each part.
roles="$role" runs_controller="" runs_broker=""
[[ "$role" != combined ]] || roles="broker,controller"
[[ "$role" == broker ]] || runs_controller=1
[[ "$role" == controller ]] || runs_broker=1
[[ -z "$runs_controller" || -n "$voters" ]] ||
  die "KAFKA_CONTROLLER_QUORUM_VOTERS is required for controllers and combined nodes (static voters id@host:port,...)"
[[ "$role" != combined || ",$voters" == *",$node_id@"* ]] ||
  die "KAFKA_ROLE=combined: node id $node_id is not one of KAFKA_CONTROLLER_QUORUM_VOTERS ($voters); a combined node is a voter (KAFKA_ROLE=auto makes non-voters brokers)"
# Controllers run a static quorum (controller.quorum.voters): the metadata log then carries no
# controller endpoints, so a broker finds the active controller only through the voters list.
[[ -n "$runs_controller" || -n "$voters" ]] ||
  say "warning: broker without KAFKA_CONTROLLER_QUORUM_VOTERS: with a static controller quorum it never registers ('Unable to register the broker')"
host="${KAFKA_ADVERTISED_HOST:-${POD_IP:-}}"
[[ -n "$host" ]] || die "KAFKA_ADVERTISED_HOST or POD_IP is required (the address other nodes reach)"

# KAFKA_EXTRA_LISTENERS: "listener name:port" pairs, the name being its security protocol.
extra_listeners="" extra_advertised="" extra_map=""
if [[ -n "${KAFKA_EXTRA_LISTENERS:-}" ]]; then
  [[ -n "$runs_broker" ]] || die "KAFKA_EXTRA_LISTENERS is for brokers and combined nodes only (controllers listen on CONTROLLER alone)"
  tls_host="${KAFKA_EXTRA_ADVERTISED_HOST:-}"
  if [[ -z "$tls_host" ]]; then
    # The kubelet's /etc/hosts line for this pod: "<ip> <pod>.<service>.<ns>.svc.<domain> <pod>".
    # shellcheck disable=SC2312 # hostname only when HOSTNAME is unset; no match is checked just below
    tls_host="$(awk -v h="${HOSTNAME:-$(hostname)}" '$1 !~ /^#/ { for (i = 2; i <= NF; i++) if ($i == h && $2 ~ /\./) { print $2; exit } }' /etc/hosts)"
    # shellcheck disable=SC2312 # message text only
    [[ -n "$tls_host" ]] ||
      die "KAFKA_EXTRA_LISTENERS needs the pod's DNS name, and /etc/hosts has none for ${HOSTNAME:-$(hostname)} (a StatefulSet pod with spec.serviceName has one): set KAFKA_EXTRA_ADVERTISED_HOST"
  fi
  IFS=',' read -r -a pairs <<<"$KAFKA_EXTRA_LISTENERS"
  for pair in "${pairs[@]}"; do
    name="${pair%%:*}" port="${pair#*:}"
    case "$name" in
      SSL | SASL_SSL | SASL_PLAINTEXT) ;;
      *) die "KAFKA_EXTRA_LISTENERS: '$pair' must be PROTOCOL:PORT with PROTOCOL SSL, SASL_SSL or SASL_PLAINTEXT" ;;
    esac
    [[ "$port" =~ ^[0-9]+$ && "$port" != 9092 && "$port" != 9093 ]] ||
      die "KAFKA_EXTRA_LISTENERS: '$pair' needs a port number other than 9092 and 9093"
    [[ ",$extra_map," != *",$name:"* ]] || die "KAFKA_EXTRA_LISTENERS names $name twice"
    extra_listeners+=",$name://0.0.0.0:$port"
    extra_advertised+=",$name://$tls_host:$port"
    extra_map+=",$name:$name"
  done
fi

# A writable config dir, so the root filesystem can be read-only.
config_dir=""
for d in "${KAFKA_CONFIG_DIR:-/var/lib/kafka/config}" /tmp/kafka-config; do
  if mkdir -p "$d" 2>/dev/null && [[ -w "$d" ]]; then config_dir="$d"; break; fi
done
[[ -n "$config_dir" ]] ||
  die "no writable config dir (tried ${KAFKA_CONFIG_DIR:-/var/lib/kafka/config} and /tmp/kafka-config): mount an emptyDir there"
mkdir -p "$DATA_DIR" 2>/dev/null || true
# shellcheck disable=SC2312 # message text only
[[ -d "$DATA_DIR" && -w "$DATA_DIR" ]] || die "data dir $DATA_DIR is missing or not writable by uid $(id -u)"

config="$config_dir/server.properties"
{
  # shellcheck disable=SC2312 # date in a comment line of the file: its status does not matter
  echo "# Rendered by kafka-entrypoint.sh at $(date -u +%FT%TZ) for $role $node_id."
  echo "process.roles=$roles"
  echo "node.id=$node_id"
  case "$role" in
    controller)
      echo "listeners=CONTROLLER://0.0.0.0:9093"
      echo "advertised.listeners=CONTROLLER://$host:9093" ;;
    broker)
      echo "listeners=PLAINTEXT://0.0.0.0:9092$extra_listeners"
      echo "advertised.listeners=PLAINTEXT://$host:9092$extra_advertised" ;;
    combined)
      echo "listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093$extra_listeners"
      echo "advertised.listeners=PLAINTEXT://$host:9092,CONTROLLER://$host:9093$extra_advertised" ;;
  esac
  [[ -z "$runs_broker" ]] || echo "inter.broker.listener.name=PLAINTEXT"
  echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT$extra_map"
  if [[ -n "${KAFKA_TLS_DIR:-}" ]]; then
    echo "ssl.keystore.type=PEM"
    echo "ssl.keystore.location=$config_dir/keystore.pem"
    echo "ssl.truststore.type=PEM"
    echo "ssl.truststore.location=$KAFKA_TLS_DIR/ca.crt"
  fi
  echo "controller.listener.names=CONTROLLER"
  echo "controller.quorum.bootstrap.servers=$bootstrap"
  [[ -z "$voters" ]] || echo "controller.quorum.voters=$voters"
  echo "log.dirs=$DATA_DIR"
  echo "# From KAFKA_CFG_* (later keys win)"
  # shellcheck disable=SC2312 # env and sort do not fail
  while IFS='=' read -r name value; do
    [[ "$name" == KAFKA_CFG_* ]] || continue
    key="${name#KAFKA_CFG_}"; key="${key,,}"; key="${key//_/.}"
    echo "$key=$value"
  done < <(env | LC_ALL=C sort)
  if [[ -n "${KAFKA_EXTRA_CONFIG_DIR:-}" ]]; then
    [[ -d "$KAFKA_EXTRA_CONFIG_DIR" ]] || die "KAFKA_EXTRA_CONFIG_DIR $KAFKA_EXTRA_CONFIG_DIR is not a directory"
    for f in "$KAFKA_EXTRA_CONFIG_DIR"/*.properties; do
      [[ -f "$f" ]] || continue
      echo "# From $f"
      cat "$f"
      echo
    done
  fi
} > "$config.tmp"
mv -f "$config.tmp" "$config"
if [[ -n "${KAFKA_TLS_DIR:-}" ]]; then
  for f in tls.key tls.crt ca.crt; do
    [[ -s "$KAFKA_TLS_DIR/$f" ]] || die "KAFKA_TLS_DIR $KAFKA_TLS_DIR has no $f (a kubernetes.io/tls Secret with ca.crt)"
  done
  grep -q -- '-----BEGIN PRIVATE KEY-----' "$KAFKA_TLS_DIR/tls.key" ||
    die "$KAFKA_TLS_DIR/tls.key is not an unencrypted PKCS#8 key (-----BEGIN PRIVATE KEY-----), which Kafka's PEM key store needs: convert it with openssl pkcs8 -topk8 -nocrypt"
  # Kafka's PEM key store is one file, key first; readable by this user only.
  (umask 077 && cat "$KAFKA_TLS_DIR/tls.key" "$KAFKA_TLS_DIR/tls.crt" > "$config_dir/keystore.pem")
fi
say "$role node.id=$node_id advertised $host${extra_advertised:+ (and ${extra_advertised#,})}; config $config; data $DATA_DIR; observer ids $KAFKA_OBSERVER_IDS_FILE"

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
