#!/usr/bin/env bash
# The multi-cluster bed (docs/multi-cluster.md, "The bed plan"): three Kubernetes clusters on
# this machine, members east, west and tie, each with its own control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler; e2e/lib.sh has the member table), its
# own CA and one node (zones e, w, t: network namespaces koo-e/-w/-t on the bridge koo0). The pod
# network is flat across members, as a cloud's peered networks are: the host routes every pod
# subnet. Each member's CoreDNS serves, besides cluster.local, the zones east.koo, west.koo and
# tie.koo from the three apiservers, so every pod resolves every member's Services. On it, one
# Kafka KRaft cluster stretched over the three: examples/multi-cluster/ (controllers 101, 102,
# 103 in east, west, tie; brokers 1 and 2 in east, 3 and 4 in west).
#
#   multi.sh up         the builds (as up.sh), the three control planes, the three nodes, DNS,
#                       then Kafka; waits for every pod Ready, the three-voter quorum and the 4
#                       brokers registered, and checks that every member resolves every
#                       controller's name
#   multi.sh down       tie, west, then east (which takes the bridge): every process stopped
#   multi.sh status     each member's control plane and node
#   multi.sh check      the DNS and quorum checks of `up` again
#   multi.sh cost [S]   resident memory and CPU of every process of each member (control plane,
#                       node, containers) over S seconds (60): the idle cost of the bed
#   multi.sh lose MEMBER    the member lost whole, as a region is: its control plane and every
#                       process of its node SIGKILLed at once (pods stay Running in its etcd), and
#                       every packet to or from its apiserver address, node and pod subnet
#                       dropped (timeouts, not refusals); ends with at_ms=<epoch ms> of the kill
#   multi.sh return MEMBER  the drops removed, its control plane and node started again
#   multi.sh cut A B    the link between members A and B cut both ways (a broken interconnect):
#                       packets between their nodes and pods, to each other's apiserver, and
#                       from either's host processes (run under its group, lib.sh member_gid)
#                       to the other dropped; both stay up; ends with at_ms=<epoch ms>
#   multi.sh heal A B   that cut's drops removed
#   multi.sh kubectl MEMBER ARGS...   kubectl against MEMBER's apiserver
#
# The bed's single-cluster layout (up.sh) and this one share .testbed, the bridge and the
# addresses: one at a time. `make testbed-down` (down.sh) takes this one down too.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
log_tag="multi.sh" log_time="%T"
# East's state directory: lib.sh was sourced without KOO_MEMBER.
east_tb="$tb"
marker="$east_tb/multi"
kafka_timeout="${KOO_KAFKA_TIMEOUT:-420}"

# zone_of_member MEMBER: its node's zone; on MEMBER CMD...: CMD with the environment under
# which the bed's scripts act on MEMBER.
zone_of_member() { case "$1" in east) echo e ;; west) echo w ;; tie) echo t ;; *) die "unknown member '$1'" ;; esac; }
on() {
  local m="$1" z; shift
  z="$(zone_of_member "$m")"
  KOO_MEMBER="$m" KOO_ZONES="$z" KOO_ALL_ZONES="e w t" KOO_REMOTE_ZONE="" \
    KOO_DNS_MEMBERS="${MEMBERS[*]}" "$@"
}
kc() {
  local m="$1" mtb; shift
  mtb="$(member_dir "$m")"
  "$k8s_bin/kubectl" --kubeconfig "$mtb/kubeconfig" "$@"
}

# The Kafka layout of examples/multi-cluster/: per member, controllers and brokers.
controllers_of() { case "$1" in east|west|tie) echo 1 ;; esac; }
brokers_of() { case "$1" in east|west) echo 2 ;; tie) echo 0 ;; esac; }
controller_name() { echo "kafka-controller-$1-0.kafka-controller-$1.kafka.svc.$1.koo"; }

# The single-cluster bed running here (its apiserver alive without this bed's marker) is refused.
refuse_single_bed() {
  [[ ! -f "$marker" ]] || return 0
  if live_pid "$east_tb/pids/kube-apiserver.pid" "$k8s_bin/kube-apiserver" >/dev/null; then
    die "the single-cluster bed runs in $east_tb: take it down first (make testbed-down)"
  fi
}

kafka_member_up() {
  local m="$1" mtb z controllers brokers
  mtb="$(member_dir "$m")"
  z="$(zone_of_member "$m")"
  controllers="$(controllers_of "$m")"
  brokers="$(brokers_of "$m")"
  kc "$m" get namespace kafka >/dev/null 2>&1 || kc "$m" create namespace kafka >/dev/null
  KUBECTL="$k8s_bin/kubectl --kubeconfig $mtb/kubeconfig" KOO_STS_SUFFIX="-$m" \
    KOO_CONTROLLER_COUNT="$controllers" KOO_BROKER_COUNT="$brokers" \
    bash "$here/manifests/local-pvs.sh" kafka "koo-$z" "$mtb/node/local-pvs" >/dev/null
  # The pods do not start without their observer lists: seed them once, never over the operator's.
  local role
  for role in controller broker; do
    if ! kc "$m" -n kafka get configmap "kafka-observers-$role" >/dev/null 2>&1; then
      kc "$m" -n kafka create -f "$root/examples/kafka/seed/observer-configmaps.yaml" >/dev/null 2>&1 || true
    fi
  done
  kc "$m" -n kafka apply -k "$root/examples/multi-cluster/$m" >/dev/null
  log "member $m: examples/multi-cluster/$m applied"
}

pods_ready() {
  local m="$1" want n
  want=$(($(controllers_of "$m") + $(brokers_of "$m")))
  n="$(kc "$m" -n kafka get pods -l app.kubernetes.io/name=kafka \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c True)" || return 1
  [[ "$n" == "$want" ]]
}

# The controllers' pod IPs:9093, every member's.
controller_bootstrap() {
  local m ip out=()
  for m in "${MEMBERS[@]}"; do
    ip="$(kc "$m" -n kafka get pod "kafka-controller-$m-0" -o jsonpath='{.status.podIP}')" || return 1
    [[ -n "$ip" ]] || return 1
    out+=("$ip:9093")
  done
  (IFS=,; echo "${out[*]}")
}

# quorum_formed: DescribeQuorum names 101-103 as voters with a leader, and brokers 1-4 as
# observers (registered and fetching the metadata log).
quorum_formed() {
  local boot out id
  boot="$(controller_bootstrap)" || return 1
  out="$("$east_tb/bin/kafka-metadata-quorum" --bootstrap-controller "$boot" describe --replication)" || return 1
  for id in 101 102 103; do grep -qE "^\s*$id\s.*\sLeader|^\s*$id\s.*\sFollower" <<<"$out" || return 1; done
  for id in 1 2 3 4; do grep -qE "^\s*$id\s.*\sObserver" <<<"$out" || return 1; done
}

# resolves FROM NAME IP: member FROM's controller pod resolves NAME to IP.
resolves() {
  local got
  got="$(kc "$1" -n kafka exec "kafka-controller-$1-0" -c kafka -- getent hosts "$2")" || return 1
  [[ "${got%% *}" == "$3" ]]
}

# dns_check: from a pod of every member, every controller's name resolves to that pod's IP. A
# name can take a while to appear in another member: the pod's endpoint reaches that member's
# CoreDNS through its watch of the owning member's apiserver, and a negative answer is cached.
dns_check() {
  local from to name want
  for from in "${MEMBERS[@]}"; do
    for to in "${MEMBERS[@]}"; do
      name="$(controller_name "$to")"
      want="$(kc "$to" -n kafka get pod "kafka-controller-$to-0" -o jsonpath='{.status.podIP}')" ||
        die "member $to: cannot read pod kafka-controller-$to-0"
      [[ -n "$want" ]] || die "member $to: kafka-controller-$to-0 has no IP"
      wait_for 60 "member $from resolving $name to $want" resolves "$from" "$name" "$want"
      log "member $from resolves $name -> $want"
    done
  done
}

check() {
  dns_check
  wait_for 120 "the three-voter quorum with brokers 1-4 registered" quorum_formed
  local boot
  boot="$(controller_bootstrap)" || die "the controllers' addresses cannot be read"
  "$east_tb/bin/kafka-metadata-quorum" --bootstrap-controller "$boot" describe --replication
}

up() {
  local t0=$SECONDS m
  refuse_single_bed
  mkdir -p "$east_tb"/{logs,pids,bin,kafka}
  bash "$root/e2e/build/k8s.sh" >/dev/null
  bash "$root/e2e/build/node-packages.sh"
  bash "$root/e2e/build/node-tools.sh" >/dev/null
  if [[ ! -f "$marker" ]]; then
    # A fresh multi-cluster bed: east's etcd may hold the single-cluster bed's objects (its four
    # nodes, its Kafka), which would stand in this bed as Running pods on nodes that never return.
    for m in "${MEMBERS[@]}"; do on "$m" bash "$here/control-plane.sh" down --purge; done
  fi
  echo "${MEMBERS[*]}" > "$marker"
  bash "$root/e2e/build/kafka-patched.sh" "$KAFKA_VERSION" | tail -n1 > "$east_tb/kafka/patch-jar"
  bash "$root/e2e/build/images.sh" build
  for m in "${MEMBERS[@]}"; do
    on "$m" bash "$here/control-plane.sh" up
    # Every member's CoreDNS reads this member's Services as koo-dns-reader (pki.sh): read-only.
    kc "$m" apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: koo-dns-reader}
rules:
- {apiGroups: [""], resources: [services, endpoints, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: koo-dns-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: koo-dns-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: koo-dns-reader}
EOF
  done
  log "control planes up in $((SECONDS - t0))s"
  # East's host kube-proxy waits 30 s for a Node it never has (node.sh): the other members'
  # nodes come up meanwhile.
  for m in "${MEMBERS[@]}"; do KOO_HOST_PROXY_WAIT=later on "$m" bash "$here/node.sh" up; done
  on east bash "$here/node.sh" proxy-wait
  log "nodes and DNS up in $((SECONDS - t0))s"
  # The host tools (kafka-metadata-quorum, ...) in .testbed/bin.
  bash "$here/kafka.sh" wrappers
  for m in "${MEMBERS[@]}"; do kafka_member_up "$m"; done
  for m in "${MEMBERS[@]}"; do
    wait_for "$kafka_timeout" "member $m: its Kafka pods Ready" pods_ready "$m"
  done
  check
  log "multi-cluster bed up in $((SECONDS - t0))s"
}

# member_down MEMBER: its node, then its control plane (with down's options, `down_args`).
down_args=()
member_down() {
  local m="$1" rc=0 dir
  dir="$(member_dir "$m")"
  [[ "$m" == east || -d "$dir" ]] || return 0
  on "$m" bash "$here/node.sh" down || rc=1
  on "$m" bash "$here/control-plane.sh" down "${down_args[@]}" || rc=1
  return "$rc"
}
down() {
  local m rc=0 others=()
  down_args=("$@")
  # The members other than east at once, then east (its node takes the bridge they hang on).
  for m in "${MEMBERS[@]}"; do [[ "$m" == east ]] || others+=("$m"); done
  in_parallel member_down "${others[@]}" || rc=1
  member_down east || rc=1
  ((rc == 0)) || die "a member did not come down cleanly (see above)"
  drop_chain "$lost_chain" INPUT FORWARD
  drop_chain "$cut_chain" INPUT FORWARD
  drop_chain "$cut_out_chain" OUTPUT
  rm -f "$marker"
}

status() {
  local m
  for m in "${MEMBERS[@]}"; do
    echo "== member $m"
    on "$m" bash "$here/control-plane.sh" status || true
    on "$m" bash "$here/node.sh" status || true
  done
}

# The host's chain of dropped members: in INPUT (the host's own connections to a member's
# apiserver address arrive there, as do pods') and FORWARD (pod to pod, pod to node).
lost_chain=KOO-MEMBER-LOST
# lost_rules MEMBER: the iptables matches of what the member's loss silences, one per line: its
# apiserver (address and port: east's address is also the host's on koo0), its node, its pods.
# The member's table and zone addresses are lib.sh's, read as the member's scripts read them.
lost_rules() {
  local addrs api port ip cidr
  addrs="$(member_addrs "$1")" || return 1
  read -r api port ip cidr <<<"$addrs"
  [[ -n "$cidr" ]] || return 1
  printf '%s\n' "-d $api -p tcp --dport $port" "-d $ip" "-s $ip" "-d $cidr" "-s $cidr"
}

lose() {
  local m="$1" mtb name pid pids=() rule=() at
  [[ "$m" != east ]] || log "losing east: its host kube-proxy goes too (the host's Service rules)"
  mtb="$(member_dir "$m")"
  iptables -N "$lost_chain" 2>/dev/null || true
  iptables -C INPUT -j "$lost_chain" 2>/dev/null || iptables -I INPUT 1 -j "$lost_chain"
  iptables -C FORWARD -j "$lost_chain" 2>/dev/null || iptables -I FORWARD 1 -j "$lost_chain"
  # The drops first: from this moment nothing of the member answers, as when a region goes dark.
  local rules
  rules="$(lost_rules "$m")" || die "member $m: no addresses"
  while read -r -a rule; do
    iptables -A "$lost_chain" "${rule[@]}" -m comment --comment "koo-lost-$m" -j DROP
  done <<<"$rules"
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy-host; do
    pid="$(live_pid "$mtb/pids/$name.pid")" && pids+=("$pid")
  done
  local zone_pids_out z
  z="$(zone_of_member "$m")"
  zone_pids_out="$(on "$m" bash "$here/node.sh" pids "$z")" ||
    die "member $m: cannot list its node's processes"
  mapfile -t -O "${#pids[@]}" pids <<<"$zone_pids_out"
  ((${#pids[@]} > 0)) || die "member $m: nothing runs there"
  kill -KILL "${pids[@]}" 2>/dev/null || true
  at="$(date +%s%3N)"
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy-host \
      "kubelet-$(zone_of_member "$m")" "kube-proxy-$(zone_of_member "$m")" "containerd-$(zone_of_member "$m")"; do
    rm -f "$mtb/pids/$name.pid"
  done
  log "member $m lost: ${#pids[@]} processes SIGKILLed at once, its addresses dropped, at_ms=$at"
}

# The chains of cut links between members: KOO-MEMBER-CUT in INPUT and FORWARD (a member's node
# and pods to the other's node, pods and apiserver), KOO-MEMBER-CUT-OUT in OUTPUT (the host
# processes of a member, told apart by their group, lib.sh member_gid, to the other member).
cut_chain=KOO-MEMBER-CUT cut_out_chain=KOO-MEMBER-CUT-OUT
# member_addrs MEMBER: "<apiserver address> <apiserver port> <node address> <pod subnet>".
member_addrs() {
  local z
  z="$(zone_of_member "$1")"
  # shellcheck disable=SC2016 # expanded by the inner shell, after sourcing lib.sh
  on "$1" bash -c 'source "$1" && ip="$(zone_ip "$2")" && cidr="$(zone_cidr "$2")" &&
    echo "$api_ip $api_port $ip $cidr"' _ "$root/e2e/lib.sh" "$z"
}
# cut A B: the link between members A and B cut both ways, as a broken interconnect between two
# regions: every packet between their nodes and pods, from either's nodes and pods to the
# other's apiserver, and from either's host processes (its operator replica) to the other's
# apiserver, node and pods dropped (timeouts, not refusals). Both stay up and reach the others.
cut() {
  local a="$1" b="$2" from to f_addrs t_addrs f_ip f_cidr t_api t_port t_ip t_cidr gid src dst tag at
  [[ "$a" != "$b" ]] || die "cut: two different members"
  tag="koo-cut-$a-$b"
  iptables -N "$cut_chain" 2>/dev/null || true
  iptables -N "$cut_out_chain" 2>/dev/null || true
  iptables -C INPUT -j "$cut_chain" 2>/dev/null || iptables -I INPUT 1 -j "$cut_chain"
  iptables -C FORWARD -j "$cut_chain" 2>/dev/null || iptables -I FORWARD 1 -j "$cut_chain"
  iptables -C OUTPUT -j "$cut_out_chain" 2>/dev/null || iptables -I OUTPUT 1 -j "$cut_out_chain"
  for from in "$a" "$b"; do
    to="$a"
    [[ "$from" != "$a" ]] || to="$b"
    f_addrs="$(member_addrs "$from")" || die "cut: no addresses for $from"
    t_addrs="$(member_addrs "$to")" || die "cut: no addresses for $to"
    read -r _ _ f_ip f_cidr <<<"$f_addrs"
    read -r t_api t_port t_ip t_cidr <<<"$t_addrs"
    [[ -n "$f_cidr" && -n "$t_cidr" ]] || die "cut: no addresses for $from or $to"
    gid="$(member_gid "$from")" || die "cut: no group for member $from"
    for src in "$f_ip" "$f_cidr"; do
      for dst in "$t_ip" "$t_cidr"; do
        iptables -A "$cut_chain" -s "$src" -d "$dst" -m comment --comment "$tag" -j DROP
      done
      iptables -A "$cut_chain" -s "$src" -d "$t_api" -p tcp --dport "$t_port" -m comment --comment "$tag" -j DROP
    done
    iptables -A "$cut_out_chain" -m owner --gid-owner "$gid" -d "$t_api" -p tcp --dport "$t_port" \
      -m comment --comment "$tag" -j DROP
    for dst in "$t_ip" "$t_cidr"; do
      iptables -A "$cut_out_chain" -m owner --gid-owner "$gid" -d "$dst" -m comment --comment "$tag" -j DROP
    done
  done
  at="$(date +%s%3N)"
  log "link $a-$b cut both ways at_ms=$at"
}
# heal A B: the rules of `cut A B` deleted (the other cuts kept).
heal() {
  local tag="koo-cut-$1-$2" chain n
  for chain in "$cut_chain" "$cut_out_chain"; do
    # shellcheck disable=SC2312 # a rule list that cannot be read has nothing to delete
    while n="$(iptables -L "$chain" --line-numbers -n 2>/dev/null | awk -v c="$tag" '$0 ~ c {print $1; exit}')" &&
        [[ -n "$n" ]]; do
      iptables -D "$chain" "$n"
    done
  done
  log "link $1-$2 healed"
}
# drop_chain CHAIN HOOK...: CHAIN unhooked, flushed and deleted.
drop_chain() {
  local chain="$1" hook
  shift
  for hook in "$@"; do while iptables -D "$hook" -j "$chain" 2>/dev/null; do :; done; done
  iptables -F "$chain" 2>/dev/null && iptables -X "$chain" 2>/dev/null
  return 0
}

return_member() {
  local m="$1" n
  # shellcheck disable=SC2312 # a rule list that cannot be read has nothing to delete
  while n="$(iptables -L "$lost_chain" --line-numbers -n 2>/dev/null | awk -v c="koo-lost-$m" '$0 ~ c {print $1; exit}')" &&
      [[ -n "$n" ]]; do
    iptables -D "$lost_chain" "$n"
  done
  on "$m" bash "$here/control-plane.sh" up
  on "$m" bash "$here/node.sh" up
  log "member $m returned"
}

# cost [SECONDS]: per member, the processes of its control plane and of its node (with every
# container), their resident memory now and their CPU time over SECONDS.
proc_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
member_pids() {
  local m="$1" mtb name pid z
  mtb="$(member_dir "$m")"
  z="$(zone_of_member "$m")"
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy-host; do
    pid="$(live_pid "$mtb/pids/$name.pid")" && echo "$pid"
  done
  on "$m" bash "$here/node.sh" pids "$z"
}
cost() {
  local secs="${1:-60}" m pid hz t
  hz="$(getconf CLK_TCK)"
  declare -A before list
  for m in "${MEMBERS[@]}"; do
    list[$m]="$(member_pids "$m")" || die "member $m: cannot list its processes"
    [[ -n "${list[$m]}" ]] || die "member $m: no process found (is the bed up?)"
    before[$m]=0
    for pid in ${list[$m]}; do t="$(proc_ticks "$pid")"; before[$m]=$((before[$m] + t)); done
  done
  sleep "$secs"
  printf '%-6s %6s %10s %14s\n' member procs "RSS (MB)" "CPU (% core)"
  local total_rss=0 total_ticks=0 ticks r n t k share
  for m in "${MEMBERS[@]}"; do
    ticks=0 r=0 n=0
    for pid in ${list[$m]}; do
      t="$(proc_ticks "$pid")"
      k="$(proc_rss_kb "$pid")"
      ticks=$((ticks + t)) r=$((r + k)) n=$((n + 1))
    done
    ticks=$((ticks - before[$m]))
    total_rss=$((total_rss + r)) total_ticks=$((total_ticks + ticks))
    share="$(awk -v t="$ticks" -v hz="$hz" -v s="$secs" 'BEGIN {printf "%.1f", 100 * t / hz / s}')"
    printf '%-6s %6d %10d %14s\n' "$m" "$n" $((r / 1024)) "$share"
  done
  share="$(awk -v t="$total_ticks" -v hz="$hz" -v s="$secs" 'BEGIN {printf "%.1f", 100 * t / hz / s}')"
  printf '%-6s %6s %10d %14s\n' all "" $((total_rss / 1024)) "$share"
}

case "${1:-}" in
  up) up ;;
  down) shift; down "$@" ;;
  status) status ;;
  check) check ;;
  cost) cost "${2:-60}" ;;
  lose) [[ " ${MEMBERS[*]} " == *" ${2:-} "* ]] || die "usage: multi.sh lose MEMBER (${MEMBERS[*]})"; lose "$2" ;;
  return) [[ " ${MEMBERS[*]} " == *" ${2:-} "* ]] || die "usage: multi.sh return MEMBER (${MEMBERS[*]})"; return_member "$2" ;;
  cut|heal) [[ " ${MEMBERS[*]} " == *" ${2:-} "* && " ${MEMBERS[*]} " == *" ${3:-} "* ]] ||
      die "usage: multi.sh $1 MEMBER MEMBER (${MEMBERS[*]})"
    if [[ "$1" == cut ]]; then cut "$2" "$3"; else heal "$2" "$3"; fi ;;
  kubectl) [[ -n "${2:-}" ]] || die "usage: multi.sh kubectl MEMBER ARGS..."; m="$2"; shift 2; kc "$m" "$@" ;;
  *) die "usage: multi.sh up | down [--purge] | status | check | cost [SECONDS] | lose|return MEMBER | cut|heal MEMBER MEMBER | kubectl MEMBER ARGS..." ;;
esac
