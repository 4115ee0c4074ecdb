#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# `kubectl observer` at 50,000 partitions on the test bed (make bench-status): on a Kafka cluster
# of its own (the example StatefulSets in namespace BENCH_NAMESPACE, default kafka-bench, brought
# up by e2e/testbed/kafka.sh with BENCH_HEAP_MIB, 1536, of heap per JVM), creates topics
# totalling BENCH_PARTITIONS (50000) partitions, waits until the metadata shows every one of
# them led, times `status` (the default summary), `status --under-min-isr`, `status -o json` and
# `plan` (BENCH_RUNS runs each, default 5; wall time of the whole command, scan included), prints
# p50 and max, then purges the namespace (`kafka.sh purge`: workloads, claims, volumes, data;
# BENCH_KEEP=1 keeps it). With BENCH_NAMESPACE=kafka it runs on the bed's own cluster and deletes
# its topics one by one afterwards. Hold the bed lock for the whole run
# (`flock -o /tmp/koo-bed.lock make bench-status`).
#
# The layout, and why: every replica costs a broker one open file (its active segment; 20,000
# per container on the bed's node) and heap, so the partitions are spread over the three
# primaries 1-3 with replication factor 1 (50,000 replicas in all, ~16,700 per primary, under
# the file limit), and one topic in ten gets replication factor 2 with the observer 4 as its
# second replica (assignment `p:4`: a primary leads, the observer follows, as in a real cluster:
# the summary and the engine then have an observer hosting thousands of partitions to look at).
# min.insync.replicas=1 on every topic, so nothing triggers an automatic policy.
# Topics are created one at a time (BENCH_TOPIC_PARTITIONS, 2500, each); after every second the
# old generation of every Kafka JVM is measured after a full GC (host jcmd): when one is above
# BENCH_HEAP_LIMIT_MIB (43% of the heap), no further topic is created and the bench measures the
# size reached, saying so. Why its own cluster: the bed's example brokers have 256 MiB of heap;
# on them the old generation reached 150-170 MiB at 25,000-50,000 partitions, and three of them
# died of java.lang.OutOfMemoryError while the 50,000 partitions were deleted at once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export KOO_KAFKA_NAMESPACE="${BENCH_NAMESPACE:-kafka-bench}"
# shellcheck source=../drills/kafka/lib.sh
source "$here/../drills/kafka/lib.sh"
BENCH_PARTITIONS="${BENCH_PARTITIONS:-50000}"
BENCH_TOPIC_PARTITIONS="${BENCH_TOPIC_PARTITIONS:-2500}"
BENCH_RUNS="${BENCH_RUNS:-5}"
BENCH_HEAP_MIB="${BENCH_HEAP_MIB:-1536}"
if [[ "$KAFKA_NS" == kafka ]]; then heap_mib=256; else heap_mib="$BENCH_HEAP_MIB"; fi
BENCH_HEAP_LIMIT_MIB="${BENCH_HEAP_LIMIT_MIB:-$((heap_mib * 43 / 100))}"
PREFIX="bench-status-"
cargo build --quiet --release --bin kubectl-observer
plugin_bin="$CARGO_TARGET_DIR/release/kubectl-observer"
if [[ "$KAFKA_NS" != kafka ]]; then
  log "bringing up the bench's own Kafka in namespace $KAFKA_NS (heap $BENCH_HEAP_MIB MiB per JVM)"
  KOO_KAFKA_HEAP_MIB="$BENCH_HEAP_MIB" bash "$KAFKA_SH" up
  # The plugin reads the ObserverSet (spec.observers, the policy) as a user's would find it.
  sed "s/\.kafka\.svc:/.$KAFKA_NS.svc:/" "$root/examples/kafka/observerset/observerset.yaml" |
    kubectl -n "$KAFKA_NS" apply -f - >/dev/null
fi
resolve_bootstrap || { echo "no Kafka in namespace $KAFKA_NS: run make testbed-up" >&2; exit 2; }
out="$tb/bench/status-50k.txt"
mkdir -p "$tb/bench"

plugin() { KUBECONFIG="$tb/kubeconfig" "$plugin_bin" -n "$KAFKA_NS" --bootstrap "$KAFKA_BOOTSTRAP" "$@"; }
# shellcheck disable=SC2312 # kafka_lib only prints a path
topics() { java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
  -Dlog4j2.configurationFile="$root/e2e/testbed/kafka/tools-log4j2.properties" \
  -cp "$(kafka_lib)/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" "$@"; }
# "<partitions> <led>" of the bench's topics as the plugin's summary sees them.
seen() {
  plugin status -o json --topic "^$PREFIX" --limit 1 |
    jq -r '"\(.partitions) \([.brokers[].leading] | add // 0)"'
}
wait_seen() { # wait_seen <partitions> <timeout s>
  local deadline=$((SECONDS + $2)) s
  while :; do
    s="$(seen 2>/dev/null || echo "? ?")"
    [[ "$s" == "$1 $1" ]] && return 0
    ((SECONDS < deadline)) || { log "metadata shows '$s' (partitions led), not $1 $1, after $2 s"; return 1; }
    sleep 1
  done
}
# The largest old generation (MiB, after a full GC) of the Kafka JVMs, "<MiB> <node>".
max_old_gen() {
  local id pid kib best=0 who=none
  for id in "${BROKERS[@]}" "${CONTROLLERS[@]}"; do
    pid="$(bash "$KAFKA_SH" jvm-pid "$id")" || { log "node $id: no JVM"; echo "999 $id"; return; }
    jcmd "$pid" GC.run >/dev/null
    kib="$(jcmd "$pid" GC.heap_info | sed -n 's/.*tenured generation.* used \([0-9]*\)K.*/\1/p')"
    ((kib / 1024 > best)) && { best=$((kib / 1024)); who=$id; }
  done
  echo "$best $who"
}
# One topic at a time, each until the metadata no longer lists it: deleting tens of thousands of
# partitions at once put three of the bed's brokers out of heap.
delete_topics() {
  local t left
  left="$(plugin status -o json --partitions --topic "^$PREFIX" 2>/dev/null | jq -r '[.replicas[].topic] | unique | .[]')" || return 1
  [[ -n "$left" ]] || return 0
  log "deleting the topics $PREFIX* one by one"
  for t in $left; do
    topics --delete --topic "$t" >/dev/null || log "deleting $t failed; retried by the wait below"
    local deadline=$((SECONDS + 300))
    until ! plugin status -o json --partitions --topic "^$t\$" 2>/dev/null | jq -e '.replicas | length > 0' >/dev/null; do
      ((SECONDS < deadline)) || { log "$t still listed 300 s after its deletion"; return 1; }
      sleep 2
      topics --delete --topic "$t" >/dev/null 2>&1 || true
    done
  done
  wait_seen 0 300
  log "topics gone from the metadata"
}
finish() {
  if [[ "$KAFKA_NS" == kafka ]]; then
    delete_topics || log "could not delete the topics $PREFIX*: delete them by hand"
  elif [[ "${BENCH_KEEP:-0}" != 1 ]]; then
    bash "$KAFKA_SH" purge || log "could not purge namespace $KAFKA_NS: KOO_KAFKA_NAMESPACE=$KAFKA_NS e2e/testbed/kafka.sh purge"
  fi
}
trap finish EXIT
delete_topics

# shellcheck disable=SC2312 # max_old_gen always prints a line (999 and the node when a JVM is missing)
read -r mib who <<<"$(max_old_gen)"
log "heap before: largest old generation (after a full GC) of the 7 JVMs $mib MiB (node $who)"
created=0 n=0 stopped=""
while ((created + BENCH_TOPIC_PARTITIONS <= BENCH_PARTITIONS)); do
  rf2=$((n % 10 == 9))
  assignment="$(awk -v n="$BENCH_TOPIC_PARTITIONS" -v rf2="$rf2" 'BEGIN {
    for (p = 0; p < n; p++) printf "%s%d%s", (p ? "," : ""), p % 3 + 1, (rf2 ? ":4" : "") }')"
  topic="$(printf '%s%02d' "$PREFIX" "$n")"
  topics --create --topic "$topic" --replica-assignment "$assignment" \
    --config min.insync.replicas=1 >/dev/null
  created=$((created + BENCH_TOPIC_PARTITIONS)) n=$((n + 1))
  if ((n % 2 == 0)); then
    wait_seen "$created" 600
    # shellcheck disable=SC2312 # max_old_gen always prints a line (999 and the node when a JVM is missing)
    read -r mib who <<<"$(max_old_gen)"
    log "$created partitions in $n topics led; largest old generation $mib MiB (node $who)"
    if ((mib > BENCH_HEAP_LIMIT_MIB)); then
      stopped="stopped at $created partitions: node $who's old generation $mib MiB > $BENCH_HEAP_LIMIT_MIB MiB"
      break
    fi
  fi
done
wait_seen "$created" 600
[[ -z "$stopped" ]] || log "$stopped"
total="$(plugin status -o json --limit 1 | jq .partitions)"
log "the bed now has $total partitions ($created of them the bench's)"

# time_runs <label> <args...>: BENCH_RUNS wall times of the plugin, p50 and max of the runs
# that succeeded, the p50 of its own CPU time (user + system: the rest of the wall time is spent
# waiting for Kafka and the apiserver), and how many failed (counted, not retried).
time_runs() {
  local label="$1" i t0 t1 ms=() cpu=() failed=0
  shift
  for ((i = 0; i < BENCH_RUNS; i++)); do
    t0=$(date +%s%N)
    if KUBECONFIG="$tb/kubeconfig" /usr/bin/time -f '%U %S' -o "$tb/bench/status-50k.cpu" \
      "$plugin_bin" -n "$KAFKA_NS" --bootstrap "$KAFKA_BOOTSTRAP" "$@" >/dev/null 2>"$tb/bench/status-50k.err"; then
      t1=$(date +%s%N)
      ms+=($(((t1 - t0) / 1000000)))
      cpu+=("$(awk '{printf "%d", ($1 + $2) * 1000}' "$tb/bench/status-50k.cpu")")
    else
      failed=$((failed + 1))
      # shellcheck disable=SC2312 # message text only
      log "$label failed: $(tail -n1 "$tb/bench/status-50k.err")"
    fi
  done
  local cpu50
  cpu50="$(printf '%s\n' "${cpu[@]}" | sort -n | awk 'NF {v[++n] = $1} END {print (n ? v[int((n + 1) / 2)] : 0)}')"
  printf '%s\n' "${ms[@]}" | sort -n | awk -v label="$label" -v total="$total" -v failed="$failed" -v cpu="$cpu50" '
    NF {v[++n] = $1} END {printf "STATUS-BENCH %-22s partitions=%d runs=%d failed=%d p50=%.2fs max=%.2fs cpu_p50=%.2fs\n",
      label, total, n, failed, (n ? v[int((n + 1) / 2)] : 0) / 1000, (n ? v[n] : 0) / 1000, cpu / 1000}'
}
{
  # shellcheck disable=SC2312 # message text only
  echo "# $(date -u +%FT%TZ) kubectl observer against the bed's namespace $KAFKA_NS (heap ${heap_mib} MiB per JVM): $total partitions ($created in ${n} bench topics)${stopped:+; $stopped}; load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
  time_runs "status" status
  time_runs "status --under-min-isr" status --under-min-isr
  time_runs "status -o json" status -o json
  time_runs "plan" plan
} | tee "$out"
