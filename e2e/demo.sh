#!/usr/bin/env bash
# The main job on the self-contained local default: test bed, operator, the example ObserverSet,
# and the promotion drill. Leaves the bed running for a look around; `make testbed-down` stops it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export KOO_TESTBED="$root/.testbed"
start=$SECONDS
bash e2e/testbed/up.sh
bash e2e/testbed/operator.sh up
k() { "$KOO_TESTBED/bin/kubectl" --kubeconfig "$KOO_TESTBED/kubeconfig" "$@"; }
echo "== applying examples/observerset.yaml"
k apply -f examples/observerset.yaml
k -n kafka wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=180s
k -n kafka get obs
echo "== what the operator wrote (ConfigMap kafka-observers-broker) and what one pod's agent sees"
k -n kafka get configmap kafka-observers-broker -o jsonpath='{.data.observer\.ids}'
curl -s -m 2 http://127.0.1.4:9180/observer-ids && echo
echo "== promotion drill"
bash e2e/drills/operator/promotion-drill.sh
k -n kafka get obs
echo "demo done in $((SECONDS - start))s. The bed is still up: kubectl at $KOO_TESTBED/bin/kubectl" \
  "(--kubeconfig $KOO_TESTBED/kubeconfig), operator log $KOO_TESTBED/logs/operator.log; stop it with make testbed-down"
