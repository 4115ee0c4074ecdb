#!/usr/bin/env bash
# Bring the whole local test bed up, idempotently: control plane, pods + kubelet stand-in,
# patched Kafka KRaft cluster, and the real node (kubelet, containerd, runc, scheduler,
# kube-proxy, CoreDNS) with the locally built images. Prints where everything is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/e2e/versions.env"
tb="$root/.testbed"
mkdir -p "$tb"/{logs,pids,bin,kafka}
start=$(date +%s)

bash "$root/e2e/build/k8s.sh" >/dev/null
bash "$root/e2e/build/node-packages.sh"
bash "$root/e2e/build/node-tools.sh" >/dev/null
bash "$here/control-plane.sh" up
kubectl() { "$tb/bin/kubectl" "$@"; }

# Seed the observer lists the pods mount, only if absent, so the cluster can start before any
# operator runs (broker 4 is the bed's observer). The operator adopts them for ObserverSet kafka/kafka.
for role in controller broker; do
  if ! kubectl -n kafka get configmap "kafka-observers-$role" >/dev/null 2>&1; then
    kubectl -n kafka create configmap "kafka-observers-$role" \
      --from-literal=observer.ids=$'# Seeded by the test bed (e2e/testbed/up.sh); the operator takes over.\n4\n' >/dev/null
  fi
done

# Patched Kafka unless explicitly disabled (KOO_VANILLA_KAFKA=1, for comparisons).
if [[ "${KOO_VANILLA_KAFKA:-0}" != 1 ]]; then
  bash "$root/e2e/build/kafka-patched.sh" "$KAFKA_VERSION" | tail -n1 > "$tb/kafka/patch-jar"
else
  rm -f "$tb/kafka/patch-jar"
fi

# The images the real node runs (base, pause, operator, patched Kafka, CoreDNS), cached by inputs.
bash "$root/e2e/build/images.sh" build

bash "$here/standin.sh" up
# After the stand-in registered its Node: node.sh taints that one so the scheduler uses koo-node.
bash "$here/node.sh" up
bash "$here/kafka.sh" up

echo "test bed up in $(( $(date +%s) - start ))s"
bash "$here/status.sh"
cat <<INFO
kubeconfig:        $tb/kubeconfig
kafka bootstrap:   $(cat "$tb/kafka/bootstrap")
tools:             $tb/bin (kubectl, helm, kafka-topics, kafka-node, ...)
pods:              kubectl get pods -n kafka -o wide; volumes under $tb/pods/kafka/<pod>/volumes
kubelet stand-in:  $(tr '\n' ' ' < "$tb/standin/args" | sed 's|--kubeconfig [^ ]* --pods-file [^ ]* ||')
logs:              $tb/logs
tests:             export KOO_TESTBED=$tb
INFO
