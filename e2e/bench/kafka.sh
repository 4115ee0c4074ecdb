#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Kafka-side numbers of the observer patch on the test bed (make bench-kafka):
#  1. acks=all produce latency (p50/p99) with a slow replica in the ISR vs the same replica as an
#     observer (topic 1:2:4, min ISR 2, broker 4 slowed);
#  2. promotion latency: observer.ids change -> the replica in the ISR, BENCH_RUNS times;
#  3. demotion latency: observer.ids change -> the replica out of the ISR, BENCH_RUNS times.
#
# How broker 4 is slowed, and why this way: it gets replica.fetch.min.bytes=1 MiB and
# replica.fetch.wait.max.ms=$BENCH_SLOW_FETCH_MS, so the leader parks each of its fetches until that
# much data or that much time has passed: a replica whose replication round trip is ~100 ms (a far
# zone), through Kafka's own fetch protocol, while it stays a healthy ISR member (it catches up
# every round, far inside replica.lag.time.max.ms). Both are static broker configs (Kafka refuses
# to change them dynamically), so broker 4's pod alone gets them as KAFKA_CFG_* variables through
# a partitioned rolling update of the brokers' StatefulSet (updateStrategy partition 3: only
# ordinal 3, kafka-broker-3, takes the new template); the bench reverts the template and the
# strategy at the end, which rolls kafka-broker-3 back (the other pods never change revision).
# Not used: the replication throttle (follower.replication.throttled.rate/replicas) applies to
# replicas OUT of the ISR only (ReplicaFetcherThread/ReplicaManager skip throttling in-sync
# replicas), so it cannot slow an ISR member at all; SIGSTOP freezes the whole JVM (heartbeats
# included), a stall rather than a slow link, and a long one gets the broker fenced; tc/netem is
# not available on this kernel.
#
# Why the ISR case costs far more than one fetch round: a broker handles one request per client
# connection at a time (the connection is muted until the response is sent), so while a produce
# waits in purgatory for the slow replica the producer's next requests queue behind it; each one
# then needs another fetch round of the slow replica. At a rate above one request per round the
# queue grows until the producer's batches get large enough; p50 is several rounds, not one.
#
# Timings: promotion and demotion are measured from the moment the last node's projected file
# changed (controllers first, then brokers; the mtime of its ..data symlink, on the host) to the
# first metadata answer (polled every 100 ms) showing the ISR change; "change start" adds the
# ConfigMap patch, the pod nudge and the real kubelet's re-projection (or, when an ObserverSet
# owns the lists, the operator's rollout).
# The cluster: the example StatefulSets of e2e/testbed/kafka.sh in namespace $KOO_KAFKA_NAMESPACE
# (default kafka). Results: stdout and .testbed/bench/kafka.txt (kafka.<namespace>.txt for
# another namespace). About 3 minutes with the defaults.
# Like the failure suite, it needs the cluster to itself: not while the operator's promotion drill
# runs (both kill nodes and change the observer lists; an owning ObserverSet is set to Manual
# meanwhile).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../drills/kafka/lib.sh
source "$here/../drills/kafka/lib.sh"
BENCH_RUNS="${BENCH_RUNS:-5}"
BENCH_SLOW_FETCH_MS="${BENCH_SLOW_FETCH_MS:-100}"
BENCH_RECORDS="${BENCH_RECORDS:-1500}"
BENCH_RATE="${BENCH_RATE:-100}"
if [[ "$KAFKA_NS" == kafka ]]; then name=kafka; else name="kafka.$KAFKA_NS"; fi
SCENARIO_DIR="$tb/bench/$name"
rm -rf "$SCENARIO_DIR" && mkdir -p "$SCENARIO_DIR"
export SCENARIO_DIR
out="$tb/bench/$name.txt"
resolve_bootstrap || { echo "no Kafka in namespace $KAFKA_NS: run make testbed-up (or KOO_KAFKA_NAMESPACE=$KAFKA_NS e2e/testbed/kafka.sh up)" >&2; exit 2; }
nodes_patched || { echo "the Kafka nodes in $KAFKA_NS did not log 'observer patch active': the bench needs the patched image" >&2; exit 2; }
dc_build
owner="$(owning_observerset)"
via="the ConfigMaps and a pod nudge (namespace $KAFKA_NS)"
[[ -z "$owner" ]] || via="the ObserverSet $KAFKA_NS/$owner"

# The brokers' StatefulSet: the kafka container's index (its settings: lib.sh broker_env).
kafka_container_index() {
  kubectl -n "$KAFKA_NS" get statefulset kafka-broker -o jsonpath='{range .spec.template.spec.containers[*]}{.name}{"\n"}{end}' |
    awk '$1 == "kafka" {print NR - 1; exit}'
}
observer_pod="$(node_pod "$OBSERVER")"
# Written while the StatefulSet carries the bench's change: "<container index> <env length>" and
# the updateStrategy to put back.
slowed="$SCENARIO_DIR/slowed"

# roll_observer <patch JSON> <what>: patches the StatefulSet and waits until kafka-broker-3 is
# replaced, Ready and registered again.
roll_observer() {
  local uid deadline state
  uid="$(kubectl -n "$KAFKA_NS" get pod "$observer_pod" -o jsonpath='{.metadata.uid}')" ||
    { log "cannot read pod $observer_pod ($2)"; return 1; }
  kubectl -n "$KAFKA_NS" patch statefulset kafka-broker --type json -p "$1" >/dev/null ||
    { log "cannot patch statefulset kafka-broker ($2)"; return 1; }
  deadline=$((SECONDS + 240))
  # One read of both (a failed read is "not yet", never "replaced": its empty uid would differ).
  until state="$(kubectl -n "$KAFKA_NS" get pod "$observer_pod" -o jsonpath='{.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" &&
    [[ "$state" == *" True" && "${state%% *}" != "$uid" ]]; do
    ((SECONDS < deadline)) || { log "$observer_pod not replaced and Ready 240 s after the StatefulSet change ($2)"; return 1; }
    sleep 1
  done
  dc brokers 4 90000 >&2 || return 1
  log "$observer_pod replaced: $2"
}
slow_observer() {
  local ci n
  ci="$(kafka_container_index)"
  n="$(kubectl -n "$KAFKA_NS" get statefulset kafka-broker -o jsonpath="{.spec.template.spec.containers[$ci].env}" | jq length)"
  [[ "$ci" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ ]] || fail "cannot read the kafka container of statefulset kafka-broker"
  { echo "$ci $n"; kubectl -n "$KAFKA_NS" get statefulset kafka-broker -o jsonpath='{.spec.updateStrategy}'; echo; } > "$slowed"
  # shellcheck disable=SC2312 # jq -n builds a constant patch; a broken one is refused by kubectl patch in roll_observer
  roll_observer "$(jq -cn --argjson ci "$ci" --arg wait "$BENCH_SLOW_FETCH_MS" --argjson ord "$((OBSERVER - 1))" '[
    {op: "replace", path: "/spec/updateStrategy", value: {type: "RollingUpdate", rollingUpdate: {partition: $ord}}},
    {op: "add", path: "/spec/template/spec/containers/\($ci)/env/-", value: {name: "KAFKA_CFG_REPLICA_FETCH_MIN_BYTES", value: "1048576"}},
    {op: "add", path: "/spec/template/spec/containers/\($ci)/env/-", value: {name: "KAFKA_CFG_REPLICA_FETCH_WAIT_MAX_MS", value: $wait}}]')" \
    "broker $OBSERVER with replica.fetch.min.bytes=1048576, replica.fetch.wait.max.ms=$BENCH_SLOW_FETCH_MS" ||
    fail "cannot slow broker $OBSERVER"
  log_since "$OBSERVER" "- 0 0" "replica.fetch.wait.max.ms = $BENCH_SLOW_FETCH_MS\$" >/dev/null ||
    fail "broker $OBSERVER does not run with replica.fetch.wait.max.ms = $BENCH_SLOW_FETCH_MS (its KafkaConfig values)"
}
unslow_observer() {
  local ci n strategy
  [[ -s "$slowed" ]] || return 0
  { read -r ci n; read -r strategy; } < "$slowed"
  # shellcheck disable=SC2312 # jq -n builds a constant patch; a broken one is refused by kubectl patch in roll_observer
  roll_observer "$(jq -cn --argjson ci "$ci" --argjson n "$n" --argjson s "$strategy" '[
    {op: "test", path: "/spec/template/spec/containers/\($ci)/env/\($n + 1)/name", value: "KAFKA_CFG_REPLICA_FETCH_WAIT_MAX_MS"},
    {op: "remove", path: "/spec/template/spec/containers/\($ci)/env/\($n + 1)"},
    {op: "test", path: "/spec/template/spec/containers/\($ci)/env/\($n)/name", value: "KAFKA_CFG_REPLICA_FETCH_MIN_BYTES"},
    {op: "remove", path: "/spec/template/spec/containers/\($ci)/env/\($n)"},
    {op: "replace", path: "/spec/updateStrategy", value: $s}]')" \
    "back to the StatefulSet's template and update strategy" && rm -f "$slowed"
}

cleanup() {
  local rc=$?
  trap - EXIT
  unslow_observer || { echo "bench: could not revert statefulset $KAFKA_NS/kafka-broker: see $slowed" >&2; rc=1; }
  restore_default >&2 || echo "bench: could not restore the bed's default state" >&2
  give_back_policy
  exit "$rc"
}
trap cleanup EXIT
take_manual_policy || fail "the ObserverSet owning the observer lists cannot be made Manual"

result() { echo "$*" | tee -a "$out"; }
: > "$out"
# shellcheck disable=SC2312 # message text only
result "Kafka bench $(date -u +%FT%TZ), Kafka $KAFKA_VERSION patched (pods in $KAFKA_NS), observer lists via $via"

# perf <topic> <label>: kafka-producer-perf-test at a fixed rate, acks=all, no batching delay.
perf() {
  local line p50 p99 avg
  # shellcheck disable=SC2312 # bootstrap was resolved at the start (resolve_bootstrap); the perf tool fails on an empty one
  line="$("$tb/bin/kafka-producer-perf-test" --topic "$1" --num-records "$BENCH_RECORDS" --record-size 200 \
    --throughput "$BENCH_RATE" --producer-props bootstrap.servers="$(bootstrap)" acks=all linger.ms=0 2>/dev/null |
    grep '50th' | tail -n1)"
  [[ -n "$line" ]] || fail "producer-perf-test printed no summary"
  avg="$(sed -n 's/.* \([0-9.]*\) ms avg latency.*/\1/p' <<< "$line")"
  p50="$(sed -n 's/.* \([0-9]*\) ms 50th.*/\1/p' <<< "$line")"
  p99="$(sed -n 's/.* \([0-9]*\) ms 99th.*/\1/p' <<< "$line")"
  result "$(printf '  %-34s p50 %5s ms   p99 %5s ms   avg %7s ms' "$2" "$p50" "$p99" "$avg")"
}

# timed_change <topic> <await condition> <observers content>: prints "<file->isr ms> <e2e ms>".
timed_change() {
  local t="$1" cond="$2" content="$3" ready="$SCENARIO_DIR/ready" seen pid start
  rm -f "$ready" "$SCENARIO_DIR/seen"
  DRILL_READY_FILE="$ready" dc await "$t" 120000 "$cond" > "$SCENARIO_DIR/seen" &
  pid=$!
  until [[ -s "$ready" ]]; do sleep 0.05; done
  start="$(now_ms)"
  set_observers_all "$content" 2>/dev/null
  wait "$pid" || fail "$t: not $cond within 120 s"
  seen="$(cut -d' ' -f1 "$SCENARIO_DIR/seen")"
  echo "$((seen - LAST_FILE_CHANGE_MS)) $((seen - start))"
}

stats() { # stats <numbers...>: min median max
  printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "min %d  median %d  max %d", a[1], a[int((NR+1)/2)], a[NR]}'
}

# ---- 2 + 3: promotion and demotion latency (broker 4 at full speed) -------------------------
t="bench-promo-$(date +%s)"
echo "$t" >> "$SCENARIO_DIR/topics"
dc create "$t" 4:1:2 >&2
await "$t" 20000 leader=1 isr=1,2 >&2
produce "$t" 2000 all warm >/dev/null
promo=() promo_e2e=() demo=() demo_e2e=()
for i in $(seq "$BENCH_RUNS"); do
  r="$(timed_change "$t" isr-has=4 "")" || fail "promotion run $i failed (see $SCENARIO_DIR)"
  read -r a b <<<"$r"
  [[ -n "${b:-}" ]] || fail "promotion run $i measured nothing: '$r' (see $SCENARIO_DIR)"
  promo+=("$a") promo_e2e+=("$b")
  produce "$t" 200 all "p$i" >/dev/null
  r="$(timed_change "$t" isr-lacks=4 "$DEFAULT_OBSERVERS")" || fail "demotion run $i failed (see $SCENARIO_DIR)"
  read -r a b <<<"$r"
  [[ -n "${b:-}" ]] || fail "demotion run $i measured nothing: '$r' (see $SCENARIO_DIR)"
  demo+=("$a") demo_e2e+=("$b")
  log "run $i: promotion ${promo[-1]} ms (e2e ${promo_e2e[-1]}), demotion ${demo[-1]} ms (e2e ${demo_e2e[-1]})"
done
# shellcheck disable=SC2312 # message text only
result "promotion, file change -> in ISR (ms):     ${promo[*]}   ($(stats "${promo[@]}"))"
# shellcheck disable=SC2312 # message text only
result "promotion, change start -> in ISR (ms):    ${promo_e2e[*]}   ($(stats "${promo_e2e[@]}"))"
# shellcheck disable=SC2312 # message text only
result "demotion, file change -> out of ISR (ms):  ${demo[*]}   ($(stats "${demo[@]}"))"
# shellcheck disable=SC2312 # message text only
result "demotion, change start -> out of ISR (ms): ${demo_e2e[*]}   ($(stats "${demo_e2e[@]}"))"
lag_ms="$(broker_env KAFKA_CFG_REPLICA_LAG_TIME_MAX_MS 30000)"
# shellcheck disable=SC2312 # message text only
result "  (observer.ids TTL $(broker_env KAFKA_OBSERVER_IDS_TTL_MS 1000) ms on the pods, replica.lag.time.max.ms $lag_ms: the leader's ISR-shrink task runs every $((lag_ms / 2000)) s)"

# ---- 1: acks=all latency, slow replica in the ISR vs observer --------------------------------
slow_observer
t="bench-latency-$(date +%s)"
echo "$t" >> "$SCENARIO_DIR/topics"
dc create "$t" 1:2:4 >&2
await "$t" 20000 leader=1 isr=1,2 >&2
result "acks=all produce latency, $BENCH_RECORDS x 200 B at $BENCH_RATE/s, topic 1:2:4 min ISR 2, broker 4 slowed (fetch wait ${BENCH_SLOW_FETCH_MS} ms):"
perf "$t" "broker 4 observer (ISR 1,2)"
set_observers_all "" 2>/dev/null
await "$t" 60000 isr=1,2,4 >&2
perf "$t" "broker 4 in the ISR (ISR 1,2,4)"
set_observers_all "$DEFAULT_OBSERVERS" 2>/dev/null
await "$t" 60000 isr=1,2 >&2
perf "$t" "broker 4 observer again (ISR 1,2)"
result "results in $out"
