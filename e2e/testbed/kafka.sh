#!/usr/bin/env bash
# The test bed's Kafka: the example cluster of examples/kafka/ (3 KRaft controllers, node ids
# 101-103, and 4 brokers, node ids 1-4, two StatefulSets of the locally built patched image) on
# the bed's real node, exactly as a user applies it. Broker 4 (kafka-broker-3) is the observer.
#
#   kafka.sh up                   host tools in .testbed/bin, local PVs, seed the observer lists
#                                 (only if absent), the secured listeners' certificates and
#                                 Secrets (kafka/pki.sh), apply examples/kafka-secured/, wait for
#                                 7 pods Ready and 4 brokers registered, the SCRAM user
#   kafka.sh observerset          create or replace the ObserverSet kafka with the spec of
#                                 examples/kafka/observerset/ for this namespace (needs the
#                                 operator: e2e/testbed/operator-chart.sh up)
#   kafka.sh kill ID              SIGKILL node ID's JVM in its container: a crash, the kubelet
#                                 restarts the container
#   kafka.sh stop ID...           nodes down until `start`: their pods' bed nodes labelled
#                                 bed.kafkaobserver.io/hold-<namespace> (which this namespace's pods
#                                 require absent: manifests/kafka-bed/; other namespaces' pods are
#                                 not held), the JVM killed with SIGKILL, the pod force-deleted (its
#                                 replacement stays Pending). The kind version of a lost zone (for
#                                 a zone lost as clouds lose one, see node.sh partition / power-off);
#                                 several nodes may be stopped at once.
#   kafka.sh start ID...          bring stopped nodes back: the hold label removed, then wait until
#                                 their pods are Ready (KAFKA_START_WAIT=0: do not wait). Every
#                                 stopped node of the namespace must be named: a node's label holds
#                                 all of the namespace's pods there.
#   kafka.sh restart ID           graceful: delete the pod (controlled shutdown), wait for its
#                                 replacement Ready
#   kafka.sh patched ID...        exit 0 when each node's current kafka container log shows the
#                                 observer patch's start-up proof ('observer patch active'), waiting
#                                 up to KAFKA_START_TIMEOUT_S; else fail naming the node. `up`,
#                                 `start` and `restart` run it on every node they wait for.
#   kafka.sh running ID           exit 0 when node ID's JVM runs
#   kafka.sh jvm-pid ID           the host pid of node ID's JVM
#   kafka.sh container-pid NS POD CONTAINER  the host pid of any running container on the node
#                                 (the drills pause agents and kill operator pods with it)
#   kafka.sh log ID               the host path of node ID's current kafka container log
#   kafka.sh observer-dir ID      the host path of node ID's projected observer-ids volume
#   kafka.sh bootstrap            the kafka-bootstrap Service's ClusterIP:9092
#   kafka.sh controller-bootstrap the controllers' pod IPs:9093 (they change when a pod is replaced)
#   kafka.sh wrappers             (re)generate the .testbed/bin Kafka tool wrappers only
#   kafka.sh down                 delete the ObserverSets and workloads (claims, volumes, data kept)
#   kafka.sh purge                down, then the claims, volumes, their data and the namespace (not
#                                 for the bed's own namespace kafka)
#   kafka.sh status               pods, bootstrap address, classpath of the host tools
#
# The machine reaches the pods directly (routes to each zone's pod subnet) and the Services
# through its own kube-proxy.
# Environment: KOO_KAFKA_NAMESPACE (kafka; state in .testbed/kafka, for another namespace in
# .testbed/kafka.<namespace>), KOO_KAFKA_TIMEOUT (300 s for `up`), KAFKA_START_TIMEOUT_S (180),
# KOO_KAFKA_HEAP_MIB (`up` only: every Kafka JVM's heap instead of the example's 256 MiB).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
source "$here/kafka/lib.sh"
source "$here/kafka/wrappers.sh"
source "$here/kafka/pki.sh"
log_tag="kafka.sh" log_time="%T"
ns="${KOO_KAFKA_NAMESPACE:-kafka}"
if [[ "$ns" == kafka ]]; then state="$tb/kafka"; else state="$tb/kafka.$ns"; fi
# The node label that keeps this namespace's stopped pods Pending (stop/start, manifests/kafka-bed).
hold_label="bed.kafkaobserver.io/hold-$ns"
# Set by in_pod_zone: the containerd of the bed node that runs the pod in question.
sock=""
timeout="${KOO_KAFKA_TIMEOUT:-300}"
start_timeout="${KAFKA_START_TIMEOUT_S:-180}"

# pod_zone POD [NAMESPACE]: the zone of the bed node POD runs on.
pod_zone() {
  local node
  node="$(kubectl -n "${2:-$ns}" get pod "$1" -o jsonpath='{.spec.nodeName}' 2>/dev/null)" || return 1
  [[ "$node" == koo-* ]] || return 1
  echo "${node#koo-}"
}
# in_pod_zone POD [NAMESPACE]: crictl talks to that pod's node's containerd from now on.
in_pod_zone() {
  local z
  z="$(pod_zone "$@")" || return 1
  sock="/run/koo-node/$z/containerd.sock"
}

crictl_bin=""
crictl() {
  [[ -n "$crictl_bin" ]] || crictl_bin="$(bash "$root/e2e/build/node-tools.sh" paths | sed -n 's/^crictl=//p')"
  # No /etc/crictl.yaml: everything is on the command line (an empty config silences the warning).
  "$crictl_bin" --config /dev/null --runtime-endpoint "unix://$sock" --timeout 10s "$@"
}

# pod_of ID: the pod name of Kafka node ID (the node table is in e2e/lib.sh).
pod_of() { check_id "$1"; node_pod "$1"; }

# The id of node ID's kafka container: running, or with --any the most recent one.
container_of() {
  local pod filter=(--state running)
  pod="$(pod_of "$1")"
  in_pod_zone "$pod" || return 0
  [[ "${2:-}" == --any ]] && filter=(--all)
  crictl ps -q "${filter[@]}" --name '^kafka$' --label "io.kubernetes.pod.name=$pod" \
    --label "io.kubernetes.pod.namespace=$ns" | head -n1
}

# The crictl calls after container_of run in this shell: point it at the pod's node first.
jvm_pid() {
  local pod c
  pod="$(pod_of "$1")"
  in_pod_zone "$pod" || return 1
  c="$(container_of "$1")" || return 1
  pid_of_container "$c"
}

# container_pid NS POD CONTAINER: the host pid of that running container's main process.
container_pid() {
  in_pod_zone "$2" "$1" || return 1
  local ids
  ids="$(crictl ps -q --state running --name "^$3\$" --label "io.kubernetes.pod.name=$2" \
    --label "io.kubernetes.pod.namespace=$1")" || return 1
  pid_of_container "${ids%%$'\n'*}"
}
pid_of_container() {
  local pid
  [[ -n "$1" ]] || return 1
  pid="$(crictl inspect -o go-template --template '{{.info.pid}}' "$1")"
  [[ -n "$pid" && "$pid" != 0 ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

log_path() {
  local c pod
  pod="$(pod_of "$1")"
  in_pod_zone "$pod" || die "node $1: pod $pod runs on no bed node"
  c="$(container_of "$1" --any)"
  [[ -n "$c" ]] || die "node $1: no kafka container on its bed node"
  crictl inspect -o go-template --template '{{.status.logPath}}' "$c"
}

observer_dir() {
  local uid
  local z
  local pod
  pod="$(pod_of "$1")"
  uid="$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.uid}')" || die "node $1: pod $pod cannot be read"
  [[ -n "$uid" ]] || die "node $1: no pod $pod in $ns"
  z="$(pod_zone "$pod")" || die "node $1: pod $pod runs on no bed node"
  echo "$tb/node/$z/kubelet/pods/$uid/volumes/kubernetes.io~configmap/observer-ids"
}

# assert_patched ID...: every node's current kafka container must have logged the observer
# patch's start-up proof (ObserverPatch.verifyOrExit, before the listeners open, so a Ready node
# has normally logged it already). A vanilla Kafka jar ahead of observer-patch.jar never runs the
# proof: such a node starts and serves, but without the observer gates. Waits up to
# $start_timeout s per node; reads the host log file (and its rotations), nothing else.
proof_logged() { # PATH: the log or one of its rotations (PATH.<time>, maybe gzipped) has the line
  local f
  for f in "$1" "$1".*; do
    [[ -f "$f" ]] && zgrep -qs "observer patch active" "$f" && return 0
  done
  return 1
}
assert_patched() {
  local id path deadline
  for id in "$@"; do
    check_id "$id"
    path="$(log_path "$id")"
    deadline=$((SECONDS + start_timeout))
    until proof_logged "$path"; do
      # shellcheck disable=SC2312 # message text only
      ((SECONDS <= deadline)) ||
        die "node $id (pod $(node_pod "$id")): no 'observer patch active' in its kafka container log $path within ${start_timeout}s: the JVM runs WITHOUT the observer patch (a vanilla Kafka jar ahead of observer-patch.jar?); see kubectl -n $ns logs $(pod_of "$id") -c kafka"
      sleep 1
      path="$(log_path "$id")"
    done
  done
}

pod_ready() {
  local r
  r="$(kubectl -n "$ns" get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" && [[ "$r" == True ]]
}

all_ready() {
  local n
  n="$(kubectl -n "$ns" get pods -l app.kubernetes.io/name=kafka \
        -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
        grep -c True)" || true
  [[ "$n" == $((${#CONTROLLERS[@]} + ${#BROKERS[@]})) ]]
}

bootstrap() {
  local ip
  ip="$(kubectl -n "$ns" get svc kafka-bootstrap -o jsonpath='{.spec.clusterIP}')" || return 1
  [[ -n "$ip" ]] || return 1
  echo "$ip:9092"
}
controller_bootstrap() {
  kubectl -n "$ns" get pods -l app.kubernetes.io/component=controller \
    -o jsonpath='{range .items[*]}{.status.podIP}{":9093\n"}{end}' | grep -v '^:' | paste -sd, -
}

# Four brokers (all of BROKERS) registered and unfenced, as the active controller sees them.
brokers_registered() {
  local out
  local b ids n
  b="$(bootstrap)" || return 1
  out="$("$tb/bin/kafka-metadata-quorum" --bootstrap-server "$b" describe --replication 2>/dev/null)" || return 1
  ids="$(IFS='|'; echo "${BROKERS[*]}")"
  n="$(grep -cE "^\s*($ids)\s" <<<"$out")" || return 1
  ((n >= ${#BROKERS[@]}))
}

# What a wait_for that ran out of time shows before it dies.
diagnose() {
  kubectl -n "$ns" get pods -o wide >&2 || true
  kubectl -n "$ns" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
}
wait_diag=diagnose

wrappers() {
  mkdir -p "$kdir"
  record_patch_jar
  generate_wrappers
}

# examples/kafka-secured/ as a user applies it (`kubectl apply -k`: the example cluster of
# examples/kafka/ with the SASL_SSL and mutual-TLS listeners); with KOO_KAFKA_HEAP_MIB set, every
# Kafka JVM gets that heap and its container a memory limit of heap + 256 MiB (the bench at
# 50,000 partitions needs more than the example's 256 MiB).
manifests() {
  kubectl kustomize "$here/manifests/kafka-bed" | sed "s#bed\.kafkaobserver\.io/hold-HOLD_NAMESPACE#$hold_label#" |
    if [[ -n "${KOO_KAFKA_HEAP_MIB:-}" ]]; then
      sed -e "s/-Xmx256m/-Xmx${KOO_KAFKA_HEAP_MIB}m/" \
        -e "/^ *limits:$/,/memory:/ s/memory: 512Mi/memory: $((KOO_KAFKA_HEAP_MIB + 256))Mi/"
    else
      cat
    fi
}

up() {
  local t0=$SECONDS
  mkdir -p "$state"
  wrappers
  kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns" >/dev/null
  KUBECTL="$tb/bin/kubectl --kubeconfig $tb/kubeconfig" \
    bash "$here/manifests/local-pvs.sh" "$ns" "$(IFS=,; echo "${node_names[*]}")" "$tb/node/local-pvs" >/dev/null
  # The pods do not start without their observer lists: seed them once, never over the operator's.
  for role in controller broker; do
    if ! kubectl -n "$ns" get configmap "kafka-observers-$role" >/dev/null 2>&1; then
      kubectl -n "$ns" create -f "$root/examples/kafka/seed/observer-configmaps.yaml" >/dev/null 2>&1 || true
    fi
  done
  listener_pki
  manifests | kubectl -n "$ns" apply -f - >/dev/null
  # A changed pod template rolls the pods: wait for the roll, not for the old pods' readiness.
  for sts in kafka-controller kafka-broker; do
    kubectl -n "$ns" rollout status "statefulset/$sts" --timeout="${timeout}s" >/dev/null ||
      die "statefulset $ns/$sts did not finish rolling out within ${timeout}s"
  done
  wait_for "$timeout" "7 Kafka pods Ready in $ns" all_ready
  assert_patched "${CONTROLLERS[@]}" "${BROKERS[@]}"
  bootstrap > "$state/bootstrap"
  wait_for 120 "4 brokers registered with the quorum" brokers_registered
  scram_user
  controller_bootstrap > "$state/controller-bootstrap"
  log "up in $((SECONDS - t0))s (observer patch active on all 7 nodes): bootstrap $(< "$state/bootstrap")"
}

observerset() {
  # replace, not apply: a field someone patched in (a drill, a test) and the example does not
  # set must go too, so the spec is exactly the example's.
  # kubectl replace reads the live resourceVersion and sends it: a status write by the operator
  # in between is a Conflict, so it is tried again (optimistic concurrency, as any client).
  local verb manifest try out
  manifest="$(sed "s/\.kafka\.svc:/.$ns.svc:/" "$root/examples/kafka/observerset/observerset.yaml")"
  for try in 1 2 3 4 5; do
    verb=create
    kubectl -n "$ns" get obs kafka >/dev/null 2>&1 && verb=replace
    out="$(kubectl -n "$ns" "$verb" -f - <<<"$manifest" 2>&1 >/dev/null)" && break
    [[ "$out" == *"Conflict"* && $try -lt 5 ]] || die "ObserverSet $ns/kafka: kubectl $verb failed: $out"
    sleep 0.5
  done
  if ! kubectl -n "$ns" wait obs/kafka --for=jsonpath='{.status.phase}'=Ready --timeout=180s >/dev/null; then
    # shellcheck disable=SC2312 # message text only
    die "ObserverSet $ns/kafka not Ready after 180s: $(kubectl -n "$ns" get obs kafka -o jsonpath='{.status.conditions}')"
  fi
  log "ObserverSet $ns/kafka Ready"
}

kill_node() {
  local pid
  pid="$(jvm_pid "$1")" || die "no running kafka container for node $1"
  kill -KILL "$pid"
  log "node $1: JVM pid $pid killed (-9)"
}

# The nodes stopped by `stop` and not yet started again, one id per line.
stopped_file="$state/stopped"

# stop_nodes ID...: all JVMs killed back to back (a zone of several nodes lost at one moment),
# then their pods deleted.
stop_nodes() {
  local id pod pid pods=() killed=() nodes=()
  for id in "$@"; do check_id "$id"; done
  mkdir -p "$state"
  for id in "$@"; do nodes+=("koo-$(zone_of_id "$id")"); done
  # shellcheck disable=SC2312 # printf and sort of a non-empty list: nothing to fail
  mapfile -t nodes < <(printf '%s\n' "${nodes[@]}" | sort -u)
  kubectl label node "${nodes[@]}" "$hold_label=stopped" --overwrite >/dev/null
  { cat "$stopped_file" 2>/dev/null || true; printf '%s\n' "$@"; } | sort -nu > "$stopped_file.tmp"
  mv "$stopped_file.tmp" "$stopped_file"
  for id in "$@"; do
    pid="" pods+=("$(pod_of "$id")")
    if pid="$(jvm_pid "$id")"; then kill -KILL "$pid"; fi
    killed+=("${pid:-(none)}")
  done
  kubectl -n "$ns" delete pod "${pods[@]}" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  log "node(s) $* stopped: ${nodes[*]} hold $ns's pods ($hold_label), JVM(s) ${killed[*]} killed, pod(s) ${pods[*]} deleted (replacements stay Pending)"
}

start_nodes() {
  local id left nodes=()
  for id in "$@"; do check_id "$id"; done
  left="$(grep -vxF -f <(printf '%s\n' "$@") "$stopped_file" 2>/dev/null || true)"
  [[ -z "$left" ]] || die "nodes ${left//$'\n'/,} are stopped too: a node of theirs may be one being released, which would start them as well; start them together"
  rm -f "$stopped_file"
  for id in "$@"; do nodes+=("koo-$(zone_of_id "$id")"); done
  # shellcheck disable=SC2312 # printf and sort of a non-empty list: nothing to fail
  mapfile -t nodes < <(printf '%s\n' "${nodes[@]}" | sort -u)
  kubectl label node "${nodes[@]}" "$hold_label-" >/dev/null
  log "nodes $* back: ${nodes[*]} no longer hold $ns's pods"
  [[ "${KAFKA_START_WAIT:-1}" == 0 ]] && return 0
  local pod
  for id in "$@"; do pod="$(node_pod "$id")"; wait_for "$start_timeout" "node $id Ready" pod_ready "$pod"; done
  assert_patched "$@"
  log "nodes $* Ready, observer patch active"
}

restart_node() {
  local pod uid
  pod="$(pod_of "$1")"
  uid="$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.uid}')"
  kubectl -n "$ns" delete pod "$pod" --wait=true --timeout=180s >/dev/null
  replaced() { local now; now="$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.uid}' 2>/dev/null)" && [[ "$now" != "$uid" ]] && pod_ready "$pod"; }
  [[ "${KAFKA_START_WAIT:-1}" == 0 ]] && return 0
  wait_for "$start_timeout" "node $1 (pod $pod) replaced and Ready" replaced
  assert_patched "$1"
  log "node $1 restarted (pod $pod replaced), observer patch active"
}

down() {
  kubectl get namespace "$ns" >/dev/null 2>&1 || return 0
  kubectl -n "$ns" delete obs --all --wait=true --timeout=60s >/dev/null 2>&1 || true
  kubectl -n "$ns" delete statefulset,service,pdb --all --wait=true --timeout=120s >/dev/null 2>&1 || true
  kubectl label node --all "$hold_label-" >/dev/null 2>&1 || true
  rm -f "$stopped_file"
  log "workloads in $ns deleted (claims and volumes kept)"
}

# down, then the claims, the PersistentVolumes and their directories, and the namespace: the
# next `up` starts from empty logs. Refused for the bed's own namespace kafka.
purge() {
  [[ "$ns" != kafka ]] || die "purge is for other namespaces: the bed's kafka is removed by make testbed-down"
  down
  # The data goes anyway: no controlled shutdown. With every broker stopping at once each would
  # wait out its grace period (120 s) trying to move leaderships, and the namespace with it.
  kubectl -n "$ns" delete pod --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  local id claim pv
  for id in "${CONTROLLERS[@]}" "${BROKERS[@]}"; do
    claim="data-$(node_pod "$id")"
    pv="koo-local-$ns-${claim#data-}"
    kubectl -n "$ns" delete pvc "$claim" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
    kubectl delete pv "$pv" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
    rm -rf "${tb:?}/node/local-pvs/$pv"
  done
  kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  rm -rf "$state"
  log "namespace $ns purged (workloads, claims, volumes and their data)"
}

status() {
  kubectl -n "$ns" get pods -o wide 2>/dev/null || echo "namespace $ns: absent"
  # shellcheck disable=SC2312 # status text only
  [[ -f "$state/bootstrap" ]] && echo "bootstrap: $(< "$state/bootstrap")"
  # shellcheck disable=SC2312 # status text only
  [[ -s "$stopped_file" ]] && echo "stopped: $(paste -sd, "$stopped_file")"
  # shellcheck disable=SC2312 # status text only
  echo "host tools: $(describe_classpath)"
  return 0
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

case "${1:-}" in
  up) up ;;
  observerset) observerset ;;
  kill) kill_node "${2:?node id}" ;;
  stop) shift; [[ $# -gt 0 ]] || usage; stop_nodes "$@" ;;
  start) shift; [[ $# -gt 0 ]] || usage; start_nodes "$@" ;;
  restart) restart_node "${2:?node id}" ;;
  patched) shift; [[ $# -gt 0 ]] || usage; assert_patched "$@"; log "nodes $*: observer patch active" ;;
  running) jvm_pid "${2:?node id}" >/dev/null ;;
  jvm-pid) jvm_pid "${2:?node id}" ;;
  container-pid) container_pid "${2:?namespace}" "${3:?pod}" "${4:?container}" ;;
  log) log_path "${2:?node id}" ;;
  observer-dir) observer_dir "${2:?node id}" ;;
  bootstrap) bootstrap ;;
  controller-bootstrap) controller_bootstrap ;;
  wrappers) wrappers ;;
  down) down ;;
  purge) purge ;;
  status) status ;;
  *) usage ;;
esac
