#!/usr/bin/env bash
# The main job on the self-contained local default: the test bed with its real node and the
# example Kafka StatefulSets (namespace kafka), the operator installed by its Helm chart, the example ObserverSet and the
# failure drill D1 (a zone lost and back), all on real pods. Leaves the bed running for a look around; `make testbed-down` stops it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
export KOO_TESTBED="$tb"
start=$SECONDS
bash e2e/testbed/up.sh
echo "== the operator, installed by its Helm chart (2 replicas, leader election)"
bash e2e/testbed/operator-chart.sh up
echo "== applying examples/kafka/observerset/observerset.yaml"
bash e2e/testbed/kafka.sh observerset
kubectl -n kafka get obs
echo "== what the operator wrote (ConfigMap kafka-observers-broker) and what one pod's agent sees"
kubectl -n kafka get configmap kafka-observers-broker -o jsonpath='{.data.observer\.ids}'
# shellcheck disable=SC2312 # node_pod only prints a name; kubectl's own status is the assignment's
ip="$(kubectl -n kafka get pod "$(node_pod "$OBSERVER")" -o jsonpath='{.status.podIP}')"
curl -s -m 2 "http://$ip:9180/observer-ids" && echo
echo "== failure drill D1 on the real node: a zone lost, the observer promoted, the zone back, demoted"
bash e2e/drills/operator/run.sh D1
grep '^DRILL' "$KOO_TESTBED/drills/operator/D1/log"
kubectl -n kafka get obs
echo "demo done in $((SECONDS - start))s. The bed is still up: kubectl at $KOO_TESTBED/bin/kubectl" \
  "(--kubeconfig $KOO_TESTBED/kubeconfig); operator logs: kubectl -n kafka-observer-system logs" \
  "-l app.kubernetes.io/name=kafka-observer-operator; stop it with make testbed-down"
