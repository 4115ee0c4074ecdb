#!/usr/bin/env bash
# observer.ids change -> set loaded in the JVM, on one real patched Kafka node (KRaft, combined
# broker+controller, node id 1, on $BENCH_NET.1, default 127.0.8.1). The file is mounted the way a
# ConfigMap volume is ($dir/observer/observer.ids -> ..data/observer.ids, ..data -> ..<timestamp>);
# patches/test/WatchBench.java changes it like the kubelet does (new ..<timestamp> directory,
# ..data_tmp symlink renamed over ..data, old directory removed) $BENCH_CHANGES times (default 20),
# with a random pause of 0..1000 ms between changes, and polls the node's loaded report
# ($KAFKA_OBSERVER_IDS_LOADED_FILE, written after the new set is in use) every 1 ms.
# The node runs with the default cache TTL (1000 ms) unless $BENCH_TTL_MS is set.
# Usage: patches/watch-bench.sh [kafka-version] [label]
#   BENCH_JAR=<observer-patch.jar> measures another build of the patch (e.g. main's, for "before").
# Prints the WATCH-BENCH line of WatchBench (min/median/p90/max in ms). State in $BENCH_DIR
# (default /tmp/koo-watch-bench). About 30 s plus the node's start.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../e2e/lib.sh"
version="${1:-$KAFKA_VERSION}"
label="${2:-$version}"
dir="${BENCH_DIR:-/tmp/koo-watch-bench}"
net="${BENCH_NET:-127.0.8}"
changes="${BENCH_CHANGES:-20}"
jar="${BENCH_JAR:-$(bash "$root/e2e/build/kafka-patched.sh" "$version" | tail -n 1)}"
lib="$KOO_CACHE/kafka/$version/lib"
pid=""
stop() { [[ -n "$pid" ]] && { kill "$pid" 2>/dev/null; sleep 2; kill -9 "$pid" 2>/dev/null; } || true; }
trap stop EXIT

rm -rf "$dir"
mkdir -p "$dir/node/data" "$dir/loaded" "$dir/observer/..initial"
printf '# revision 0\n4\n' > "$dir/observer/..initial/observer.ids"
ln -s ..initial "$dir/observer/..data"
ln -s ..data/observer.ids "$dir/observer/observer.ids"
cat > "$dir/node/server.properties" <<PROPS
node.id=1
process.roles=broker,controller
controller.quorum.voters=1@$net.1:9093
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://$net.1:9092,CONTROLLER://$net.1:9093
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/node/data
offsets.topic.replication.factor=1
num.network.threads=2
num.io.threads=2
PROPS
# shellcheck disable=SC2312 # StorageTool random-uuid failing gives an empty id, which format refuses
java -Xmx128m -XX:+UseSerialGC -Dlog4j2.configurationFile="$root/e2e/testbed/kafka/tools-log4j2.properties" \
  -cp "$lib/*" kafka.tools.StorageTool format -t "$(java -cp "$lib/*" kafka.tools.StorageTool random-uuid 2>/dev/null)" \
  -c "$dir/node/server.properties" > /dev/null
env KAFKA_OBSERVER_IDS_FILE="$dir/observer/observer.ids" KAFKA_OBSERVER_IDS_LOADED_FILE="$dir/loaded/observer.ids" \
  ${BENCH_TTL_MS:+KAFKA_OBSERVER_IDS_TTL_MS=$BENCH_TTL_MS} \
  java -Xmx256m -XX:+UseSerialGC -Dlog4j2.configurationFile="$root/e2e/testbed/kafka/log4j2.properties" \
  -Dkafka.logs.dir="$dir/node" -cp "$jar:$lib/*" kafka.Kafka "$dir/node/server.properties" > "$dir/node.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  grep -q "observer patch active" "$dir/node.log" && cmp -s "$dir/loaded/observer.ids" "$dir/observer/..initial/observer.ids" && break
  kill -0 "$pid" 2>/dev/null || { tail -n 20 "$dir/node.log"; echo "watch-bench: the node exited"; exit 1; }
  sleep 0.5
done
grep -q "observer patch active" "$dir/node.log" || { echo "watch-bench: no start-up proof in $dir/node.log"; exit 1; }
sleep 3 # let the node finish starting (it shares the CPU with the measurement)
# shellcheck disable=SC2312 # message text only
echo "watch-bench: $(grep -o 'observer patch active.*' "$dir/node.log" | head -n 1 | cut -c1-60)... jar $jar"
java "$here/test/WatchBench.java" "$dir/observer" observer.ids "$dir/loaded/observer.ids" "$changes" 1000 "$label"
