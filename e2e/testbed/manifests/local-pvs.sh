#!/usr/bin/env bash
# Storage for examples/kafka/ on a node without a dynamic provisioner: the StorageClass koo-local
# and seven `local` PersistentVolumes, one per Kafka pod, each pre-bound to the claim its
# StatefulSet will create (data-kafka-controller-0..2, data-kafka-broker-0..3 in NAMESPACE).
#
#   local-pvs.sh NAMESPACE NODE_NAME[,NODE_NAME...] BASE_DIR
#
# With several nodes (one per zone), ordinal i of either StatefulSet gets its volume on the i-th
# node (modulo their number): controllers 0-2 and brokers 0-2 in the first three zones, broker 3
# (the observer) in the fourth. The volume's node affinity then places each pod in its zone.
#
# Creates BASE_DIR/<pv-name>/ for each volume (owned by KOO_DATA_UID:KOO_DATA_GID, mode 0750),
# so it must run where the node's filesystem is (on the test bed every node shares the host's), as
# root for the chown.
# Then prints the manifests on stdout, or applies them with "$KUBECTL apply -f -" when KUBECTL
# is set; with KUBECTL set, a volume left Released by a deleted claim of the same name is made
# bindable again (its claimRef uid cleared; the data in its directory is kept).
#
# Environment: KUBECTL (a kubectl command line, may carry flags such as --kubeconfig; unset:
# print only), KOO_DATA_UID / KOO_DATA_GID (1000: the Kafka image's
# user), KOO_PV_CAPACITY (10Gi; a local PV's capacity is a label for matching, never enforced;
# it must be >= the claims' request, 1Gi in examples/kafka/), KOO_BROKER_COUNT (4: the brokers'
# StatefulSet's replicas; 5 for examples/kafka-two-observers/), KOO_CONTROLLER_COUNT (3: the
# controllers' replicas; 0 for examples/kafka-combined/, which has no controller pods),
# KOO_STS_SUFFIX (empty: the StatefulSets' name suffix, e.g. -east for examples/multi-cluster/,
# whose claims are data-kafka-controller-east-0, ...).
#
# Decisions:
# - reclaimPolicy Retain: `kubernetes.io/no-provisioner` has no deleter, so Delete would leave a
#   released volume Failed, and Recycle is deprecated and not supported for `local`. Retain keeps
#   a broker's log directory when its claim goes away by mistake; to start from scratch delete
#   the claims and the PVs, remove the directories, and run this script again.
# - volumeBindingMode WaitForFirstConsumer: the class is for node-local disks; a claim is bound
#   with the pod's node in mind (here the PVs are pre-bound anyway, see claimRef).
# - claimRef without uid pre-binds each PV to exactly one claim name, so kafka-broker-2 always
#   gets the same directory (and the same data after a re-creation of the StatefulSet), and no
#   pod can take another's volume.
# - nodeAffinity kubernetes.io/hostname=NODE_NAME: required for `local` volumes; it also pins
#   each pod to the node holding its data. The label's value is the node's hostname label,
#   which is its name unless the kubelet was started with a different --hostname-override.
# - Ownership: the directories are chowned here rather than trusted to fsGroup. The kubelet
#   applies fsGroup to a `local` volume only on its first mount on the node, and the image runs
#   Kafka as a fixed non-root uid; chowning at creation makes the volume writable whatever the
#   pod's securityContext. (The examples' pods also set fsGroup with OnRootMismatch, which is
#   then a no-op.)
set -euo pipefail
say() { echo "local-pvs.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

if [[ $# -ne 3 ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
fi
NAMESPACE="$1" NODE_NAME="$2" BASE_DIR="$3"
DATA_UID="${KOO_DATA_UID:-1000}" DATA_GID="${KOO_DATA_GID:-1000}"
CAPACITY="${KOO_PV_CAPACITY:-10Gi}"
BROKER_COUNT="${KOO_BROKER_COUNT:-4}"
CONTROLLER_COUNT="${KOO_CONTROLLER_COUNT:-3}"
SUFFIX="${KOO_STS_SUFFIX:-}"
CLASS=koo-local

dns_label='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
[[ "$NAMESPACE" =~ $dns_label && ${#NAMESPACE} -le 63 ]] || die "'$NAMESPACE' is not a namespace name"
[[ -n "$NODE_NAME" ]] || die "NODE_NAME is empty"
[[ "$BASE_DIR" == /* ]] || die "BASE_DIR must be an absolute path (a local PV's path is absolute): '$BASE_DIR'"
[[ "$DATA_UID" =~ ^[0-9]+$ && "$DATA_GID" =~ ^[0-9]+$ ]] || die "KOO_DATA_UID/KOO_DATA_GID must be numeric"
[[ "$BROKER_COUNT" =~ ^(0|[1-9][0-9]?)$ ]] || die "KOO_BROKER_COUNT must be a number of brokers, 0-99: '$BROKER_COUNT'"
[[ "$CONTROLLER_COUNT" =~ ^[0-9]$ ]] || die "KOO_CONTROLLER_COUNT must be a number of controllers, 0-9: '$CONTROLLER_COUNT'"
[[ -z "$SUFFIX" || "$SUFFIX" =~ ^-[a-z0-9]+$ ]] || die "KOO_STS_SUFFIX must be empty or -<lowercase letters and digits>: '$SUFFIX'"

# claim name -> PV name. PVs are cluster-scoped: the namespace is part of the name, so clusters
# in two namespaces (e.g. kafka and kafka-test) never share a volume.
IFS=, read -r -a NODES <<< "$NODE_NAME"
claims=()
declare -A claim_node
for ((i = 0; i < CONTROLLER_COUNT; i++)); do
  claims+=("data-kafka-controller$SUFFIX-$i")
  claim_node["data-kafka-controller$SUFFIX-$i"]="${NODES[i % ${#NODES[@]}]}"
done
for ((i = 0; i < BROKER_COUNT; i++)); do
  claims+=("data-kafka-broker$SUFFIX-$i")
  claim_node["data-kafka-broker$SUFFIX-$i"]="${NODES[i % ${#NODES[@]}]}"
done
pv_name() { echo "koo-local-$NAMESPACE-${1#data-}"; }

# The directories, before anything refers to them.
mkdir -p "$BASE_DIR"
for claim in "${claims[@]}"; do
  dir="$BASE_DIR/$(pv_name "$claim")"
  mkdir -p "$dir"
  # shellcheck disable=SC2312 # the elif's stat: a failed one compares unequal, the warning (the safe answer)
  if ((EUID == 0)); then
    chown "$DATA_UID:$DATA_GID" "$dir"
  elif [[ "$(stat -c %u:%g "$dir")" != "$DATA_UID:$DATA_GID" ]]; then
    say "warning: not root, cannot chown $dir to $DATA_UID:$DATA_GID; Kafka will fail to write there unless fsGroup takes effect"
  fi
  chmod 0750 "$dir"
done

manifests() {
  cat <<YAML
# Generated by e2e/testbed/manifests/local-pvs.sh $NAMESPACE $NODE_NAME $BASE_DIR
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $CLASS
  labels: {app.kubernetes.io/part-of: koo-testbed}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
YAML
  local claim name
  for claim in "${claims[@]}"; do
    name="$(pv_name "$claim")"
    cat <<YAML
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $name
  labels:
    app.kubernetes.io/part-of: koo-testbed
    kafkaobserver.io/claim-namespace: $NAMESPACE
spec:
  capacity: {storage: $CAPACITY}
  accessModes: [ReadWriteOnce]
  volumeMode: Filesystem
  persistentVolumeReclaimPolicy: Retain
  storageClassName: $CLASS
  claimRef: {apiVersion: v1, kind: PersistentVolumeClaim, namespace: $NAMESPACE, name: $claim}
  local:
    path: $BASE_DIR/$name
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: ["${claim_node[$claim]}"]}
YAML
  done
}

if [[ -z "${KUBECTL:-}" ]]; then
  manifests
  exit 0
fi

# A PV whose claim was deleted is Released and keeps the old claim's uid: a new claim of the same
# name would never bind. Clear the uid (and resourceVersion) so the pre-binding applies again.
for claim in "${claims[@]}"; do
  name="$(pv_name "$claim")"
  phase="$($KUBECTL get pv "$name" -o 'jsonpath={.status.phase}' 2>/dev/null || true)"
  if [[ "$phase" == Released ]]; then
    say "PV $name is Released: clearing its claimRef uid so $NAMESPACE/$claim can bind it again (data kept)"
    $KUBECTL patch pv "$name" --type merge \
      -p '{"spec":{"claimRef":{"uid":null,"resourceVersion":null}}}' >/dev/null
  fi
done
manifests | $KUBECTL apply -f -
