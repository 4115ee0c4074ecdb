# shellcheck shell=bash disable=SC2034  # its variables are for the scripts that source it
# The e2e scripts' shared shell library. Sourced, never run: `source "$(dirname "$0")/../lib.sh"`.
# It sets no shell option (each script keeps its own `set` line), changes no directory and starts
# nothing; sourcing it twice is a no-op. Not for what runs inside images or pods, nor for the
# scripts it generates (.testbed/bin): those stay self-contained.
#
#   root, tb            the repository root; this checkout's bed, $root/.testbed (a script that
#                       takes another bed says tb="${KOO_TESTBED:-$tb}" after sourcing)
#   versions            e2e/versions.env (K8S_VERSION, ..., KOO_CACHE); CARGO_TARGET_DIR exported,
#                       default $KOO_CACHE/target as in the Makefile
#   k8s_bin, helm_bin   the cached Kubernetes binaries (e2e/build/k8s.sh) and helm
#   node_ip             the host's address on the bed's bridge koo0 ($KOO_NODE_IP, 10.214.0.1):
#                       the apiserver binds it, every node reaches it
#   MEMBERS, member, api_ip, api_port, service_cidr, kubernetes_ip, cluster_dns, ...
#                       the member cluster a script acts on ($KOO_MEMBER, default east)
#   ZONES, ALL_ZONES, remote_zone, zone_node, zone_ip, zone_cidr, zone_netns, zone_of_id, node_names
#                       the bed's nodes, one per zone, each in a network namespace of its own
#   mvn_strict          Maven in batch mode with strict checksums (every Maven run)
#   log, die            "<tag>: message" on stderr; die then exits 1
#   kubectl             the bed's kubectl with its admin kubeconfig
#   wait_for            poll a command until it succeeds or time runs out; wait_crd NAME
#   live_pid, pid_of, alive, stop_pid, start_detached    the processes the bed starts, by pid file
#   CONTROLLERS, BROKERS, OBSERVER, node_pod, role_nodes, check_id    the Kafka node table

[[ -z "${_koo_lib:-}" ]] || return 0
_koo_lib=1

# ---- paths and versions -------------------------------------------------------------------------
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tb="$root/.testbed"
# shellcheck source=versions.env
source "$root/e2e/versions.env"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$KOO_CACHE/target}"
k8s_bin="$KOO_CACHE/k8s/$K8S_VERSION/bin"
helm_bin="$KOO_CACHE/helm/$HELM_VERSION/bin/helm"
node_ip="${KOO_NODE_IP:-10.214.0.1}"

# ---- members: the multi-cluster bed (docs/multi-cluster.md, "The bed plan") ---------------------
# KOO_MEMBER: the member cluster a script acts on. Unset or `east`: the bed as always (the
# multi-cluster bed's member east is that bed). `west` and `tie` have control planes of their own,
# with their own state directory (tb), PKI, ports, service range and apiserver address on koo0:
#   member  apiserver          etcd client/peer  kcm/scheduler  services        state
#   east    10.214.0.1:6443    2379/2380         10257/10259    10.96.0.0/16    .testbed
#   west    10.214.0.2:16443   22379/22380       20257/20259    10.97.0.0/16    .testbed/clusters/west
#   tie     10.214.0.3:26443   32379/32380       30257/30259    10.98.0.0/16    .testbed/clusters/tie
# (e2e/testbed/multi.sh runs the three.)
MEMBERS=(east west tie)
member="${KOO_MEMBER:-east}"
case "$member" in
  east) api_ip="$node_ip" api_port=6443 etcd_client_port=2379 etcd_peer_port=2380
        kcm_port=10257 scheduler_port=10259 service_octet=96 ;;
  west) api_ip=10.214.0.2 api_port=16443 etcd_client_port=22379 etcd_peer_port=22380
        kcm_port=20257 scheduler_port=20259 service_octet=97 ;;
  tie)  api_ip=10.214.0.3 api_port=26443 etcd_client_port=32379 etcd_peer_port=32380
        kcm_port=30257 scheduler_port=30259 service_octet=98 ;;
  *) echo "KOO_MEMBER '$member' is not a member of the bed (${MEMBERS[*]})" >&2; exit 1 ;;
esac
# member_gid MEMBER: the group the member's host processes run under (its operator replica,
# e2e/testbed/multi-operators.sh): the host stands for every member's network, so `multi.sh cut`
# tells a member's own connections from the others' by this group (iptables --gid-owner).
member_gid() { case "$1" in east) echo 20001 ;; west) echo 20002 ;; tie) echo 20003 ;; *) return 1 ;; esac; }
# member_dir MEMBER: that member's state directory (east's is the bed's own).
member_dir() { if [[ "$1" == east ]]; then echo "$root/.testbed"; else echo "$root/.testbed/clusters/$1"; fi; }
service_cidr="10.$service_octet.0.0/16"
[[ "$member" == east ]] || tb="$(member_dir "$member")"
# The `kubernetes` Service's ClusterIP (the first of the range) and cluster DNS (kube-dns).
kubernetes_ip="10.$service_octet.0.1"
cluster_dns="10.$service_octet.0.10"

# ---- the bed's nodes: one per zone --------------------------------------------------------------
# Node koo-<zone> runs in network namespace koo-<zone>, linked to the host's bridge koo0 by a veth
# (host side kv-<zone>), address 10.214.0.<10+i>, pods 10.214.<i>.0/24 (i: the zone's position).
# Zones a, b, c hold controllers 101/102/103 and brokers 1/2/3; zone d (remote) holds broker 4.
read -r -a ZONES <<< "${KOO_ZONES:-a b c d}"
# The zones of every member (KOO_ALL_ZONES, the multi-cluster bed: "e w t"): a zone's index, and
# so its addresses, is its place in this list, unique across the members sharing koo0.
read -r -a ALL_ZONES <<< "${KOO_ALL_ZONES:-${ZONES[*]}}"
# The zone whose node is labelled kafkaobserver.io/remote-zone (the example's controllers keep
# out of it): the last one by default; KOO_REMOTE_ZONE="" for none.
remote_zone="${KOO_REMOTE_ZONE-${ZONES[-1]}}"
zone_index() {
  local i
  for i in "${!ALL_ZONES[@]}"; do [[ "${ALL_ZONES[i]}" == "$1" ]] && { echo $((i + 1)); return 0; }; done
  die "unknown zone '$1' (zones: ${ALL_ZONES[*]})"
}
zone_node() { echo "koo-$1"; }
zone_netns() { echo "koo-$1"; }
zone_ip() { local i; i="$(zone_index "$1")" && echo "10.214.0.$((10 + i))"; }
zone_cidr() { local i; i="$(zone_index "$1")" && echo "10.214.$i.0/24"; }
node_names=()
for _z in "${ZONES[@]}"; do node_names+=("koo-$_z"); done
unset _z
# zone_of_id ID: the zone of Kafka node ID in the example layout: ordinal i of either role in the
# i-th zone (controllers 101-103 -> a-c, brokers 1-4 -> a-d).
zone_of_id() {
  local ordinal
  if (($1 >= 101)); then ordinal=$(($1 - 101)); else ordinal=$(($1 - 1)); fi
  echo "${ZONES[ordinal % ${#ZONES[@]}]}"
}

# ---- Maven --------------------------------------------------------------------------------------
# mvn_strict ARGS...: Maven in batch mode with --strict-checksums (-C): an artifact whose checksum
# from the repository does not match its download fails the build (Maven's default only warns).
# Every Maven run of the e2e and patch builds goes through it. Artifacts already in the local
# repository (~/.m2) were checked when they were downloaded and are not checked again.
mvn_strict() { mvn -B --strict-checksums "$@"; }

# ---- log, die -----------------------------------------------------------------------------------
# log MESSAGE...: "[<time> ]<tag>: MESSAGE" on fd $log_fd (2). A script may set, after sourcing:
#   log_tag     the tag (default: the script's file name without .sh; empty: no tag)
#   log_time    a date(1) format for the UTC time in front (e.g. %T or [%T]; default: none)
#   log_fd      1 for stdout
#   die_prefix  text put before die's message (e.g. "error: ")
log_tag="${0##*/}"
log_tag="${log_tag%.sh}"
log_time=""
log_fd=2
die_prefix=""
log() {
  local prefix=""
  [[ -z "$log_time" ]] || prefix="$(date -u +"$log_time") "
  [[ -z "$log_tag" ]] || prefix+="$log_tag: "
  printf '%s%s\n' "$prefix" "$*" >&"$log_fd"
}
die() { log "$die_prefix$*"; exit 1; }

# ---- kubectl ------------------------------------------------------------------------------------
# kubectl ARGS...: the bed's kubectl wrapper (.testbed/bin/kubectl, written by control-plane.sh)
# with the bed's admin kubeconfig; $kubectl_bin instead of the wrapper when set (the control
# plane and node scripts use the cached binary itself).
kubectl_bin=""
kubectl() { "${kubectl_bin:-$tb/bin/kubectl}" --kubeconfig "$tb/kubeconfig" "$@"; }

# ---- wait_for -----------------------------------------------------------------------------------
# wait_for TIMEOUT_S WHAT COMMAND...: runs COMMAND (its output discarded) every second until it
# succeeds; once TIMEOUT_S seconds have passed, dies with "WHAT: not within TIMEOUT_Ss".
# Optional, for one call (`wait_proc=etcd wait_for ...`) or for a whole script:
#   wait_proc=NAME  WHAT is awaited from NAME, a process the bed started (start_detached): the wait
#                   fails at once when NAME dies (`alive NAME`, below); either failure
#                   shows the last 30 lines of $tb/logs/NAME.log and dies with "NAME exited before
#                   WHAT; see <log>" or "NAME not WHAT after TIMEOUT_Ss; see <log>"
#   wait_diag=CMD   runs before the timeout's die (diagnostics on stderr)
wait_for() {
  local _limit="$1" _what="$2" _proc="${wait_proc:-}" _deadline
  shift 2
  _deadline=$((SECONDS + _limit))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "$_proc" ]] && ! alive "$_proc"; then
      tail -n 30 "$tb/logs/$_proc.log" >&2
      die "$_proc exited before $_what; see $tb/logs/$_proc.log"
    fi
    if ((SECONDS > _deadline)); then
      if [[ -n "$_proc" ]]; then
        tail -n 30 "$tb/logs/$_proc.log" >&2
        die "$_proc not $_what after ${_limit}s; see $tb/logs/$_proc.log"
      fi
      [[ -z "${wait_diag:-}" ]] || "$wait_diag"
      die "$_what: not within ${_limit}s"
    fi
    sleep 1
  done
}

# wait_crd NAME: the CRD NAME Established, polled. Not `kubectl wait --for=condition=Established`:
# right after a create the CRD has no status.conditions yet, and kubectl wait then fails
# (".status.conditions accessor error: <nil> ...") instead of waiting.
crd_established() { local s; s="$(kubectl get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" && [[ "$s" == True ]]; }
wait_crd() { wait_for 60 "CRD $1 Established" crd_established "$1"; }

# ---- processes the bed starts, by pid file ------------------------------------------------------
# live_pid PIDFILE [EXE]: prints the pid in PIDFILE if that process is alive and, with EXE, runs
# EXE (also when EXE was rebuilt since: the kernel then shows "EXE (deleted)"; a reused pid, or a
# process still in its exec chain (bash, setsid), does not count).
live_pid() {
  local file="$1" exe="${2:-}" pid running
  [[ -f "$file" ]] || return 1
  pid="$(tr -d '[:space:]' < "$file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  if [[ -n "$exe" ]]; then
    running="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
    [[ "$running" == "$exe" || "$running" == "$exe (deleted)" ]] || return 1
  else
    kill -0 "$pid" 2>/dev/null || return 1
  fi
  echo "$pid"
}

# pid_of NAME: the pid of NAME, a process the bed started ($tb/pids/NAME.pid), if it still runs
# the binary the caller's `exe_of NAME` prints; alive NAME: whether it does.
pid_of() { local exe; exe="$(exe_of "$1")" && live_pid "$tb/pids/$1.pid" "$exe"; }
alive() { pid_of "$1" >/dev/null; }

# stop_pid PIDFILE EXE LABEL GRACE_S [SIGNAL]: sends SIGNAL (TERM) to the live process of
# PIDFILE, SIGKILL if it still runs after GRACE_S seconds, then removes PIDFILE. Only that pid is
# ever signalled.
stop_pid() {
  local file="$1" exe="$2" label="$3" grace="$4" sig="${5:-TERM}" pid deadline
  if pid="$(live_pid "$file" "$exe")"; then
    kill "-$sig" "$pid" 2>/dev/null || true
    deadline=$((SECONDS + grace))
    while [[ -e /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.2; done
    if [[ -e /proc/$pid ]]; then
      log "$label (pid $pid) still running after ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 25); do [[ -e /proc/$pid ]] || break; sleep 0.2; done
    fi
    log "$label (pid $pid) stopped (SIG$sig)"
  fi
  rm -f "$file"
}

# in_parallel FN ARG...: `FN ARG` for every ARG at once, each in a subshell, then waits for them
# all; fails if any failed. The teardowns use it: a bed process takes one to two seconds to exit
# after SIGTERM, and a bed of a dozen processes stopped one by one took 45 to 75 s.
in_parallel() {
  local fn="$1" arg p rc=0 pids=()
  shift
  for arg in "$@"; do "$fn" "$arg" & pids+=("$!"); done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return "$rc"
}

# [start_netns=NS] start_detached NAME EXE ARGS...: EXE detached in its own session (it outlives the script), output
# appended to $tb/logs/NAME.log, pid in $tb/pids/NAME.pid. Returns once the pid runs EXE: until
# setsid's exec, a liveness check would call the process dead.
start_detached() {
  local name="$1" exe="$2" pid; shift 2
  # shellcheck disable=SC2312 # a log line: date does not fail
  echo "==== $(date -u +%FT%TZ) starting $name" >> "$tb/logs/$name.log"
  # start_netns=NS: inside network namespace NS only (nsenter --net keeps the host's mount
  # namespace, which the kubelet and containerd of one node must share with each other).
  local enter=()
  [[ -z "${start_netns:-}" ]] || enter=(nsenter "--net=/run/netns/$start_netns" --)
  setsid "${enter[@]}" "$exe" "$@" >> "$tb/logs/$name.log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$tb/pids/$name.pid"
  for _ in $(seq 1 50); do
    # shellcheck disable=SC2312 # not readable yet is "not yet": wait on
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]] && break
    sleep 0.1
  done
  log "$name started (pid $pid), log $tb/logs/$name.log"
}

# ---- the bed's Kafka cluster (examples/kafka/) --------------------------------------------------
# Node id = pod ordinal + offset (controllers 101, brokers 1), as the image's entrypoint computes it
# from KAFKA_NODE_ID_OFFSET and the ObserverSet from nodeId.ordinalOffset.
CONTROLLERS=(101 102 103)   # pods kafka-controller-0..2
BROKERS=(1 2 3 4)           # pods kafka-broker-0..3
OBSERVER=4                  # kafka-broker-3, the observer in the bed's default state
# node_pod ID: the pod of Kafka node ID.
node_pod() {
  if (($1 >= CONTROLLERS[0])); then echo "kafka-controller-$(($1 - CONTROLLERS[0]))"
  else echo "kafka-broker-$(($1 - BROKERS[0]))"; fi
}
# role_nodes controller|broker: the role's node ids.
role_nodes() { if [[ $1 == controller ]]; then echo "${CONTROLLERS[@]}"; else echo "${BROKERS[@]}"; fi; }
# check_id ID: dies unless ID is a node of the table.
check_id() {
  local id
  for id in "${CONTROLLERS[@]}" "${BROKERS[@]}"; do [[ "$1" == "$id" ]] && return 0; done
  die "unknown node id '$1': controllers are ${CONTROLLERS[0]}-${CONTROLLERS[-1]}, brokers ${BROKERS[0]}-${BROKERS[-1]}"
}
