#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The operator's failure drills on the bed's real nodes (one per zone): the example Kafka StatefulSets
# (namespace kafka), the ObserverSet kafka/kafka and the operator installed by its Helm chart
# with two replicas. Each drill is described at its function (drills-*.sh) and in
# e2e/drills/operator/README.md; each restores the bed's default at the end, failed or not.
#
#   e2e/drills/operator/run.sh [D1 D2 ...]     default: all; prints "D<n> PASS <s>s" or "D<n> FAIL <reason>"
#
# Per-drill logs: .testbed/drills/operator/D<n>/log. Exit status: non-zero if any drill failed.
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

ALL=(D1 D2 D3 D4 D5 D6 D7 D8 D9 D10 D11 D12 D13 D14 D15 D16 D17 D18 D19 D20)
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=("${ALL[@]}")
for s in "${wanted[@]}"; do
  [[ " ${ALL[*]} " == *" ${s^^} "* ]] || { echo "unknown drill '$s' (known: ${ALL[*]})" >&2; exit 2; }
done
[[ "$tb" != off && -f "$tb/kubeconfig" ]] || { echo "no test bed at $tb: run make testbed-up" >&2; exit 2; }
resolve_bootstrap || { echo "no Kafka in namespace $KAFKA_NS: run make testbed-up" >&2; exit 2; }
nodes_patched || { echo "the Kafka nodes did not log 'observer patch active': the drills need the patched image" >&2; exit 2; }
dc_build || { echo "cannot compile the drill client" >&2; exit 2; }
bash "$root/e2e/testbed/operator-chart.sh" up >&2 || { echo "the operator's Helm chart does not come up" >&2; exit 2; }
bash "$KAFKA_SH" observerset >&2 || exit 2

run_scenarios "${wanted[@]}"
