#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# `kubectl observer` at 50,000 partitions on the test bed (make bench-status): creates topics
# totalling BENCH_PARTITIONS (50000) partitions on the bed's Kafka, waits until the metadata shows
# every one of them led, times `status` (the default summary), `status --under-min-isr`,
# `status -o json` and `plan` (BENCH_RUNS runs each, default 5; wall time of the whole command,
# scan included), prints p50 and max, then deletes the topics and waits until the metadata no
# longer lists them (the bed as found). Hold the bed lock for the whole run
# (`flock -o /tmp/koo-bed.lock make bench-status`).
#
# The layout, and why: the bed's brokers are small (-Xmx256m, a 512 MiB container limit, 20,000
# open files each). Every replica costs a broker one open file (its active segment) and heap, so
# the partitions are spread over the three primaries 1-3 with replication factor 1 (50,000
# replicas in all, ~16,700 per primary, under the file limit), and one topic in ten gets
# replication factor 2 with the observer 4 as its second replica (assignment `p:4`: a primary
# leads, the observer follows, as in a real cluster: the summary and the engine then have an
# observer hosting thousands of partitions to look at). min.insync.replicas=1 on every topic, so
# nothing triggers the bed's automatic policy.
# Topics are created one at a time (BENCH_TOPIC_PARTITIONS, 2500, each); after every second the
# old generation of every Kafka JVM is measured after a full GC (host jcmd): when one is above
# BENCH_HEAP_LIMIT_MIB (110 of its 256 MiB), no further topic is created and the bench measures
# the size reached, saying so. Why 110: the first run went on to 50,000 partitions (largest old
# generation 73 MiB at 12,500, 150 at 25,000, 170 at 37,500 and 50,000), measured them, and
# three brokers then died of java.lang.OutOfMemoryError while the 50,000 partitions were
# deleted at once; the deletion now goes topic by topic, and the bed's brokers are not taken
# past about 15,000-20,000 partitions (the second run stopped at 15,000: 131 MiB).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../drills/kafka/lib.sh
source "$here/../drills/kafka/lib.sh"
BENCH_PARTITIONS="${BENCH_PARTITIONS:-50000}"
BENCH_TOPIC_PARTITIONS="${BENCH_TOPIC_PARTITIONS:-2500}"
BENCH_RUNS="${BENCH_RUNS:-5}"
BENCH_HEAP_LIMIT_MIB="${BENCH_HEAP_LIMIT_MIB:-110}"
PREFIX="bench-status-"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kafka-observer-operator/target}"
cargo build --quiet --release --bin kubectl-observer
plugin_bin="$CARGO_TARGET_DIR/release/kubectl-observer"
resolve_bootstrap || { echo "no Kafka in namespace $KAFKA_NS: run make testbed-up" >&2; exit 2; }
out="$tb/bench/status-50k.txt"
mkdir -p "$tb/bench"

plugin() { KUBECONFIG="$tb/kubeconfig" "$plugin_bin" -n "$KAFKA_NS" --bootstrap "$KAFKA_BOOTSTRAP" "$@"; }
topics() { java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
  -Dlog4j2.configurationFile="$root/e2e/testbed/kafka/tools-log4j2.properties" \
  -cp "$(kafka_lib)/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" "$@"; }
# "<partitions> <led>" of the bench's topics as the plugin's summary sees them.
seen() {
  plugin status -o json --topic "^$PREFIX" --limit 1 |
    jq -r '"\(.partitions) \([.brokers[].leading] | add // 0)"'
}
wait_seen() { # wait_seen <partitions> <timeout s>
  local deadline=$(($(date +%s) + $2)) s
  while :; do
    s="$(seen 2>/dev/null || echo "? ?")"
    [[ "$s" == "$1 $1" ]] && return 0
    (($(date +%s) < deadline)) || { note "metadata shows '$s' (partitions led), not $1 $1, after $2 s"; return 1; }
    sleep 1
  done
}
# The largest old generation (MiB, after a full GC) of the Kafka JVMs, "<MiB> <node>".
max_old_gen() {
  local id pid kib best=0 who=none
  for id in "${BROKERS[@]}" "${CONTROLLERS[@]}"; do
    pid="$(bash "$KAFKA_SH" jvm-pid "$id")" || { note "node $id: no JVM"; echo "999 $id"; return; }
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
  note "deleting the topics $PREFIX* one by one"
  for t in $left; do
    topics --delete --topic "$t" >/dev/null || note "deleting $t failed; retried by the wait below"
    local deadline=$(($(date +%s) + 300))
    until ! plugin status -o json --partitions --topic "^$t\$" 2>/dev/null | jq -e '.replicas | length > 0' >/dev/null; do
      (($(date +%s) < deadline)) || { note "$t still listed 300 s after its deletion"; return 1; }
      sleep 2
      topics --delete --topic "$t" >/dev/null 2>&1 || true
    done
  done
  wait_seen 0 300
  note "topics gone from the metadata"
}
trap 'delete_topics || note "could not delete the topics $PREFIX*: delete them by hand"' EXIT
delete_topics

note "heap (old generation after a full GC, largest of the 7 JVMs) before: $(max_old_gen) MiB/node"
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
    read -r mib who <<<"$(max_old_gen)"
    note "$created partitions in $n topics led; largest old generation $mib MiB (node $who)"
    if ((mib > BENCH_HEAP_LIMIT_MIB)); then
      stopped="stopped at $created partitions: node $who's old generation $mib MiB > $BENCH_HEAP_LIMIT_MIB MiB"
      break
    fi
  fi
done
wait_seen "$created" 600
[[ -z "$stopped" ]] || note "$stopped"
total="$(plugin status -o json --limit 1 | jq .partitions)"
note "the bed now has $total partitions ($created of them the bench's)"

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
      note "$label failed: $(tail -n1 "$tb/bench/status-50k.err")"
    fi
  done
  local cpu50
  cpu50="$(printf '%s\n' "${cpu[@]}" | sort -n | awk 'NF {v[++n] = $1} END {print (n ? v[int((n + 1) / 2)] : 0)}')"
  printf '%s\n' "${ms[@]}" | sort -n | awk -v label="$label" -v total="$total" -v failed="$failed" -v cpu="$cpu50" '
    NF {v[++n] = $1} END {printf "STATUS-BENCH %-22s partitions=%d runs=%d failed=%d p50=%.2fs max=%.2fs cpu_p50=%.2fs\n",
      label, total, n, failed, (n ? v[int((n + 1) / 2)] : 0) / 1000, (n ? v[n] : 0) / 1000, cpu / 1000}'
}
{
  echo "# $(date -u +%FT%TZ) kubectl observer against the bed: $total partitions ($created in ${n} bench topics)${stopped:+; $stopped}; load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
  time_runs "status" status
  time_runs "status --under-min-isr" status --under-min-isr
  time_runs "status -o json" status -o json
  time_runs "plan" plan
} | tee "$out"
