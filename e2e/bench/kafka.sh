#!/usr/bin/env bash
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
# every round, far inside replica.lag.time.max.ms). Not used: the replication throttle
# (follower.replication.throttled.rate/replicas) applies to replicas OUT of the ISR only
# (ReplicaFetcherThread/ReplicaManager skip throttling in-sync replicas), so it cannot slow an ISR
# member at all; SIGSTOP freezes the whole JVM (heartbeats included), a stall rather than a slow
# link, and a long one gets the broker fenced; tc/netem is not available on this kernel.
#
# Why the ISR case costs far more than one fetch round: a broker handles one request per client
# connection at a time (the connection is muted until the response is sent), so while a produce
# waits in purgatory for the slow replica the producer's next requests queue behind it; each one
# then needs another fetch round of the slow replica. At a rate above one request per round the
# queue grows until the producer's batches get large enough; p50 is several rounds, not one.
#
# Timings: promotion and demotion are measured from the moment the last node's projected file
# changed (controllers first, then brokers; the mtime of its ..data symlink) to the first metadata
# answer (polled every 100 ms) showing the ISR change; "e2e" adds the ConfigMap/stand-in path
# when the control plane is up. Results: stdout and .testbed/bench/kafka.txt.
# Like the failure suite, it needs the bed to itself: not while the operator's promotion drill runs
# (both kill nodes and change the observer lists; an owning ObserverSet is set to Manual meanwhile).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../drills/kafka/lib.sh"
BENCH_RUNS="${BENCH_RUNS:-5}"
BENCH_SLOW_FETCH_MS="${BENCH_SLOW_FETCH_MS:-100}"
BENCH_RECORDS="${BENCH_RECORDS:-1500}"
BENCH_RATE="${BENCH_RATE:-100}"
SCENARIO_DIR="$tb/bench/kafka"
rm -rf "$SCENARIO_DIR" && mkdir -p "$SCENARIO_DIR"
export SCENARIO_DIR
out="$tb/bench/kafka.txt"
[[ -s "$kdir/patch-jar" ]] || { echo "the bed runs vanilla Kafka: the bench needs the patched nodes" >&2; exit 2; }
dc_build
export OBSERVERS_VIA="$(observers_via)"
slow_override="$kdir/nodes/$OBSERVER/overrides.properties"

cleanup() {
  local rc=$?
  trap - EXIT
  if [[ -f "$slow_override" ]]; then
    rm -f "$slow_override"
    bash "$KAFKA_SH" restart "$OBSERVER" >&2 || true
  fi
  restore_default >&2 || echo "bench: could not restore the bed's default state" >&2
  give_back_policy
  exit "$rc"
}
trap cleanup EXIT
take_manual_policy || fail "the ObserverSet owning the observer lists cannot be made Manual"

result() { echo "$*" | tee -a "$out"; }
: > "$out"
result "Kafka bench $(date -u +%FT%TZ), Kafka $KAFKA_VERSION patched, observer lists via $OBSERVERS_VIA"

# perf <topic> <label>: kafka-producer-perf-test at a fixed rate, acks=all, no batching delay.
perf() {
  local line p50 p99 avg
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
  read -r a b < <(timed_change "$t" isr-has=4 "")
  [[ -n "${b:-}" ]] || fail "promotion run $i failed (see $SCENARIO_DIR)"
  promo+=("$a") promo_e2e+=("$b")
  produce "$t" 200 all "p$i" >/dev/null
  read -r a b < <(timed_change "$t" isr-lacks=4 "$DEFAULT_OBSERVERS")
  [[ -n "${b:-}" ]] || fail "demotion run $i failed (see $SCENARIO_DIR)"
  demo+=("$a") demo_e2e+=("$b")
  note "run $i: promotion ${promo[-1]} ms (e2e ${promo_e2e[-1]}), demotion ${demo[-1]} ms (e2e ${demo_e2e[-1]})"
done
result "promotion, file change -> in ISR (ms):     ${promo[*]}   ($(stats "${promo[@]}"))"
result "promotion, change start -> in ISR (ms):    ${promo_e2e[*]}   ($(stats "${promo_e2e[@]}"))"
result "demotion, file change -> out of ISR (ms):  ${demo[*]}   ($(stats "${demo[@]}"))"
result "demotion, change start -> out of ISR (ms): ${demo_e2e[*]}   ($(stats "${demo_e2e[@]}"))"
result "  (observer.ids TTL ${KAFKA_OBSERVER_IDS_TTL_MS:-500} ms on the bed, replica.lag.time.max.ms 10000: the leader's ISR-shrink task runs every 5 s)"

# ---- 1: acks=all latency, slow replica in the ISR vs observer --------------------------------
printf 'replica.fetch.min.bytes=1048576\nreplica.fetch.wait.max.ms=%s\n' "$BENCH_SLOW_FETCH_MS" > "$slow_override"
bash "$KAFKA_SH" restart "$OBSERVER" >&2
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
