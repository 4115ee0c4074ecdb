#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The operator's failure drills on the bed's real nodes (one per zone): the example Kafka StatefulSets
# (namespace kafka), the ObserverSet kafka/kafka and the operator installed by its Helm chart
# with two replicas. Each drill is described at its function (drills-*.sh) and in
# e2e/drills/operator/README.md; each restores the bed's default at the end, failed or not.
#
#   e2e/drills/operator/run.sh [D1 D2 ...]     the drills named, one after the other, on kafka
#   e2e/drills/operator/run.sh                 all of them, in the two phases below
#   e2e/drills/operator/run.sh --side-by-side  the first phase only
#   e2e/drills/operator/run.sh --alone         the second phase only
# Each drill prints "D<n> PASS <s>s" or "D<n> FAIL <reason>".
#
# All of them run in two phases. First, side by side, the drills that touch only
# their own cluster: SIDE_A on the bed's kafka and SIDE_B on a second copy of the example cluster
# in namespace kafka-2 (KOO_DRILLS_SECOND_NAMESPACE; brought up here if it is not, and purged
# afterwards). The clusters share the nodes and the operator, nothing else:
# `kafka.sh stop` holds a stopped pod per namespace (manifests/kafka-bed/), not by cordoning the
# node, and every check reads its own namespace. Then, one at a time, ALONE: the drills that
# kill the operator's leader or the apiserver, or fail whole zones, which would hit any drill
# beside them. KOO_DRILLS_SIDE_BY_SIDE=0 runs all of them one after the other on kafka.
#
# Per-drill logs: .testbed/drills/operator/D<n>/log (the second lane's: .testbed/drills/operator.kafka-2/). Exit status: non-zero if any drill failed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=drills-zone.sh
source "$here/drills-zone.sh"
# shellcheck source=drills-manual.sh
source "$here/drills-manual.sh"
# shellcheck source=drills-resource.sh
source "$here/drills-resource.sh"
# shellcheck source=drills-operator.sh
source "$here/drills-operator.sh"
# shellcheck source=drills-takeover.sh
source "$here/drills-takeover.sh"
# shellcheck source=drills-policy.sh
source "$here/drills-policy.sh"
# shellcheck source=drills-unreachable.sh
source "$here/drills-unreachable.sh"
# shellcheck source=drills-secured.sh
source "$here/drills-secured.sh"
# shellcheck source=drills-zones.sh
source "$here/drills-zones.sh"
# shellcheck source=drills-slow.sh
source "$here/drills-slow.sh"
# shellcheck source=drills-fenced.sh
source "$here/drills-fenced.sh"

ALL=(D1 D2 D3 D4 D5 D6 D7 D8 D9 D10 D11 D12 D13 D14 D15 D16 D17 D18 D19 D20 D21 D22)
# The two lanes of the first phase (10-12 minutes each on the 2-core bed) and the rest.
SIDE_A=(D1 D2 D7 D8 D9 D10 D13 D14)
SIDE_B=(D4 D6 D11)
ALONE=(D3 D5 D12 D15 D16 D17 D18 D19 D20 D21 D22)
second_ns="${KOO_DRILLS_SECOND_NAMESPACE:-kafka-2}"
# mode: names (the drills named, in order, on $KAFKA_NS), all (side, then alone), side, alone.
mode=names
case "${1:-}" in
  --side-by-side) mode=side; shift ;;
  --alone) mode=alone; shift ;;
  "") mode=all ;;
esac
wanted=("$@")
if [[ $mode == all && ( "${KOO_DRILLS_SIDE_BY_SIDE:-1}" == 0 || "$KAFKA_NS" != kafka ) ]]; then
  mode=names wanted=("${ALL[@]}")
fi
[[ $mode == names || ${#wanted[@]} -eq 0 ]] || { echo "--side-by-side and --alone take no drill names" >&2; exit 2; }
for s in "${wanted[@]}"; do
  [[ " ${ALL[*]} " == *" ${s^^} "* ]] || { echo "unknown drill '$s' (known: ${ALL[*]})" >&2; exit 2; }
done
[[ "$tb" != off && -f "$tb/kubeconfig" ]] || { echo "no test bed at $tb: run make testbed-up" >&2; exit 2; }
resolve_bootstrap || { echo "no Kafka in namespace $KAFKA_NS: run make testbed-up" >&2; exit 2; }
nodes_patched || { echo "the Kafka nodes did not log 'observer patch active': the drills need the patched image" >&2; exit 2; }
dc_build || { echo "cannot compile the drill client" >&2; exit 2; }
# KOO_DRILLS_CHART_READY=1: the lane beside another one, whose run.sh installed the chart already
# (two helm upgrades at once would refuse each other).
if [[ "${KOO_DRILLS_CHART_READY:-}" != 1 ]]; then
  bash "$root/e2e/testbed/operator-chart.sh" up >&2 || { echo "the operator's Helm chart does not come up" >&2; exit 2; }
fi
bash "$KAFKA_SH" observerset >&2 || exit 2

# The first phase: SIDE_A here and SIDE_B on the second cluster, at the same time.
side_by_side() {
  local rc=0 lane_b lane_b_log="$tb/drills/operator/lane-$second_ns.log"
  KOO_KAFKA_NAMESPACE="$second_ns" bash "$KAFKA_SH" up >&2 || { echo "the second cluster (namespace $second_ns) does not come up"; return 1; }
  KOO_KAFKA_NAMESPACE="$second_ns" KOO_DRILLS_CHART_READY=1 bash "$here/run.sh" "${SIDE_B[@]}" > "$lane_b_log" 2>&1 &
  lane_b=$!
  # On its own line, as every run_scenarios call: in an || list bash would ignore the drills' set -e.
  run_scenarios "${SIDE_A[@]}"
  (($? == 0)) || rc=1
  wait "$lane_b" || rc=1
  echo "== beside them, on namespace $second_ns:"
  cat "$lane_b_log"
  # Its pods would be partitioned with the zones of the second phase, and its ObserverSet would
  # promote: the cluster goes first (purge: no controlled shutdown, its data gone).
  KOO_KAFKA_NAMESPACE="$second_ns" bash "$KAFKA_SH" purge >&2 || rc=1
  return "$rc"
}

case "$mode" in
  names) run_scenarios "${wanted[@]}" ;;
  side) side_by_side ;;
  alone) run_scenarios "${ALONE[@]}" ;;
  all)
    side_by_side
    rc=$?
    run_scenarios "${ALONE[@]}"
    (($? == 0)) || rc=1
    exit "$rc" ;;
esac
