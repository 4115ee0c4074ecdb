#!/usr/bin/env bash
# Throwaway smoke test of the observer patch: 1 KRaft controller (id 100) + 3 brokers (1, 2, 3)
# on 127.0.2.x (SMOKE_NET), broker 3 the observer. Checks the start-up
# proof, the initial ISR filter, ISR admission, promotion, demotion, election and the audit line,
# and the loaded report ($KAFKA_OBSERVER_IDS_LOADED_FILE: what each JVM has loaded, byte for byte;
# broker 2's report path is unusable on purpose: a WARN, never a failure). First runs
# patches/test/LoadedReportCheck.java (the report without Kafka, on a fake clock), and for the
# image's version patches/vanilla-classpath-test.sh (a vanilla-first classpath is refused).
# Version differences: patches/kafka-<v>/test/*.java run first as well when present (checks of a
# gate only that release needs, e.g. 4.0.2/3.9.2's last-known-leader election), and a release that
# still ships ZooKeeper mode (3.x) must refuse a node configured for it.
# Usage: patches/smoke-test.sh [kafka-version]   (state in $SMOKE_DIR, default /tmp/koo-observer-smoke)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
source "$repo/e2e/versions.env"
version="${1:-$KAFKA_VERSION}"
dir="${SMOKE_DIR:-/tmp/koo-observer-smoke}"
net="${SMOKE_NET:-127.0.2}" # loopback /24 prefix: e2e/build/kafka-versions.sh uses another
jar="$(bash "$repo/e2e/build/kafka-patched.sh" "$version" | tail -n 1)"
lib="$KOO_CACHE/kafka/$version/lib"
cp_all="$jar:$lib/*"
controller=100
brokers=(1 2 3)
bootstrap="$net.1:9092,$net.2:9092"
failures=0

say() { echo "smoke: $*"; }
check() { # check <description> <command...>: records a failure instead of stopping
  local what="$1"; shift
  if "$@"; then say "PASS $what"; else say "FAIL $what"; failures=$((failures + 1)); fi
}
stop_all() {
  local f
  for f in "$dir"/*.pid; do
    [[ -f "$f" ]] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 2
  for f in "$dir"/*.pid; do
    [[ -f "$f" ]] || continue
    kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}
trap stop_all EXIT

tool() { # tool <main class> <args...>
  java -Xmx128m -XX:+UseSerialGC -Dlog4j2.configurationFile="$repo/e2e/testbed/kafka/tools-log4j2.properties" \
    -cp "$lib/*" "$@"
}
describe() { tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --describe --topic "$1"; }
isr_of() { describe "$1" | sed -n 's/.*Isr: \([0-9,]*\).*/\1/p' | head -n 1; }
leader_of() { describe "$1" | sed -n 's/.*Leader: \([0-9a-z]*\).*/\1/p' | head -n 1; }
wait_for() { # wait_for <seconds> <command...>
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
isr_is() { [[ "$(isr_of "$1")" == "$2" ]]; }
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
leader_is() { [[ "$(leader_of "$1")" == "$2" ]]; }
log_has() { grep -q -- "$2" "$dir/$1.log"; }
loaded() { echo "$dir/$1/loaded/observer.ids"; } # node <id>'s report of what its JVM loaded
# shellcheck disable=SC2312 # loaded only prints a path; cmp fails on a missing file
reports() { cmp -s "$(loaded "$1")" "$2"; }      # reports <id> <file>: byte for byte
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
reports_text() { [[ "$(cat "$(loaded "$1")" 2>/dev/null)" == "$2" ]]; }

render() { # render <id> <role>
  local id="$1" role="$2" addr="$net.$1" conf="$dir/$1/server.properties"
  mkdir -p "$dir/$id/data"
  {
    echo "node.id=$id"
    echo "process.roles=$role"
    echo "controller.quorum.voters=$controller@$net.$controller:9093"
    echo "controller.listener.names=CONTROLLER"
    echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    echo "log.dirs=$dir/$id/data"
    echo "min.insync.replicas=2"
    echo "replica.lag.time.max.ms=4000"
    echo "broker.session.timeout.ms=6000"
    echo "broker.heartbeat.interval.ms=1000"
    echo "offsets.topic.replication.factor=1"
    echo "num.network.threads=2"
    echo "num.io.threads=2"
    echo "auto.leader.rebalance.enable=false"
    if [[ "$role" == controller ]]; then
      echo "listeners=CONTROLLER://$addr:9093"
    else
      echo "listeners=PLAINTEXT://$addr:9092"
      echo "inter.broker.listener.name=PLAINTEXT"
    fi
  } > "$conf"
}
start() { # start <id> <observer-ids file>
  local id="$1" report
  report="$(loaded "$id")"
  mkdir -p "$(dirname "$report")"
  # Broker 2 reports into a path whose parent is a regular file: every write fails.
  [[ "$id" == 2 ]] && report="$dir/2/server.properties/observer.ids"
  KAFKA_OBSERVER_IDS_FILE="$2" KAFKA_OBSERVER_IDS_TTL_MS=500 KAFKA_OBSERVER_IDS_LOADED_FILE="$report" \
    nohup java -Xmx256m -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$repo/e2e/testbed/kafka/log4j2.properties" -Dkafka.logs.dir="$dir/$id" \
    -cp "$cp_all" kafka.Kafka "$dir/$id/server.properties" > "$dir/$id.log" 2>&1 &
  echo $! > "$dir/$id.pid"
  disown
}

# The loaded report without Kafka (compiled into the state directory, run against the jar).
rm -rf "$dir/unit" && mkdir -p "$dir/unit"
javac --release 17 -nowarn -cp "$jar:$lib/*" -d "$dir/unit" "$here/test/LoadedReportCheck.java"
if java -Dlog4j2.configurationFile="$repo/e2e/testbed/kafka/tools-log4j2.properties" \
  -cp "$dir/unit:$cp_all" io.kafkaobserver.patch.LoadedReportCheck > "$dir/unit.out" 2>&1; then
  # shellcheck disable=SC2312 # message text only
  say "PASS LoadedReportCheck ($(grep -c '^PASS' "$dir/unit.out") checks)"
else
  sed 's/^/  /' "$dir/unit.out"; say "FAIL LoadedReportCheck"; failures=$((failures + 1))
fi
unit_out="$(cat "$dir/unit.out")"
# Checks that only some releases need: patches/kafka-<v>/test/<Name>.java (default package, main
# class <Name>), run without Kafka against the jar, with node 3 listed as an observer.
for t in "$here/kafka-$version"/test/*.java; do
  [[ -f "$t" ]] || continue
  name="$(basename "$t" .java)"
  mkdir -p "$dir/unit-$name" && echo 3 > "$dir/unit-$name/observer.ids"
  if javac --release 17 -nowarn -cp "$lib/*" -d "$dir/unit-$name" "$t" &&
    KAFKA_OBSERVER_IDS_FILE="$dir/unit-$name/observer.ids" \
      java -Dlog4j2.configurationFile="$repo/e2e/testbed/kafka/tools-log4j2.properties" \
      -cp "$dir/unit-$name:$cp_all" "$name" > "$dir/$name.out" 2>&1; then
    # shellcheck disable=SC2312 # message text only
    say "PASS $name ($(grep -c '^PASS' "$dir/$name.out") checks)"
  else
    sed 's/^/  /' "$dir/$name.out"; say "FAIL $name"; failures=$((failures + 1))
  fi
  unit_out+=$'\n'"$(cat "$dir/$name.out")"
done

# The image's version only (the image's entrypoint and probe): a vanilla-first classpath is
# refused by the entrypoint and, started past it, fails the probe (patches/vanilla-classpath-test.sh,
# its own controller and brokers on $net.110, .11-.13, before this cluster starts).
if [[ "$version" == "$KAFKA_VERSION" ]]; then
  if VANILLA_NET="$net" VANILLA_DIR="$dir/vanilla" bash "$here/vanilla-classpath-test.sh" "$version" > "$dir/vanilla.out" 2>&1; then
    # shellcheck disable=SC2312 # message text only
    say "PASS vanilla-classpath-test ($(grep -c 'PASS' "$dir/vanilla.out") checks)"
  else
    sed 's/^/  /' "$dir/vanilla.out"; say "FAIL vanilla-classpath-test"; failures=$((failures + 1))
  fi
  unit_out+=$'\n'"$(cat "$dir/vanilla.out")"
fi

stop_all
rm -rf "$dir"
mkdir -p "$dir"
echo "$unit_out" > "$dir/unit.out"
echo 3 > "$dir/observers-controller.ids"
printf '# observers\n3\n' > "$dir/observers-broker.ids"
cluster_id="$(tool kafka.tools.StorageTool random-uuid)"
render "$controller" controller
for b in "${brokers[@]}"; do render "$b" broker; done
for id in "$controller" "${brokers[@]}"; do
  tool kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/$id/server.properties" >/dev/null
done
# Releases that still ship ZooKeeper mode (3.x): the patch supports KRaft only, so a node
# configured for ZooKeeper must refuse to start (kafka-3.9.2/04-kraft-only.patch) instead of
# running without the controller gates and the start-up proof. It never reaches ZooKeeper.
if unzip -l "$lib/kafka_$SCALA_BINARY_VERSION-$version.jar" kafka/server/KafkaServer.class >/dev/null 2>&1; then
  mkdir -p "$dir/zk/data"
  printf 'broker.id=9\nzookeeper.connect=%s:2181\nlisteners=PLAINTEXT://%s:9092\nlog.dirs=%s\n' \
    "$net.250" "$net.250" "$dir/zk/data" > "$dir/zk/server.properties"
  zk_rc=0
  KAFKA_OBSERVER_IDS_FILE="$dir/observers-broker.ids" timeout 60 java -Xmx128m -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$repo/e2e/testbed/kafka/log4j2.properties" -Dkafka.logs.dir="$dir/zk" \
    -cp "$cp_all" kafka.Kafka "$dir/zk/server.properties" > "$dir/zk.log" 2>&1 || zk_rc=$?
  check "a node configured for ZooKeeper mode refuses to start (exit $zk_rc)" \
    eval '[[ $zk_rc -ne 0 && $zk_rc -ne 124 ]] && log_has zk "ZooKeeper mode is not supported"'
fi
start "$controller" "$dir/observers-controller.ids"
sleep 3
for b in "${brokers[@]}"; do start "$b" "$dir/observers-broker.ids"; done
wait_for 90 tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --list >/dev/null 2>&1
sleep 3

for id in "$controller" "${brokers[@]}"; do
  check "node $id logs the start-up proof" log_has "$id" "observer patch active: $version"
  check "node $id watches its observer.ids directory" log_has "$id" "observer ids: watching $dir for changes of observers-"
done
grep -h "observer patch active\|observer ids loaded" "$dir"/*.log | sed 's/^/  /'
check "the controller reports what it loaded, byte for byte" reports "$controller" "$dir/observers-controller.ids"
check "brokers 1 and 3 report what they loaded" eval 'reports 1 "$dir/observers-broker.ids" && reports 3 "$dir/observers-broker.ids"'
check "broker 2's report cannot be written: a WARN, and it runs on" \
  eval 'log_has 2 "cannot write what this JVM loaded" && log_has 2 "observer patch active: $version"'

# Initial ISR filter: broker 3 is a replica of every partition but never starts in the ISR.
tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create --topic smoke \
  --replica-assignment 3:1:2 >/dev/null
sleep 2
describe smoke | sed 's/^/  /'
check "initial ISR leaves the observer out and the leader is not the observer" isr_is smoke "1,2"
tool org.apache.kafka.tools.ProducerPerformance --topic smoke --num-records 20000 --record-size 100 \
  --throughput -1 --producer-props bootstrap.servers="$bootstrap" acks=all >/dev/null
sleep 6
check "a caught-up observer stays out of the ISR" isr_is smoke "1,2"

# Files inconsistent (S6): brokers promoted, controller not: the leader proposes 3, the
# controller rejects it as an observer and the ISR stays; aligning the controller heals it.
echo "" > "$dir/observers-broker.ids"
sleep 6
check "controller rejects the expansion while it still sees an observer" isr_is smoke "1,2"
check "the rejection names the observer" wait_for 10 log_has "$controller" "Rejecting AlterPartition.*ineligible replicas \[3 (observer)\]"
check "the broker logs an audit line for the edit" wait_for 10 log_has 1 "observer ids changed: before=\[3\] after=\[\] added=\[\] removed=\[3\]"
check "broker 1 reports the edited content within a TTL" wait_for 5 reports 1 "$dir/observers-broker.ids"
# The operator's header: the report carries the revision the JVM uses.
printf '# Managed by kafka-observer-operator: ObserverSet smoke/smoke, revision 2\n# One observer node id per line. Do not edit: changes are reverted.\n' \
  > "$dir/observers-controller.ids"
check "the controller reports revision 2 once it loaded it" wait_for 5 reports "$controller" "$dir/observers-controller.ids"
check "promoted broker 3 joins the ISR once the controller agrees" wait_for 30 isr_is smoke "1,2,3"

# Demotion: brokers' isr-expiration shrinks it out; the controller then refuses to elect it.
echo 3 > "$dir/observers-controller.ids"
echo 3 > "$dir/observers-broker.ids"
check "demoted broker 3 leaves the ISR" wait_for 30 isr_is smoke "1,2"

# ISR join without a fetch: the leader re-checks its partitions' ISR the moment the set changes,
# from the promoted replica's last fetch (caught up: nothing was written since). Broker 3's JVM is
# stopped through the promotion (no fetch, no heartbeat; the controller would fence it only after
# broker.session.timeout.ms, 6 s), so a join can only come from that re-check: the vanilla path
# waits for 3's next fetch, which never comes while it is stopped.
# shellcheck disable=SC2312 # a failed read gives an empty leader, refused just below
smoke_leader="$(leader_of smoke)"
[[ "$smoke_leader" =~ ^[12]$ ]] || { say "FAIL no primary leads smoke before the stopped-follower promotion"; failures=$((failures + 1)); }
# Two lines prove a committed ISR with 3 on the leader: its own AlterPartition answer ("ISR updated
# to"), or the metadata image carrying the new partition epoch. When the image lands first, Kafka
# drops the answer as older without an INFO line (seen on 4.2.2), so either one counts.
joins_while_stopped() { # lines after line $1 of the leader's log that show 3 in smoke-0's ISR
  tail -n "+$(($1 + 1))" "$dir/$smoke_leader.log" |
    grep -cE "Partition smoke-0 broker=$smoke_leader\] ISR updated to ([0-9]+,)*3([, ]|$)|state change for smoke-0 .* isr=\[([0-9]+, )*3[],]"
}
# shellcheck disable=SC2034 # used inside the eval of the check below
log_lines="$(wc -l < "$dir/$smoke_leader.log")"
# shellcheck disable=SC2312 # an unreadable pid file gives kill '', which fails by itself
kill -STOP "$(cat "$dir/3.pid")"
echo "" > "$dir/observers-controller.ids"
check "the controller loads the promotion while 3 is stopped" wait_for 5 reports "$controller" "$dir/observers-controller.ids"
echo "" > "$dir/observers-broker.ids"
# shellcheck disable=SC2312 # grep -c prints 0 on no match; an unreadable log compares unequal
check "promoted broker 3 joins the ISR with its JVM stopped (no fetch needed)" \
  wait_for 4 eval '[[ "$(joins_while_stopped "$log_lines")" -ge 1 ]]'
# shellcheck disable=SC2312 # an unreadable pid file gives kill '', which fails by itself
kill -CONT "$(cat "$dir/3.pid")"
echo 3 > "$dir/observers-controller.ids"
echo 3 > "$dir/observers-broker.ids"
check "demoted again, broker 3 leaves the ISR" wait_for 30 isr_is smoke "1,2"

# Election: with both primaries gone the observer must not lead (Leader: none).
# shellcheck disable=SC2312 # an unreadable pid file gives kill '', which fails by itself
kill -9 "$(cat "$dir/1.pid")"; rm -f "$dir/1.pid"
check "leader moves to primary 2 after kill -9 of 1" wait_for 30 leader_is smoke 2
bootstrap="$net.2:9092,$net.3:9092"
# shellcheck disable=SC2312 # an unreadable pid file gives kill '', which fails by itself
kill -9 "$(cat "$dir/2.pid")"; rm -f "$dir/2.pid"
bootstrap="$net.3:9092"
sleep 12
describe smoke | sed 's/^/  /'
check "with every primary down the observer is not elected" leader_is smoke none
tool org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$bootstrap" --election-type unclean \
  --topic smoke --partition 0 > "$dir/unclean.out" 2>&1 || true
sed 's/^/  /' "$dir/unclean.out"
sleep 2
check "not even an unclean election elects the observer" leader_is smoke none

# Unreadable and corrupt files: the broker keeps the last value and warns.
# shellcheck disable=SC2312 # id -u does not fail
if [[ $(id -u) -ne 0 ]]; then
  chmod 000 "$dir/observers-broker.ids"
  check "an unreadable file keeps the last value with a WARN" wait_for 15 log_has 3 "cannot use .*AccessDenied.*keeping the last value \[3\]"
  chmod 644 "$dir/observers-broker.ids"
else
  say "SKIP chmod 000 (root reads it anyway)"
fi
printf 'garbage\n' > "$dir/observers-broker.ids"
# Positive checks wait (bounded) for their line: the refresher runs once per TTL, but beside the
# drills at nice 10 a fixed 2 s was once too short (4.3.1 in CI, 2026-12-02).
check "garbage keeps the last value with a WARN" wait_for 15 log_has 3 "cannot use .*keeping the last value \[3\]"
# The report is written on its own thread after the load it reports: bounded wait as well (4.0.2
# beside the drills in CI, 2026-12-06, read it before the write of the [3] it had loaded).
check "garbage keeps the last report" wait_for 15 reports_text 3 "3"

# Positive control for the election gate: promote 3 on the controller, then the same unclean
# election must elect it (S4), so the refusal above came from the observer gate.
echo "" > "$dir/observers-controller.ids"
sleep 2
tool org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$bootstrap" --election-type unclean \
  --topic smoke --partition 0 >/dev/null 2>&1 || true
check "once promoted on the controller, the unclean election elects 3" wait_for 15 leader_is smoke 3

# No file and no $KAFKA_OBSERVER_BROKER_IDS: the JVM runs on the empty set and says so.
rm -f "$dir/observers-broker.ids"
check "a missing file is reported as the empty fallback" \
  wait_for 5 reports_text 3 "# kafka-observer-patch loaded: source=empty"

say "logs in $dir; $failures failure(s)"
[[ $failures -eq 0 ]]
