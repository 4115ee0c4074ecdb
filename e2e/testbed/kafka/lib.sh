# shellcheck shell=bash
# The host-side Kafka tools of the test bed (sourced by e2e/testbed/kafka.sh and wrappers.sh):
# the Kafka runtime jars and the classpath the tools in .testbed/bin run with, the observer patch
# jar first when one is named, so a tool sees the same classes as the patched image's nodes.
# Sourced, never run. Expects e2e/lib.sh already sourced ($root, $tb, the versions, die).

# shellcheck disable=SC2154 # tb: set by e2e/lib.sh, sourced by kafka.sh before this file
kdir="$tb/kafka"
# shellcheck disable=SC2034,SC2154 # tmpl: read by wrappers.sh; root: set by e2e/lib.sh, sourced by kafka.sh before this file
tmpl="$root/e2e/testbed/kafka"
KAFKA_TOOL_HEAP_OPTS="${KAFKA_TOOL_HEAP_OPTS:--Xmx192m -Xms32m}"
# C1 only and the serial collector: the tools share two busy cores with seven Kafka pods.
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true}"

# The Kafka runtime jars; kafka-jars.sh returns at once when its cache is warm.
kafka_lib() {
  if [[ -z "${_kafka_lib:-}" ]]; then
    local out
    # Checked apart: a failed fetch prints no cache directory (the test below would blame "/lib").
    out="$(bash "$root/e2e/build/kafka-jars.sh" "$KAFKA_VERSION")" ||
      die "cannot fetch the Kafka $KAFKA_VERSION jars (e2e/build/kafka-jars.sh)"
    _kafka_lib="${out##*$'\n'}/lib" # its last line: the cache directory
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
