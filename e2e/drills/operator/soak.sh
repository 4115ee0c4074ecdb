#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# A seeded random fault schedule (Jepsen style) on the bed's node-per-zone layout, against the
# example Kafka cluster, its ObserverSet (policy UnderMinIsr, autoDemote) and the chart's operator:
#
#   e2e/drills/operator/soak.sh SEED MINUTES      (make soak SEED=n MINUTES=m)
#
# For MINUTES, one fault at a time, drawn from SEED: a zone (a, b or c: a controller and a primary
# broker each, the operator's two replicas in two of them) partitioned or powered off for 15-45 s, the
# remote zone d slowed (a 1 Mbit/s cap), the operator's leading process SIGKILLed, kube-apiserver
# SIGKILLed and started again; after each, every Kafka pod Ready again and a pause of 5-20 s.
# Throughout: an acks=all idempotent producer on a topic over the three zones of primaries with
# the observer 4 on every partition (1:2:4, 2:3:4, 3:1:4, min ISR 2), the partitions' leaders and
# ISRs sampled every 200 ms, both observer lists every 200 ms. Checked at the end, on every sample:
#   - controllers first both ways: the brokers' list never loses 4 before the controllers' one
#     (a promotion) nor gets it back before it (a demotion), judged on consecutive samples;
#   - 4 leads a partition only while the controllers' list lacks 4, or within 5 s after it
#     listed 4 again (the demotion moves leadership away first): no observer ever leads;
#   - every acknowledged record read back exactly once;
#   - two promotions of 4 never closer than the policy's cooldown (30 s);
#   - writes flow at the end.
# Prints the schedule as it runs ("SOAK event <n> <fault> ..."), one "SOAK seed=... events=...
# promotions=... acked=... lost=0 duplicated=0" line, and "SOAK PASS <s>s" or "SOAK FAIL <reason>".
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=drills-zones.sh
source "$here/drills-zones.sh"

SEED="${1:?usage: soak.sh SEED MINUTES}" MINUTES="${2:?usage: soak.sh SEED MINUTES}"
[[ "$SEED" =~ ^[0-9]+$ && "$MINUTES" =~ ^[0-9]+$ ]] || { echo "SEED and MINUTES are whole numbers" >&2; exit 2; }
COOLDOWN_MS=30000

[[ "$tb" != off && -f "$tb/kubeconfig" ]] || { echo "no test bed at $tb: run make testbed-up" >&2; exit 2; }
resolve_bootstrap || { echo "no Kafka in namespace $KAFKA_NS: run make testbed-up" >&2; exit 2; }
dc_build || { echo "cannot compile the drill client" >&2; exit 2; }
bash "$root/e2e/testbed/operator-chart.sh" up >&2 || { echo "the operator's Helm chart does not come up" >&2; exit 2; }
bash "$KAFKA_SH" observerset >&2 || exit 2

# draw N: DRAW, a number in [0, N) from the seeded sequence (bash's RANDOM, seeded once). Never
# in a $(...): a subshell's draws would not advance the parent's sequence.
RANDOM="$SEED"
DRAW=0
draw() { DRAW=$((RANDOM % $1)); }

all_pods_ready() {
  local n
  n="$(kubectl -n "$KAFKA_NS" get pods -l app.kubernetes.io/name=kafka \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" || true
  [[ "$n" == 7 ]]
}
wait_recovered() {
  local deadline=$((SECONDS + 300))
  until all_pods_ready; do
    ((SECONDS < deadline)) || fail "the Kafka pods are not all Ready 300 s after the fault ended"
    sleep 1
  done
}

# fault N: one fault of the schedule; logs and echoes what it did.
fault() {
  local n="$1" kind zone hold pid leader
  local zones=(a b c)
  draw 6; kind="$DRAW"
  draw 3; zone="${zones[DRAW]}"
  draw 31; hold=$((15 + DRAW))
  case "$kind" in
    0 | 1)
      echo "SOAK event $n partition zone=$zone hold_s=$hold"
      bash "$NODE_SH" partition "$zone" >&2 || fail "partition $zone"
      sleep "$hold"
      bash "$NODE_SH" heal "$zone" >&2 || fail "heal $zone" ;;
    2)
      echo "SOAK event $n power-off zone=$zone hold_s=$hold"
      bash "$NODE_SH" power-off "$zone" >&2 || fail "power-off $zone"
      sleep "$hold"
      bash "$NODE_SH" power-on "$zone" >&2 || fail "power-on $zone" ;;
    3)
      echo "SOAK event $n slow zone=d rate=1mbit hold_s=$hold"
      bash "$NODE_SH" slow d 1mbit >&2 || fail "slow d"
      sleep "$hold"
      bash "$NODE_SH" unslow d >&2 || fail "unslow d" ;;
    4)
      leader="$(operator_leader)"
      pid="$(bash "$KAFKA_SH" container-pid "$OPERATOR_NS" "$leader" operator)" || fail "no operator container in the leader pod $leader"
      echo "SOAK event $n kill-operator-leader pod=$leader"
      kill -KILL "$pid" ;;
    5)
      pid="$(cat "$tb/pids/kube-apiserver.pid" 2>/dev/null)" || fail "no kube-apiserver pid"
      echo "SOAK event $n kill-apiserver down_s=5"
      kill -KILL "$pid"
      sleep 5
      bash "$root/e2e/testbed/control-plane.sh" up >&2 || fail "kube-apiserver does not start again" ;;
  esac
  wait_recovered
}

scenario_soak() {
  local topic t0 t_end n=0 t_last
  topic="$(new_drill_topic soak 1:2:4,2:3:4,3:1:4)"
  start_isr_sampler "$topic"
  start_cm_sampler
  start_stream "$topic" 20
  on_restore "for z in a b c; do bash '$NODE_SH' heal \$z >&2; done; bash '$NODE_SH' unslow d >&2"
  t0="$(now_ms)"
  wait_ack 0 "$t0" 60 "records acknowledged before the schedule" >/dev/null
  t_end=$((SECONDS + MINUTES * 60))
  while ((SECONDS < t_end)); do
    n=$((n + 1))
    fault "$n"
    draw 16
    sleep $((5 + DRAW))
  done
  t_last="$(now_ms)"
  wait_ack 0 "$t_last" 120 "writes at the end" >/dev/null
  wait_ack 1 "$t_last" 120 "writes at the end" >/dev/null
  wait_ack 2 "$t_last" 120 "writes at the end" >/dev/null
  touch "$SCENARIO_DIR/isr.stop"
  stop_bg cm
  soak_invariants "$t0" "$t_last"
  stop_stream_and_verify "$topic"
  echo "SOAK seed=$SEED minutes=$MINUTES events=$n promotions=$SOAK_PROMOTIONS $STREAM_ACCOUNTING"
}

# soak_invariants FROM_MS TO_MS: the checks above, on the whole sample logs.
SOAK_PROMOTIONS=0
soak_invariants() {
  local out
  controllers_first_both_ways "$SCENARIO_DIR/cm.log" "$1" "$2"
  # 4 leads only while the controllers' list lacks it (or up to 5 s after it listed 4 again).
  out="$(awk "$AWK_ISR $AWK_CM"'
    FILENAME ~ /cm.log$/ { if ($2 ~ /[?]/) next; n++; t[n] = $1; promoted[n] = lacks($2, 4); next }
    $0 ~ /[?]/ { next }
    { while (j < n && t[j + 1] <= $1) j++
      if (j == 0) next
      if (leads(4) && !promoted[j]) {
        k = j; while (k > 0 && !promoted[k]) k--
        if (k == 0 || $1 - t[k + 1] > 5000) { print "4 leads at " $1 " while listed as an observer since " (k ? t[k + 1] : "the start") ": " $0; exit 1 }
      } }' "$SCENARIO_DIR/cm.log" "$SCENARIO_DIR/isr.log")" || fail "no observer ever leads: $out"
  # Promotions: the controllers' list going from listing 4 to lacking it.
  out="$(awk -v cd="$COOLDOWN_MS" "$AWK_CM"'
    $2 ~ /[?]/ { next }
    { p = lacks($2, 4) }
    seen && p && !prev { count++; if (last && $1 - last < cd) { print "promotions " last " and " $1 " closer than the cooldown"; exit 1 }; last = $1 }
    { prev = p; seen = 1 }
    END { print count + 0 }' "$SCENARIO_DIR/cm.log")" || fail "$out"
  SOAK_PROMOTIONS="$out"
}

run_scenarios SOAK
rc=$?
# The schedule and the summary, from the scenario's log (run_scenarios keeps its output there).
grep -h '^SOAK ' "$drill_work/SOAK/log" || true
exit "$rc"
