#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The observer patch's failure suite against the test bed's patched KRaft cluster: the example
# StatefulSets of examples/kafka/ on the bed's real node (e2e/testbed/kafka.sh; 3 controllers
# 101-103, brokers 1-4, broker 4 the observer). S1-S10 as described in e2e/drills/kafka/README.md
# (S9: exactly-once through a promoted observer; S10: the high-watermark gate). Each scenario uses its own topic with the
# observer first in the replica list (4:1:2:3, so it would be the preferred leader if it could),
# min ISR 2, asserts its pass criteria and restores the bed's default state at the end, failed or
# not.
#
#   e2e/drills/kafka/run.sh [S1 S2 ...]      default: all; prints "S<n> PASS <s>s" or "S<n> FAIL <reason>"
#
# KOO_KAFKA_NAMESPACE selects the cluster (default kafka; e.g. a second one brought up with
# `KOO_KAFKA_NAMESPACE=kafka-s e2e/testbed/kafka.sh up`). Per-scenario logs:
# .testbed/drills/kafka/S<n>/log (.testbed/drills/kafka.<namespace>/ for another namespace).
# Exit status: non-zero if any scenario failed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=scenarios-a.sh
source "$here/scenarios-a.sh"
# shellcheck source=scenarios-b.sh
source "$here/scenarios-b.sh"

ALL=(S1 S2 S3 S4 S5 S6 S7 S8 S9 S10)
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=("${ALL[@]}")
for s in "${wanted[@]}"; do
  [[ " ${ALL[*]} " == *" ${s^^} "* ]] || { echo "unknown scenario '$s' (known: ${ALL[*]})" >&2; exit 2; }
done

resolve_bootstrap || { echo "no Kafka in namespace $KAFKA_NS: run make testbed-up (or KOO_KAFKA_NAMESPACE=$KAFKA_NS e2e/testbed/kafka.sh up)" >&2; exit 2; }
nodes_patched || { echo "the Kafka nodes in $KAFKA_NS did not log 'observer patch active': the suite needs the patched image" >&2; exit 2; }
dc_build || { echo "cannot compile the drill client" >&2; exit 2; }
owner="$(owning_observerset)"
if [[ -n "$owner" ]]; then
  log "observer lists change through the ObserverSet $KAFKA_NS/$owner (spec.promotion.promoted), which owns the ConfigMaps"
else
  log "observer lists change through the ConfigMaps $KAFKA_NS/kafka-observers-{controller,broker} and a nudge of the pods"
fi

take_manual_policy || { echo "the ObserverSet owning the observer lists cannot be made Manual (see above)" >&2; give_back_policy; exit 2; }
trap give_back_policy EXIT

run_scenarios "${wanted[@]}"
