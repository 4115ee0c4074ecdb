#!/usr/bin/env bash
# The example Kafka cluster (examples/kafka/: 3 KRaft controllers, 4 brokers, two StatefulSets of
# the locally built patched image) on the bed's real node, in namespace kafka-k8s, exactly as a
# user applies it. Broker 4 (kafka-broker-3) is the observer.
#
#   kafka-k8s.sh up             local PVs, seed observer lists (only if absent), apply the
#                               manifests, wait for the 7 pods Ready and a broker quorum
#   kafka-k8s.sh observerset    apply examples/kafka/observerset/ for this namespace (needs the
#                               operator: e2e/testbed/operator-chart.sh up)
#   kafka-k8s.sh kill ID        kill -9 the JVM of node ID in its container; the kubelet restarts it
#   kafka-k8s.sh lose ID        a lost zone: cordon koo-node, kill -9 the JVM, force-delete the pod;
#                               its replacement stays Pending until `return`
#   kafka-k8s.sh return ID      uncordon; the replacement pod starts and joins
#   kafka-k8s.sh jvm-pid ID     the host pid of node ID's JVM
#   kafka-k8s.sh down           delete the ObserverSets and workloads (claims, volumes and data kept)
#   kafka-k8s.sh status         pods, bootstrap address
#
# The machine reaches the pods directly (pod IPs on koo0) and the Services through kube-proxy:
# .testbed/kafka-k8s/bootstrap holds the kafka-bootstrap Service's ClusterIP:9092.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/e2e/versions.env"
tb="$root/.testbed"
ns="${KOO_KAFKA_K8S_NAMESPACE:-kafka-k8s}"
node="koo-node"
state="$tb/kafka-k8s"
sock="/run/koo-node/containerd.sock"
timeout="${KOO_KAFKA_K8S_TIMEOUT:-300}"

say() { printf '%s kafka-k8s: %s\n' "$(date -u +%T)" "$*" >&2; }
die() { say "$*"; exit 1; }
k() { "$tb/bin/kubectl" --kubeconfig "$tb/kubeconfig" "$@"; }
crictl_bin=""
crictl() {
  [[ -n "$crictl_bin" ]] || crictl_bin="$(bash "$root/e2e/build/node-tools.sh" paths | sed -n 's/^crictl=//p')"
  # No /etc/crictl.yaml: everything is on the command line (an empty config silences the warning).
  "$crictl_bin" --config /dev/null --runtime-endpoint "unix://$sock" --timeout 10s "$@"
}

# pod_of ID: the pod name of Kafka node ID (controllers 101-103, brokers 1-4).
pod_of() {
  local id="$1"
  if ((id >= 101)); then echo "kafka-controller-$((id - 101))"; else echo "kafka-broker-$((id - 1))"; fi
}

jvm_pid() {
  local pod c
  pod="$(pod_of "$1")"
  c="$(crictl ps -q --state running --name '^kafka$' --label "io.kubernetes.pod.name=$pod" \
        --label "io.kubernetes.pod.namespace=$ns" | head -n1)"
  [[ -n "$c" ]] || return 1
  crictl inspect -o go-template --template '{{.info.pid}}' "$c"
}

all_ready() {
  local n
  n="$(k -n "$ns" get pods -l app.kubernetes.io/name=kafka \
        -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
        grep -c True)" || true
  [[ "$n" == 7 ]]
}

bootstrap() { echo "$(k -n "$ns" get svc kafka-bootstrap -o jsonpath='{.spec.clusterIP}'):9092"; }

# Four brokers registered and unfenced, as the active controller sees them.
brokers_registered() {
  local out
  out="$("$tb/bin/kafka-metadata-quorum" --bootstrap-server "$(bootstrap)" describe --replication 2>/dev/null)" || return 1
  (($(grep -cE '^\s*[1-4]\s' <<<"$out") >= 4))
}

wait_until() { # WHAT TIMEOUT COMMAND...
  local what="$1" limit="$2"; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      k -n "$ns" get pods -o wide >&2 || true
      k -n "$ns" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
      die "$what: not within ${limit}s"
    fi
    sleep 1
  done
}

up() {
  local t0=$SECONDS
  mkdir -p "$state"
  k get namespace "$ns" >/dev/null 2>&1 || k create namespace "$ns" >/dev/null
  KUBECTL="$tb/bin/kubectl --kubeconfig $tb/kubeconfig" \
    bash "$here/manifests/local-pvs.sh" "$ns" "$node" "$tb/node/local-pvs" >/dev/null
  # The pods do not start without their observer lists: seed them once, never over the operator's.
  for role in controller broker; do
    if ! k -n "$ns" get configmap "kafka-observers-$role" >/dev/null 2>&1; then
      k -n "$ns" create -f "$root/examples/kafka/seed/observer-configmaps.yaml" >/dev/null 2>&1 || true
    fi
  done
  k -n "$ns" apply -f "$root/examples/kafka/" >/dev/null
  wait_until "7 Kafka pods Ready in $ns" "$timeout" all_ready
  bootstrap > "$state/bootstrap"
  wait_until "4 brokers registered with the quorum" 120 brokers_registered
  say "up in $((SECONDS - t0))s: bootstrap $(cat "$state/bootstrap")"
}

observerset() {
  sed "s/\.kafka\.svc:/.$ns.svc:/" "$root/examples/kafka/observerset/observerset.yaml" |
    k -n "$ns" apply -f - >/dev/null
  k -n "$ns" wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=180s >/dev/null ||
    die "ObserverSet $ns/kafka not Ready after 180s: $(k -n "$ns" get obs kafka -o jsonpath='{.status.conditions}')"
  say "ObserverSet $ns/kafka Ready"
}

kill_node() {
  local pid
  pid="$(jvm_pid "$1")" || die "no running kafka container for node $1"
  kill -KILL "$pid"
  say "node $1: JVM pid $pid killed (-9)"
}

lose() {
  local pod
  pod="$(pod_of "$1")"
  k cordon "$node" >/dev/null
  kill_node "$1"
  k -n "$ns" delete pod "$pod" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  say "node $1 lost: $node cordoned, pod $pod deleted (its replacement stays Pending)"
}

return_node() {
  k uncordon "$node" >/dev/null
  say "node $1 back: $node uncordoned"
}

down() {
  k get namespace "$ns" >/dev/null 2>&1 || return 0
  k -n "$ns" delete obs --all --wait=true --timeout=60s >/dev/null 2>&1 || true
  k -n "$ns" delete statefulset,service,pdb --all --wait=true --timeout=120s >/dev/null 2>&1 || true
  say "workloads in $ns deleted (claims and volumes kept)"
}

status() {
  k -n "$ns" get pods -o wide 2>/dev/null || echo "namespace $ns: absent"
  [[ -f "$state/bootstrap" ]] && echo "bootstrap: $(cat "$state/bootstrap")"
  return 0
}

case "${1:-}" in
  up) up ;;
  observerset) observerset ;;
  kill) kill_node "${2:?node id}" ;;
  lose) lose "${2:?node id}" ;;
  return) return_node "${2:?node id}" ;;
  jvm-pid) jvm_pid "${2:?node id}" ;;
  down) down ;;
  status) status ;;
  *) die "usage: kafka-k8s.sh up | observerset | kill ID | lose ID | return ID | jvm-pid ID | down | status" ;;
esac
