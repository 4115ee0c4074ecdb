#!/usr/bin/env bash
# The bed's seven Kafka Pod objects (namespace kafka) and the kubelet stand-in's pods file.
#
#   pods.sh json      write .testbed/standin/pods.json (what the stand-in maps onto local processes)
#   pods.sh yaml      print the Pod manifests
#   pods.sh apply     create missing pods; re-create a pod whose manifest changed (spec-hash annotation)
#
# A Pod's spec is what a real deployment would declare: labels for role and node id, the
# observer-ids ConfigMap volume mounted as a directory, the kafka container with
# KAFKA_OBSERVER_IDS_FILE, and the observer-agent sidecar (the operator binary's `agent`).
# Pods are bound to the stand-in's Node (spec.nodeName; the bed has no scheduler).
# An eighth pod, koo-testbed/testbed-probe, exists for the bed's own acceptance tests: it mounts
# the ConfigMap testbed-probe (not optional, like observer-ids), so volume timing and the
# deleted-ConfigMap behaviour can be checked without touching the Kafka nodes' observer lists.
# It has no process (never Ready) and address 127.0.1.200.
# Environment: KOO_AGENT_IMAGE (kafka-observer-operator:dev), KOO_KAFKA_IMAGE (apache/kafka:<version>).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/e2e/versions.env"
source "$here/kafka/lib.sh"
say() { echo "pods.sh: $*" >&2; }

NODE_NAME="${KOO_STANDIN_NODE:-testbed-node}"
AGENT_IMAGE="${KOO_AGENT_IMAGE:-kafka-observer-operator:dev}"
KAFKA_IMAGE="${KOO_KAFKA_IMAGE:-apache/kafka:$KAFKA_VERSION}"
MOUNT=/etc/kafka/observer
HASH_ANNOTATION=testbed.kafkaobserver.io/spec-hash

pod_yaml() {
  local id="$1" role pod port
  role="$(node_role "$id")" pod="$(node_pod "$id")" port="$(node_port "$id")"
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $pod
  namespace: kafka
  labels:
    app.kubernetes.io/name: kafka
    app.kubernetes.io/component: $role
    app.kubernetes.io/part-of: koo-testbed
    kafkaobserver.io/node-id: "$id"
spec:
  nodeName: $NODE_NAME
  # The stand-in projects configMap and emptyDir volumes only: no service-account token volume.
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 30
  volumes:
  - name: observer-ids
    configMap:
      name: kafka-observers-$role
  containers:
  - name: kafka
    image: $KAFKA_IMAGE
    env:
    - name: KAFKA_NODE_ID
      value: "$id"
    - name: KAFKA_OBSERVER_IDS_FILE
      value: $MOUNT/observer.ids
    ports:
    - {name: kafka, containerPort: $port}
    readinessProbe:
      tcpSocket: {port: $port}
      periodSeconds: 1
    volumeMounts:
    - {name: observer-ids, mountPath: $MOUNT, readOnly: true}
  - name: observer-agent
    image: $AGENT_IMAGE
    command: [kafka-observer-operator, agent, --dir, $MOUNT, --listen, "\$(POD_IP):9180"]
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: NODE_ID
      value: "$id"
    ports:
    - {name: agent, containerPort: 9180}
    volumeMounts:
    - {name: observer-ids, mountPath: $MOUNT, readOnly: true}
EOF
}

PROBE_NS=koo-testbed PROBE_POD=testbed-probe PROBE_IP=127.0.1.200

probe_yaml() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $PROBE_POD
  namespace: $PROBE_NS
  labels:
    app.kubernetes.io/name: testbed-probe
    app.kubernetes.io/part-of: koo-testbed
spec:
  nodeName: $NODE_NAME
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 0
  volumes:
  - name: probe
    configMap: {name: testbed-probe}
  containers:
  - name: main
    image: testbed-probe:none
    volumeMounts:
    - {name: probe, mountPath: /probe}
EOF
}

cmd_yaml() {
  local id
  for id in "${ALL_IDS[@]}"; do echo "---"; pod_yaml "$id"; done
  echo "---"
  probe_yaml
}

cmd_json() {
  local id first=1 pod
  mkdir -p "$tb/standin"
  {
    printf '{\n  "version": 1,\n  "logsDir": "%s",\n  "pidsDir": "%s",\n  "pods": [' "$tb/logs" "$tb/pids"
    for id in "${ALL_IDS[@]}"; do
      pod="$(node_pod "$id")"
      ((first)) || printf ','
      first=0
      printf '\n    {"namespace": "kafka", "name": "%s", "podIP": "%s", "mainContainer": "kafka",' \
        "$pod" "$(node_addr "$id")"
      printf '\n     "pidFile": "%s", "readinessPort": %s,' "$(node_pidfile "$id")" "$(node_port "$id")"
      printf '\n     "volumesDir": "%s"}' "$tb/pods/kafka/$pod/volumes"
    done
    printf ',\n    {"namespace": "%s", "name": "%s", "podIP": "%s", "mainContainer": "main",' \
      "$PROBE_NS" "$PROBE_POD" "$PROBE_IP"
    printf '\n     "pidFile": "%s", "readinessPort": 1,' "$tb/pids/$PROBE_POD-main.pid"
    printf '\n     "volumesDir": "%s"}' "$tb/pods/$PROBE_NS/$PROBE_POD/volumes"
    printf '\n  ]\n}\n'
  } > "$tb/standin/pods.json.tmp"
  mv -f "$tb/standin/pods.json.tmp" "$tb/standin/pods.json"
}

# apply_pod NAMESPACE POD YAML: create it, or re-create it when its manifest changed.
apply_pod() {
  local ns="$1" pod="$2" yaml="$3" hash current kubectl="$tb/bin/kubectl"
  hash="$(printf '%s' "$yaml" | sha256sum | cut -c1-16)"
  current="$("$kubectl" -n "$ns" get pod "$pod" -o "jsonpath={.metadata.annotations.testbed\.kafkaobserver\.io/spec-hash}" 2>/dev/null || echo absent)"
  [[ "$current" == "$hash" ]] && return 0
  if [[ "$current" != absent ]]; then
    say "pod $ns/$pod: manifest changed, re-creating it"
    "$kubectl" -n "$ns" delete pod "$pod" --grace-period=0 --force --wait=true >/dev/null 2>&1 || true
  fi
  # The yaml carries no annotations block: add the hash as the only annotation.
  yaml="$(printf '%s\n' "$yaml" | sed "/^  namespace: $ns\$/a\\
  annotations:\\
    $HASH_ANNOTATION: \"$hash\"")"
  # In a fresh namespace the ServiceAccount admission refuses pods until kube-controller-manager
  # has created the `default` ServiceAccount: retry for a while.
  local deadline=$((SECONDS + 60)) err
  until err="$(printf '%s\n' "$yaml" | "$kubectl" create -f - 2>&1 >/dev/null)"; do
    ((SECONDS < deadline)) || die "cannot create pod $ns/$pod: $err"
    sleep 1
  done
  say "pod $ns/$pod created"
}

cmd_apply() {
  local id kubectl="$tb/bin/kubectl"
  for id in "${ALL_IDS[@]}"; do apply_pod kafka "$(node_pod "$id")" "$(pod_yaml "$id")"; done
  "$kubectl" get namespace "$PROBE_NS" >/dev/null 2>&1 || "$kubectl" create namespace "$PROBE_NS" >/dev/null
  "$kubectl" -n "$PROBE_NS" get configmap testbed-probe >/dev/null 2>&1 ||
    "$kubectl" -n "$PROBE_NS" create configmap testbed-probe --from-literal=value=initial >/dev/null
  apply_pod "$PROBE_NS" "$PROBE_POD" "$(probe_yaml)"
}

case "${1:-}" in
  json) cmd_json ;;
  yaml) cmd_yaml ;;
  apply) cmd_apply ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
