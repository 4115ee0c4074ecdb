#!/usr/bin/env bash
# The observer patch's failure suite against the test bed's patched KRaft cluster (3 controllers,
# brokers 1-4, broker 4 the observer). S1-S8 as described in e2e/drills/kafka/README.md, plus S9
# (exactly-once through a promoted observer). Each scenario uses its own topic with the observer
# first in the replica list (4:1:2:3, so it would be the preferred leader if it could), min ISR 2,
# asserts its pass criteria and restores the bed's default state at the end, failed or not.
#
#   e2e/drills/kafka/run.sh [S1 S2 ...]      default: all; prints "S<n> PASS <s>s" or "S<n> FAIL <reason>"
#
# Per-scenario logs: .testbed/drills/kafka/S<n>/log. Exit status: non-zero if any scenario failed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
source "$here/scenarios-a.sh"
source "$here/scenarios-b.sh"

ALL=(S1 S2 S3 S4 S5 S6 S7 S8 S9)
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=("${ALL[@]}")
for s in "${wanted[@]}"; do
  [[ " ${ALL[*]} " == *" ${s^^} "* ]] || { echo "unknown scenario '$s' (known: ${ALL[*]})" >&2; exit 2; }
done

[[ -s "$kdir/bootstrap" ]] || { echo "the Kafka bed is not up: run make testbed-up (or e2e/testbed/kafka.sh up)" >&2; exit 2; }
[[ -s "$kdir/patch-jar" ]] || { echo "the bed runs VANILLA Kafka (no .testbed/kafka/patch-jar): the suite needs the patched nodes" >&2; exit 2; }
dc_build || { echo "cannot compile the drill client" >&2; exit 2; }
export OBSERVERS_VIA="$(observers_via)"
if [[ $OBSERVERS_VIA == configmap ]]; then
  note "observer lists change through the ConfigMaps kafka/kafka-observers-{controller,broker} and the kubelet stand-in"
else
  note "no control plane or no kubelet stand-in: observer lists are projected locally in the kubelet's layout"
fi

take_manual_policy || { echo "the ObserverSet owning the observer lists cannot be made Manual (see above)" >&2; give_back_policy; exit 2; }
trap give_back_policy EXIT

failed=0
for s in "${wanted[@]}"; do
  s="${s^^}"
  SCENARIO_DIR="$drill_work/$s"
  rm -rf "$SCENARIO_DIR" && mkdir -p "$SCENARIO_DIR"
  started=$(date +%s)
  (
    set -eE
    export SCENARIO_DIR
    # Restore even on failure; a failing restore fails the scenario too.
    trap 'rc=$?; trap - EXIT; restore_default || { [[ -s "$SCENARIO_DIR/reason" ]] || echo "could not restore the default state" > "$SCENARIO_DIR/reason"; rc=1; }; exit $rc' EXIT
    note "==== $s"
    precondition
    "scenario_${s,,}"
  ) > "$SCENARIO_DIR/log" 2>&1
  rc=$?
  took=$(($(date +%s) - started))
  if [[ $rc -eq 0 ]]; then
    echo "$s PASS ${took}s"
  else
    reason="$(head -n1 "$SCENARIO_DIR/reason" 2>/dev/null)"
    echo "$s FAIL ${reason:-exit $rc, see $SCENARIO_DIR/log} (${took}s)"
    failed=$((failed + 1))
  fi
done
[[ $failed -eq 0 ]]
