#!/usr/bin/env bash
# A node whose classpath puts a vanilla Kafka jar before observer-patch.jar is detected and
# refused, a patched one passes; real JVMs on loopback ($VANILLA_NET.x, default 127.0.2: hosts
# .110 (controller), .11, .12, .13, clear of smoke-test.sh's .1-.3, .100, .250), with the image's
# own entrypoint (images/kafka/kafka-entrypoint.sh) and probe (images/kafka/kafka-patch-probe):
#   1. the entrypoint refuses KAFKA_CLASSPATH=libs/*:patch/observer-patch.jar before any JVM runs;
#   2. a patched controller and broker 11 started by the entrypoint write the proof, the probe passes
#      (and a stale proof file left by an earlier container is deleted first);
#   3. broker 12 started with vanilla jars first by a plain `java -cp` (a custom command, past the
#      entrypoint's check) runs and listens, but never logs the proof: the probe fails with the
#      message a user sees in `kubectl describe pod`.
# Run by smoke-test.sh for the image's version ($KAFKA_VERSION); standalone:
#   patches/vanilla-classpath-test.sh [kafka-version]   (state in $VANILLA_DIR)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
source "$repo/e2e/versions.env"
version="${1:-$KAFKA_VERSION}"
dir="${VANILLA_DIR:-/tmp/koo-vanilla-classpath}"
net="${VANILLA_NET:-127.0.2}"
jar="$(bash "$repo/e2e/build/kafka-patched.sh" "$version" | tail -n 1)"
lib="$KOO_CACHE/kafka/$version/lib"
entrypoint="$repo/images/kafka/kafka-entrypoint.sh"
probe="$repo/images/kafka/kafka-patch-probe"
failures=0
pids=()

say() { echo "vanilla-classpath: $*"; }
check() { # check <description> <command...>
  local what="$1"; shift
  if "$@"; then say "PASS $what"; else say "FAIL $what"; failures=$((failures + 1)); fi
}
stop_all() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap stop_all EXIT
wait_for() { # wait_for <seconds> <command...>
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}
listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

rm -rf "$dir" && mkdir -p "$dir/home/patch" "$dir/home/config"
# The image's layout (images/kafka/Dockerfile): /opt/kafka/{libs,patch/observer-patch.jar,config}.
home="$dir/home"
ln -s "$lib" "$home/libs"
ln -s "$jar" "$home/patch/observer-patch.jar"
cp "$repo/images/kafka/log4j2.properties" "$repo/images/kafka/tools-log4j2.properties" "$home/config/"
cluster_id="$(java -Xmx64m -cp "$lib/*" -Dlog4j2.configurationFile="$home/config/tools-log4j2.properties" \
  kafka.tools.StorageTool random-uuid)"
voters="110@$net.110:9093"

# node_env <id> <role>: sets nenv, the entrypoint's environment for node <id> (listeners on its
# own address).
node_env() {
  local id="$1" role="$2" listener
  if [[ "$role" == controller ]]; then listener="CONTROLLER://$net.$id:9093"; else listener="PLAINTEXT://$net.$id:9092"; fi
  nenv=(KAFKA_HOME="$home" KAFKA_ROLE="$role" KAFKA_NODE_ID="$id" KAFKA_CLUSTER_ID="$cluster_id" \
    KAFKA_CONTROLLER_QUORUM_VOTERS="$voters" KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS="$net.110:9093" \
    KAFKA_ADVERTISED_HOST="$net.$id" KAFKA_DATA_DIR="$dir/$id/data" KAFKA_CONFIG_DIR="$dir/$id/config" \
    KAFKA_OBSERVER_PATCH_PROOF_FILE="$dir/$id/proof" KAFKA_OBSERVER_IDS_FILE="$dir/observer.ids" \
    KAFKA_CFG_LISTENERS="$listener" KAFKA_HEAP_OPTS="-Xmx256m -XX:+UseSerialGC")
}
echo 4 > "$dir/observer.ids"

# 1. The entrypoint refuses a vanilla-first classpath before any JVM starts.
mkdir -p "$dir/13"
rc=0
node_env 13 broker
env "${nenv[@]}" KAFKA_CLASSPATH="$home/libs/*:$home/patch/observer-patch.jar" \
  timeout 30 bash "$entrypoint" > "$dir/13.log" 2>&1 || rc=$?
sed 's/^/  /' "$dir/13.log"
check "the entrypoint refuses a vanilla-first classpath (exit $rc) naming the jar" \
  eval '[[ $rc -eq 1 ]] && grep -q "refusing to start: .*vanilla Kafka jar .*kafka.* comes before observer-patch.jar" "$dir/13.log"'
check "... before formatting or starting a JVM" eval '[[ ! -e "$dir/13/data/meta.properties" ]] && ! grep -q "formatting" "$dir/13.log"'
rc=0
env "${nenv[@]}" KAFKA_CLASSPATH="$dir/nowhere/observer-patch.jar:$home/libs/*" timeout 30 bash "$entrypoint" \
  > "$dir/13b.log" 2>&1 || rc=$?
check "the entrypoint refuses a classpath whose observer-patch.jar is missing (exit $rc)" \
  eval '[[ $rc -eq 1 ]] && grep -q "refusing to start: .*nowhere/observer-patch.jar does not exist" "$dir/13b.log"'

# 2. Patched controller and broker 11 through the entrypoint (default classpath).
start_entrypoint() { # start_entrypoint <id> <role>
  mkdir -p "$dir/$1"
  node_env "$1" "$2"
  env "${nenv[@]}" nohup bash "$entrypoint" > "$dir/$1.log" 2>&1 &
  pids+=($!)
}
start_entrypoint 110 controller
wait_for 60 listening "$net.110" 9093 || say "controller not listening within 60s"
mkdir -p "$dir/11" && printf 'observer patch active: stale, from an earlier container\n' > "$dir/11/proof"
start_entrypoint 11 broker
# 3. Broker 12: vanilla jars first, started past the entrypoint (a custom command), with the
# configuration the entrypoint rendered for broker 11, renumbered.
wait_for 60 test -s "$dir/11/config/server.properties"
mkdir -p "$dir/12/config"
sed -e "s/^node.id=11$/node.id=12/" -e "s/$net\.11:/$net.12:/g" -e "s#$dir/11/data#$dir/12/data#" \
  "$dir/11/config/server.properties" > "$dir/12/config/server.properties"
java -Xmx128m -cp "$lib/*" -Dlog4j2.configurationFile="$home/config/tools-log4j2.properties" \
  kafka.tools.StorageTool format --config "$dir/12/config/server.properties" --cluster-id "$cluster_id" > /dev/null
KAFKA_OBSERVER_PATCH_PROOF_FILE="$dir/12/proof" KAFKA_OBSERVER_IDS_FILE="$dir/observer.ids" \
  nohup java -Xmx256m -XX:+UseSerialGC -Dlog4j2.configurationFile="$home/config/log4j2.properties" \
  -cp "$lib/*:$jar" kafka.Kafka "$dir/12/config/server.properties" > "$dir/12.log" 2>&1 &
pids+=($!)

check "patched controller 110 listens" wait_for 60 listening "$net.110" 9093
check "patched broker 11 listens" wait_for 90 listening "$net.11" 9092
check "vanilla-first broker 12 runs and listens" wait_for 90 listening "$net.12" 9092
sleep 2
grep -h "observer patch active" "$dir"/110.log "$dir"/11.log "$dir"/12.log | sed 's/^/  /' || true
check "the controller logs the proof and its probe passes" \
  eval 'grep -q "observer patch active: $version" "$dir/110.log" && KAFKA_OBSERVER_PATCH_PROOF_FILE="$dir/110/proof" bash "$probe" 9093 "$net.110"'
check "broker 11's stale proof was replaced by its JVM's own" \
  eval 'grep -q "^observer patch active: $version" "$dir/11/proof" && ! grep -q stale "$dir/11/proof"'
check "broker 11 logs the proof and its probe passes" \
  eval 'grep -q "observer patch active: $version" "$dir/11.log" && KAFKA_OBSERVER_PATCH_PROOF_FILE="$dir/11/proof" bash "$probe" 9092 "$net.11"'
check "vanilla-first broker 12 never logs the proof" eval '! grep -q "observer patch active" "$dir/12.log"'
rc=0
out="$(KAFKA_OBSERVER_PATCH_PROOF_FILE="$dir/12/proof" bash "$probe" 9092 "$net.12")" || rc=$?
say "  probe of broker 12 (exit $rc): $out"
check "the probe fails for vanilla-first broker 12 with the reason" \
  eval '[[ $rc -ne 0 ]] && [[ "$out" == "observer patch NOT proven: no start-up proof in $dir/12/proof"* ]]'
rc=0
out="$(KAFKA_OBSERVER_PATCH_PROOF_FILE="$dir/11/proof" bash "$probe" 9092 "$net.13")" || rc=$?
check "the probe fails when the listener is closed, even with a proof (exit $rc)" eval '[[ $rc -ne 0 && "$out" == *"does not accept connections"* ]]'

say "logs in $dir; $failures failure(s)"
[[ $failures -eq 0 ]]
