#!/usr/bin/env bash
# The main job on the self-contained local default: test bed, operator, the example ObserverSet,
# and a failure drill. Leaves the bed running for a look around; `make testbed-down` stops it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export KOO_TESTBED="$root/.testbed"
bash e2e/testbed/up.sh
bash e2e/testbed/operator.sh up
k() { "$KOO_TESTBED/bin/kubectl" "$@"; }
echo "== applying examples/observerset.yaml"
k apply -f examples/observerset.yaml
k -n kafka wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=120s
k -n kafka get obs
bash e2e/drills/operator/promotion-drill.sh
k -n kafka get obs
echo "demo done. The bed is still up: kubectl at $KOO_TESTBED/bin/kubectl; stop it with make testbed-down"
