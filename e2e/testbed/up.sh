#!/usr/bin/env bash
# Bring the whole local test bed up, idempotently: control plane, the real node (kubelet,
# containerd, runc, scheduler, kube-proxy, CoreDNS) with the locally built images, and the
# patched Kafka KRaft cluster of examples/kafka/ on it (namespace kafka). Prints where everything is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
[[ ! -f "$tb/multi" ]] || die "the multi-cluster bed runs in $tb: take it down first (make testbed-down)"
mkdir -p "$tb"/{logs,pids,bin,kafka}
start=$SECONDS

bash "$root/e2e/build/k8s.sh" >/dev/null
bash "$root/e2e/build/node-packages.sh"
bash "$root/e2e/build/node-tools.sh" >/dev/null
bash "$here/control-plane.sh" up

# The patched Kafka jar: in the Kafka image, and first on the host tools' classpath. Vanilla
# host tools only when explicitly asked (KOO_VANILLA_KAFKA=1, for comparisons).
if [[ "${KOO_VANILLA_KAFKA:-0}" != 1 ]]; then
  bash "$root/e2e/build/kafka-patched.sh" "$KAFKA_VERSION" | tail -n1 > "$tb/kafka/patch-jar"
else
  rm -f "$tb/kafka/patch-jar"
fi

# The images the real node runs (base, pause, operator, patched Kafka, CoreDNS), cached by inputs.
bash "$root/e2e/build/images.sh" build

bash "$here/node.sh" up
bash "$here/kafka.sh" up

echo "test bed up in $((SECONDS - start))s"
bash "$here/status.sh"
# kafka.sh up writes the bootstrap address; without it the bed is not usable.
bootstrap="$(cat "$tb/kafka/bootstrap")" || die "no $tb/kafka/bootstrap: kafka.sh up did not write it"
cat <<INFO
kubeconfig:        $tb/kubeconfig
kafka bootstrap:   $bootstrap (pods: kubectl get pods -n kafka -o wide)
tools:             $tb/bin (kubectl, helm, kafka-topics, kafka-node, ...)
logs:              $tb/logs; a Kafka node's: e2e/testbed/kafka.sh log <node-id>
tests:             export KOO_TESTBED=$tb
INFO
