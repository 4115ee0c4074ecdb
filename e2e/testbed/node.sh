#!/usr/bin/env bash
# The bed's real Kubernetes nodes, one per zone (e2e/lib.sh: ZONES, default a b c d): node
# koo-<zone> is a kubelet with its own containerd (and runc) and kube-proxy, all inside network
# namespace koo-<zone>, linked to the host's bridge koo0 by a veth (host side kv-<zone>) and
# labelled topology.kubernetes.io/zone=<zone>. The host runs the control plane, kube-scheduler,
# a kube-proxy of its own (so the machine reaches ClusterIPs as before) and routes each zone's
# pod subnet to that zone's node. Cluster DNS (CoreDNS, two replicas in two zones).
#
#   node.sh network-up        the host's address: bridge koo0 holding $node_ip/24 (control-plane.sh
#                             calls it before the apiserver binds that address)
#   node.sh up                network-up, every zone's node, scheduler, host kube-proxy, DNS;
#                             waits until every Node is Ready and CoreDNS answers
#   node.sh proxy-wait        waits for the host's kube-proxy (up waits for it itself, unless
#                             KOO_HOST_PROXY_WAIT=later)
#   node.sh down              stops every component of every zone, kills every container (even
#                             with containerd gone), unmounts, removes the namespaces, veths,
#                             routes, iptables chains, the bridge; restores the sysctls it changed
#   node.sh status            one line per component
#
# Zone failures, as clouds have them (the drills use these):
#   node.sh partition ZONE    the zone's link cut (its veth down): kubelet, containerd and every
#                             container keep running inside, cut off
#   node.sh heal ZONE         the link back up
#   node.sh power-off ZONE    every process of the zone (kubelet, kube-proxy, containerd, shims,
#                             every container) SIGKILLed at once, and its link down: nothing is
#                             deleted in the API
#   node.sh power-on ZONE     link up, containerd, kube-proxy and kubelet started again (the
#                             kubelet restarts the pods' containers)
#   node.sh slow ZONE RATE [LATENCY]  a bandwidth cap (tc tbf, e.g. 2mbit) with a queue of up to
#                             LATENCY (default 400ms) on the zone's link, both directions: a far,
#                             congested region. (This kernel has no netem: no fixed delay.)
#   node.sh unslow ZONE       the cap removed
#   node.sh exec ZONE CMD...  CMD inside the zone's network namespace
#   node.sh pids ZONE         every process of the zone, one pid per line (node components,
#                             shims, containers)
#
# Everything stays on this machine: the addresses and pod subnets exist only on koo0 and inside
# the bed's namespaces; forwarded traffic from koo0 to any other interface is refused.
#
# KOO_MEMBER=west|tie: that member's nodes of the multi-cluster bed (e2e/testbed/multi.sh), on
# the same bridge: its apiserver address added to koo0, its own scheduler, no kube-proxy on the
# host (the host's is east's), its own CoreDNS. KOO_DNS_MEMBERS="east west tie": every member's
# CoreDNS also serves the zones <member>.koo from that member's apiserver (docs/multi-cluster.md,
# "DNS across members").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"

pki="$tb/pki"
# The cached binary itself, not the wrapper in .testbed/bin.
kubectl_bin="$k8s_bin/kubectl"
bridge="koo0"
# Every pod subnet (10.214.<i>.0/24) and the nodes' own (10.214.0.0/24).
cluster_cidr="10.214.0.0/16"
# service_cidr, cluster_dns: the member's (e2e/lib.sh).
read -r -a dns_members <<< "${KOO_DNS_MEMBERS:-}"
start_timeout="${KOO_NODE_TIMEOUT:-180}"
# Node heartbeat: the kubelet renews its Lease every quarter of this (2 s); kube-controller-manager
# marks a node NotReady/Unknown after --node-monitor-grace-period (control-plane.sh: 8 s). The
# production defaults are 40 s and 40-50 s: a zone outage is seen faster here than on most clusters.
lease_seconds=8

# zone_vars ZONE: the zone's names and paths, as plain variables (Z_*), so no command below hides
# a failure in a substitution. containerd's runtime state on tmpfs (/run), its root (images,
# snapshots) in the cache (the images cannot be pulled again, so they survive a testbed-down); the
# node's configs and the kubelet's root dir under .testbed/node/<zone>.
zone_vars() {
  local i
  i="$(zone_index "$1")" || die "unknown zone '$1'"
  Z_NODE="koo-$1" Z_NS="koo-$1" Z_VETH="kv-$1"
  Z_IP="10.214.0.$((10 + i))" Z_CIDR="10.214.$i.0/24" Z_GW="10.214.$i.1"
  Z_RUN="/run/koo-node/$1" Z_SOCK="/run/koo-node/$1/containerd.sock" Z_RUNC="/run/koo-node/$1/runc"
  Z_ROOT="$KOO_CACHE/node/containerd-$1" Z_DIR="$tb/node/$1"
}

exe_of() {
  case "$1" in
    containerd*) command -v containerd ;;
    kubelet-*) echo "$k8s_bin/kubelet" ;;
    kube-proxy*) echo "$k8s_bin/kube-proxy" ;;
    *) echo "$k8s_bin/$1" ;;
  esac
}
# node_tool KEY: a path from `node-tools.sh paths` (cni_bin_dir, crictl, coredns).
node_tool() { bash "$root/e2e/build/node-tools.sh" paths 2>/dev/null | sed -n "s/^$1=//p"; }
in_zone() { local ns="koo-$1"; shift; nsenter "--net=/run/netns/$ns" -- "$@"; }

# start NAME [NETNS] -- ARGS...: NAME's binary, unless it already runs.
start() {
  local name="$1" ns="$2" exe; shift 2
  exe="$(exe_of "$name")"
  # shellcheck disable=SC2312 # message text only
  if alive "$name"; then log "$name already running (pid $(pid_of "$name"))"; return; fi
  [[ -x "$exe" ]] || die "$name: missing $exe"
  start_netns="$ns" start_detached "$name" "$exe" "$@"
}

# write_if_changed FILE < content: kube-proxy exits when its config file is written to while it
# runs, even with the same content, so a second `up` touches nothing that did not change.
write_if_changed() {
  local file="$1"
  cat > "$file.new"
  if cmp -s "$file.new" "$file"; then rm -f "$file.new"; else mv -f "$file.new" "$file"; fi
}

# --- network ---------------------------------------------------------------------------------

# Host sysctls the nodes need; the previous values are kept in node/sysctl.saved for `down`.
sysctls=(net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1)

network_up() {
  mkdir -p "$tb/node"
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    log "bridge $bridge created"
  fi
  # Read whole, then matched: with pipefail, `ip addr show | grep -q` fails when grep exits
  # before ip has written everything (SIGPIPE).
  local addrs kv
  addrs="$(ip -4 addr show dev "$bridge")"
  [[ "$addrs" == *"inet $node_ip/"* ]] || ip addr add "$node_ip/24" dev "$bridge"
  # A member's apiserver binds an address of its own on the same bridge.
  [[ "$api_ip" == "$node_ip" || "$addrs" == *"inet $api_ip/"* ]] || ip addr add "$api_ip/24" dev "$bridge"
  ip link set "$bridge" up
  if [[ ! -f "$tb/node/sysctl.saved" ]]; then
    local v
    for kv in "${sysctls[@]}"; do
      v="$(sysctl -n "${kv%%=*}")" || die "cannot read sysctl ${kv%%=*}"
      echo "${kv%%=*}=$v"
    done > "$tb/node/sysctl.saved"
  fi
  for kv in "${sysctls[@]}"; do sysctl -qw "$kv"; done
  # The host routes between zones on koo0 (in and out of the same bridge): no redirects, the
  # nodes keep sending through the host, where a cut link is cut for everyone.
  sysctl -qw "net.ipv4.conf.$bridge.send_redirects=0"
  # Service addresses go to koo0, not the default route: a packet to a ClusterIP that kube-proxy
  # has no rule for (yet) dies here instead of leaving the machine.
  ip route replace "$service_cidr" dev "$bridge"
  # Pods and nodes talk to each other, to Services and to the host, never beyond: forwarded
  # traffic from koo0 to any other interface is refused.
  iptables -N KOO-NODE-FORWARD 2>/dev/null || iptables -F KOO-NODE-FORWARD
  iptables -A KOO-NODE-FORWARD -i "$bridge" ! -o "$bridge" -j REJECT
  iptables -C FORWARD -j KOO-NODE-FORWARD 2>/dev/null || iptables -I FORWARD 1 -j KOO-NODE-FORWARD
}

# zone_net_up ZONE: the zone's namespace, its veth on koo0, its address, the route to its pods.
zone_net_up() {
  zone_vars "$1"
  local z="$1" ns veth ip cidr links
  ns="$Z_NS" veth="$Z_VETH" ip="$Z_IP" cidr="$Z_CIDR"
  [[ -e "/run/netns/$ns" ]] || ip netns add "$ns"
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
  fi
  ip link set "$veth" master "$bridge"
  ip link set "$veth" up
  ip -n "$ns" link set lo up
  links="$(ip -n "$ns" -4 addr show dev eth0)"
  [[ "$links" == *"inet $ip/"* ]] || ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route replace default via "$node_ip" dev eth0
  ip route replace "$cidr" via "$ip" dev "$bridge"
  # Inside the zone: forward between its pods' bridge and eth0; bridged pod traffic through
  # iptables (kube-proxy's Service rules); loose reverse-path checks.
  in_zone "$z" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 \
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
}

write_cni_config() {
  zone_vars "$1"
  local z="$1" dir cidr gw
  dir="$Z_DIR/cni/net.d" cidr="$Z_CIDR"
  gw="$Z_GW"
  mkdir -p "$dir" "$Z_DIR/cni/ipam"
  # The bridge plugin attaches each pod's veth to the zone's bridge cni0 (inside the zone's
  # namespace; its address is the pods' gateway); no masquerade: pod traffic never leaves the
  # machine.
  write_if_changed "$dir/10-koo.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "koo-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$Z_DIR/cni/ipam",
        "ranges": [[{"subnet": "$cidr", "gateway": "$gw", "rangeStart": "${cidr%.*/*}.10"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

# --- containerd ------------------------------------------------------------------------------

# write_containerd_config ZONE CNI_BIN_DIR
write_containerd_config() {
  zone_vars "$1"
  local runc_bin
  runc_bin="$(command -v runc)" || die "runc is not installed"
  local z="$1" cni_bin="$2" rd nd
  rd="$Z_RUN" nd="$Z_DIR"
  mkdir -p "$nd" "$Z_ROOT" "$rd"
  write_if_changed "$nd/containerd.toml" <<EOF
# Generated by e2e/testbed/node.sh for node $Z_NODE.
version = 2
root = "$Z_ROOT"
state = "$rd/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$Z_SOCK"
[ttrpc]
  address = "$rd/containerd.sock.ttrpc"
[debug]
  address = "$rd/containerd-debug.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  # Nothing can be pulled here: the sandbox image is built locally (e2e/build/images.sh).
  sandbox_image = "registry.k8s.io/pause:3.10"
  # Without it every sandbox fails on this machine (runc cannot write oom_score_adj).
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$runc_bin"
        # The zone's own runc state root, so power-off and down find (and kill) every container
        # of this node even when containerd and its shims are gone.
        Root = "$Z_RUNC"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$nd/cni/net.d"
EOF
}

containerd_up() { zone_vars "$1"; ctr --address "$Z_SOCK" --namespace k8s.io version; }

# --- kubelet ---------------------------------------------------------------------------------

write_kubelet_config() {
  zone_vars "$1"
  local z="$1" nd
  nd="$Z_DIR"
  mkdir -p "$nd/kubelet"
  write_if_changed "$nd/kubelet.yaml" <<EOF
# Generated by e2e/testbed/node.sh for node $Z_NODE.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $Z_IP
port: 10250
readOnlyPort: 0
# In the zone's own network namespace: every node has its own loopback.
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $pki/kubelet-serving-$z.crt
tlsPrivateKeyFile: $pki/kubelet-serving-$z.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$Z_SOCK
# Container logs inside the bed (not /var/log/pods): the bed leaves nothing outside .testbed/.
podLogsDir: $nd/pod-logs
# This machine: cgroup v1 ("hybrid"), no systemd, swap allowed.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
clusterDNS: [$cluster_dns]
clusterDomain: cluster.local
podCIDR: $Z_CIDR
# The images cannot be pulled again: never garbage-collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
# The kubelet's defaults, stated because the bed measures them: pod sync every minute (a ConfigMap
# volume refreshes then, or at once when the pod itself changes), ConfigMaps watched.
syncFrequency: 1m
configMapAndSecretChangeDetectionStrategy: Watch
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
# Heartbeat (see lease_seconds in node.sh): the Lease renewed every 2 s.
nodeLeaseDurationSeconds: $lease_seconds
nodeStatusUpdateFrequency: 4s
nodeStatusReportFrequency: 1m
EOF
}

kubelet_healthy() { local h; h="$(in_zone "$1" curl -s http://127.0.0.1:10248/healthz)" && [[ "$h" == ok ]]; }
node_ready() {
  zone_vars "$1"
  local r
  r="$(kubectl get node "$Z_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" && [[ "$r" == True ]]
}

# --- scheduler, kube-proxy --------------------------------------------------------------------

# write_proxy_config FILE HOSTNAME NODEPORT_ADDRESS
write_proxy_config() {
  write_if_changed "$1" <<EOF
# Generated by e2e/testbed/node.sh.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $pki/kube-proxy.kubeconfig}
hostnameOverride: $2
mode: iptables
clusterCIDR: $cluster_cidr
# NodePorts answer on the node address only, never on the machine's other interfaces.
nodePortAddresses: ["$3/32"]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the machine's conntrack table size alone.
conntrack: {maxPerCore: 0, min: 0}
EOF
}

scheduler_healthy() { local h; h="$(curl -sk "https://127.0.0.1:$scheduler_port/healthz")" && [[ "$h" == ok ]]; }
# /livez, not /healthz: the host's kube-proxy has no Node object, and /healthz also reports the
# node's eligibility as a load-balancer target (503 without one).
proxy_healthy() { curl -sf http://127.0.0.1:10256/livez >/dev/null; }
proxy_wait() { wait_proc=kube-proxy-host wait_for "$start_timeout" "healthy (:10256/livez)" proxy_healthy; }
zone_proxy_healthy() { in_zone "$1" curl -sf http://127.0.0.1:10256/healthz >/dev/null; }

# --- cluster DNS -----------------------------------------------------------------------------

# Two replicas in two zones; one where the member has one zone.
dns_replicas=2
((${#ZONES[@]} > 1)) || dns_replicas=1
dns_ready() {
  local n
  n="$(kubectl -n kube-system get deploy coredns -o jsonpath='{.status.readyReplicas}')" && [[ "$n" == "$dns_replicas" ]]
}
# shellcheck source=coredns-members.sh
source "$here/coredns-members.sh"

# --- one zone --------------------------------------------------------------------------------

# zone_up ZONE: the zone's network, containerd (with the images), kubelet and kube-proxy; waits
# for each to be healthy (not for the Node to be Ready: `up` waits for all zones at once).
zone_up() {
  zone_vars "$1"
  local z="$1" ns nd cni_bin
  ns="$Z_NS" nd="$Z_DIR"
  cni_bin="$(node_tool cni_bin_dir)"
  [[ -x "$cni_bin/bridge" ]] || die "missing CNI plugins in '$cni_bin': run 'bash e2e/build/node-tools.sh'"
  zone_net_up "$z"
  write_cni_config "$z"
  write_containerd_config "$z" "$cni_bin"
  start "containerd-$z" "$ns" --config "$nd/containerd.toml"
  wait_proc="containerd-$z" wait_for "$start_timeout" "answering on $Z_SOCK" containerd_up "$z"
  KOO_CONTAINERD_SOCK="$Z_SOCK" bash "$root/e2e/build/images.sh" import

  write_kubelet_config "$z"
  # The last zone is the remote one: the example's controllers keep out of it.
  local labels="koo.io/test-bed=real-node,topology.kubernetes.io/zone=$z,topology.kubernetes.io/region=koo"
  [[ "$z" != "$remote_zone" ]] || labels+=",kafkaobserver.io/remote-zone=true"
  start "kubelet-$z" "$ns" --config="$nd/kubelet.yaml" --kubeconfig="$pki/kubelet-$z.kubeconfig" \
    --root-dir="$nd/kubelet" --cert-dir="$nd/kubelet-pki" \
    --hostname-override="$Z_NODE" --node-ip="$Z_IP" \
    --node-labels="$labels"
  wait_proc="kubelet-$z" wait_for "$start_timeout" "healthy (:10248/healthz in $ns)" kubelet_healthy "$z"

  write_proxy_config "$nd/kube-proxy.yaml" "$Z_NODE" "$Z_IP"
  start "kube-proxy-$z" "$ns" --config="$nd/kube-proxy.yaml"
  wait_proc="kube-proxy-$z" wait_for "$start_timeout" "healthy (:10256/healthz in $ns)" zone_proxy_healthy "$z"
}

up() {
  local t0=$SECONDS z
  mkdir -p "$tb"/{logs,pids} "$tb/node"
  command -v containerd >/dev/null && command -v runc >/dev/null ||
    die "containerd and runc are missing: run 'bash e2e/build/node-packages.sh' (apt-get install)"
  for b in kubelet kube-scheduler kube-proxy kubectl; do
    [[ -x "$k8s_bin/$b" ]] || die "missing $k8s_bin/$b: run 'make k8s-binaries' (e2e/build/k8s.sh)"
  done
  # A bed of the one-node layout: its node is gone for good.
  kubectl delete node koo-node testbed-node --ignore-not-found >/dev/null

  network_up
  # The host's own kube-proxy: the machine (drills, tests, a local operator) reaches ClusterIPs.
  # East's only: two kube-proxies cannot share the host's chains (host tools reach the other
  # members' pods by their IPs). Started first and waited for last: it has no Node object and
  # waits 30 s for one before it proxies (kube-proxy 1.34, whatever its bindAddress), which
  # took half of the nodes' bring-up while everything else waited behind it.
  if [[ "$member" == east ]]; then
    write_proxy_config "$tb/node/kube-proxy-host.yaml" koo-host "$node_ip"
    start kube-proxy-host "" --config="$tb/node/kube-proxy-host.yaml"
  fi
  for z in "${ZONES[@]}"; do zone_up "$z"; done

  start kube-scheduler "" --kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$scheduler_port" --leader-elect=false --profiling=false
  wait_proc=kube-scheduler wait_for "$start_timeout" "healthy (:$scheduler_port/healthz)" scheduler_healthy

  for z in "${ZONES[@]}"; do
    wait_proc="kubelet-$z" wait_for "$start_timeout" "Ready (Node $Z_NODE)" node_ready "$z"
  done

  dns_apply
  wait_for "$start_timeout" "running CoreDNS (kube-system/coredns $dns_replicas replicas Ready)" dns_ready
  # KOO_HOST_PROXY_WAIT=later (multi.sh): the caller waits (`node.sh proxy-wait`) once it has
  # other members' nodes to bring up meanwhile.
  [[ "$member" != east || "${KOO_HOST_PROXY_WAIT:-}" == later ]] || proxy_wait
  log "nodes ${node_names[*]} up in $((SECONDS - t0))s (host $node_ip, pods $cluster_cidr)"
}

# --- zone failures ---------------------------------------------------------------------------

# partition and power_off end their log line with "at_ms=<epoch ms>", the moment of the cut (the
# link down; the kill), which drills take as the outage's start: gathering a zone's process ids
# before the kill takes a second or more.
partition() {
  zone_vars "$1"
  ip link set "$Z_VETH" down
  # shellcheck disable=SC2312 # date does not fail
  log "zone $1 partitioned: link $Z_VETH down, every process inside still running, at_ms=$(date +%s%3N)"
}
heal() { zone_vars "$1"; ip link set "$Z_VETH" up; log "zone $1 healed: link $Z_VETH up"; }

# The pids of every container process of the zone (runc's state root; the cgroup's tasks).
container_pids() {
  local rr="$1" nsroot id pid
  [[ -d "$rr" ]] || return 0
  for nsroot in "$rr"/*; do
    [[ -d "$nsroot" ]] || continue
    for id in $(runc --root "$nsroot" list -q 2>/dev/null || true); do
      runc --root "$nsroot" ps "$id" 2>/dev/null | awk 'NR > 1 {print $2}' || true
      pid="$(sed -n 's/.*"init_process_pid":\([0-9]*\).*/\1/p' "$nsroot/$id/state.json" 2>/dev/null || true)"
      [[ -z "$pid" ]] || echo "$pid"
    done
  done
}

# The shims of one containerd (they outlive a killed containerd).
shim_pids() {
  local sock="$1" proc cmd
  for proc in /proc/[0-9]*; do
    cmd="$(tr '\0' ' ' 2>/dev/null < "$proc/cmdline")" || continue
    [[ "$cmd" == *containerd-shim* && "$cmd" == *"$sock"* ]] && echo "${proc#/proc/}"
  done
  return 0
}

# zone_pids ZONE: every process of the zone, one pid per line, into the array `pids`: kubelet,
# kube-proxy, containerd, the shims and every container process. Best effort: a process that
# exits meanwhile is simply gone (both finders end in `return 0`).
zone_pids() {
  zone_vars "$1"
  local z="$1" name pid found clean=()
  pids=()
  for name in "kubelet-$z" "kube-proxy-$z" "containerd-$z"; do
    pid="$(pid_of "$name")" && pids+=("$pid")
  done
  found="$(shim_pids "$Z_SOCK"; container_pids "$Z_RUNC")"
  mapfile -t -O "${#pids[@]}" pids <<<"$found"
  for pid in "${pids[@]}"; do [[ -n "$pid" ]] && clean+=("$pid"); done
  pids=("${clean[@]}")
}

power_off() {
  zone_vars "$1"
  local z="$1" name pids=()
  # Collected just before the kill.
  zone_pids "$z"
  ((${#pids[@]} > 0)) || die "zone $z: nothing runs there"
  # One kill(1) for all: the zone's processes die together, as in a power loss.
  kill -KILL "${pids[@]}" 2>/dev/null || true
  local at
  at="$(date +%s%3N)"
  ip link set "$Z_VETH" down
  for name in "kubelet-$z" "kube-proxy-$z" "containerd-$z"; do rm -f "$tb/pids/$name.pid"; done
  log "zone $z powered off: ${#pids[@]} processes SIGKILLed at once, link $Z_VETH down, at_ms=$at"
}

power_on() {
  zone_vars "$1"
  local z="$1"
  ip link set "$Z_VETH" up
  zone_up "$z"
  log "zone $z powered on"
}

# slow ZONE RATE [LATENCY]: tbf on both ends of the zone's veth (host side: towards the zone;
# eth0 inside: from it).
slow() {
  zone_vars "$1"
  local z="$1" rate="$2" latency="${3:-400ms}"
  tc qdisc replace dev "$Z_VETH" root tbf rate "$rate" burst 32kbit latency "$latency"
  in_zone "$z" tc qdisc replace dev eth0 root tbf rate "$rate" burst 32kbit latency "$latency"
  log "zone $z slowed: $rate, queue up to $latency, both directions"
}
unslow() {
  zone_vars "$1"
  local z="$1"
  tc qdisc del dev "$Z_VETH" root 2>/dev/null || true
  in_zone "$z" tc qdisc del dev eth0 root 2>/dev/null || true
  log "zone $z: link cap removed"
}

# --- down ------------------------------------------------------------------------------------

# Mount points under PREFIX, deepest first.
mounts_under() {
  awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r
}

kill_containers() {
  local rr="$1" ids id ns_root
  [[ -d "$rr" ]] || return 0
  for ns_root in "$rr"/*; do
    [[ -d "$ns_root" ]] || continue
    ids="$(runc --root "$ns_root" list -q 2>/dev/null || true)"
    for id in $ids; do
      runc --root "$ns_root" kill -a "$id" KILL 2>/dev/null || true
    done
    for id in $ids; do
      for _ in $(seq 20); do
        # shellcheck disable=SC2312 # a failed state read is "not stopped yet": wait on
        [[ "$(runc --root "$ns_root" state "$id" 2>/dev/null | sed -n 's/.*"status": "\(.*\)".*/\1/p')" == stopped ]] && break
        sleep 0.1
      done
      runc --root "$ns_root" delete -f "$id" 2>/dev/null || true
    done
  done
}

# The kubelet's own chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT), and any
# KUBE-* chain kube-proxy --cleanup left, in the host's tables: the rules jumping to them go
# first, then the chains. (A zone's tables go with its namespace.)
remove_kube_chains() {
  local cmd table rule chain
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    for table in filter nat mangle raw; do
      "$cmd" -t "$table" -S >/dev/null 2>&1 || continue
      # shellcheck disable=SC2312 # best-effort cleanup: no rule read is no rule to delete
      while IFS= read -r rule; do
        # shellcheck disable=SC2086
        "$cmd" -t "$table" -D ${rule#-A } 2>/dev/null || true
      done < <("$cmd" -t "$table" -S | grep -E '^-A [A-Z]+ .*-j KUBE-' | grep -vE '^-A KUBE-')
      for chain in $("$cmd" -t "$table" -S | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
        "$cmd" -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$cmd" -t "$table" -S | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
        "$cmd" -t "$table" -X "$chain" 2>/dev/null || log "cannot remove $cmd -t $table chain $chain"
      done
    done
  done
}

# stop_named NAME: the bed process NAME stopped (SIGTERM, SIGKILL after 20 s).
# shellcheck disable=SC2312 # exe_of only prints a path
stop_named() { stop_pid "$tb/pids/$1.pid" "$(exe_of "$1")" "$1" 20; }

zone_down() {
  zone_vars "$1"
  local z="$1" exe crictl ns nd rr pid
  ns="$Z_NS" nd="$Z_DIR" rr="$Z_RUNC"
  in_parallel stop_named "kube-proxy-$z" "kubelet-$z"
  # Through containerd while it runs, so its metadata (in the cache, kept across beds) holds no
  # pod of this bed; then runc for whatever is left (containerd already gone, a shim killed).
  if alive "containerd-$z"; then
    crictl="$(node_tool crictl)"
    [[ -x "$crictl" ]] && "$crictl" --config /dev/null --runtime-endpoint "unix://$Z_SOCK" --timeout 30s \
      rmp --all --force >> "$tb/logs/containerd-$z.log" 2>&1 || true
  fi
  kill_containers "$rr"
  exe="$(exe_of containerd)" || exe=containerd
  stop_pid "$tb/pids/containerd-$z.pid" "$exe" "containerd-$z" 20
  for pid in $(shim_pids "$Z_SOCK"); do kill -KILL "$pid" 2>/dev/null || true; done
  kill_containers "$rr"
  local m
  for m in $(mounts_under "$Z_RUN") $(mounts_under "$nd/kubelet") $(mounts_under "$Z_ROOT"); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
  done
  rm -rf "$nd/cni/ipam" "$Z_RUN"
  # The namespace takes its veth (both ends), its bridge cni0 and its iptables with it.
  if [[ -e "/run/netns/$ns" ]]; then ip netns del "$ns"; log "namespace $ns removed"; fi
  ip link del "$Z_VETH" 2>/dev/null || true
  ip route del "$Z_CIDR" 2>/dev/null || true
}

down() {
  local ns
  in_parallel stop_named kube-proxy-host kube-scheduler
  if [[ "$member" != east ]]; then
    # Another member of the multi-cluster bed: its zones, its address on koo0 and its service
    # route; the bridge, the host's chains and sysctls are east's.
    in_parallel zone_down "${ZONES[@]}"
    ip addr del "$api_ip/24" dev "$bridge" 2>/dev/null || true
    ip route del "$service_cidr" dev "$bridge" 2>/dev/null || true
    rm -f "$tb/node/sysctl.saved"
    return 0
  fi
  # kube-proxy's own cleanup removes its KUBE-* chains and rules from the host's tables.
  if [[ -x "$k8s_bin/kube-proxy" ]]; then
    "$k8s_bin/kube-proxy" --cleanup >> "$tb/logs/kube-proxy-host.log" 2>&1 || true
  fi
  remove_kube_chains
  # Every zone with anything left of it: a namespace, a pid file or a run dir; the zones at once.
  in_parallel zone_down "${ZONES[@]}"
  # A bed of the one-node layout (koo-node, before the zones) may still be up: its leftovers too.
  [[ -d /run/koo-node/runc ]] && kill_containers /run/koo-node/runc
  for m in $(mounts_under /run/koo-node); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  rm -rf /run/koo-node
  # containerd's pod network namespaces (cni-<uuid>): with their veths gone with the zones' namespaces
  # only `lo` is left in them; a namespace that still holds another interface is not ours and stays.
  for ns in /run/netns/cni-*; do
    [[ -e "$ns" ]] || continue
    # shellcheck disable=SC2312 # a namespace whose links cannot be read counts as holding one: kept
    if (($(ip -n "$(basename "$ns")" -o link show 2>/dev/null | grep -vc ': lo:') == 0)); then
      umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
      rm -f "$ns"
    fi
  done
  while iptables -D FORWARD -j KOO-NODE-FORWARD 2>/dev/null; do :; done
  iptables -F KOO-NODE-FORWARD 2>/dev/null && iptables -X KOO-NODE-FORWARD 2>/dev/null
  # Deleting the bridge deletes its routes (the service range's too).
  if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge"; log "bridge $bridge removed"; fi
  if [[ -f "$tb/node/sysctl.saved" ]]; then
    while IFS= read -r kv; do sysctl -qw "$kv" || true; done < "$tb/node/sysctl.saved"
    rm -f "$tb/node/sysctl.saved"
  fi
}

# One line per component. Status text only: a read that fails shows as such, never as a failure.
# shellcheck disable=SC2312
status() {
  local name z
  for name in kube-scheduler kube-proxy-host; do
    if alive "$name"; then printf '%-24s alive (pid %s)\n' "$name" "$(pid_of "$name")"
    else printf '%-24s dead\n' "$name"; fi
  done
  for z in "${ZONES[@]}"; do
    zone_vars "$z"
    for name in "containerd-$z" "kubelet-$z" "kube-proxy-$z"; do
      if alive "$name"; then printf '%-24s alive (pid %s)\n' "$name" "$(pid_of "$name")"
      else printf '%-24s dead\n' "$name"; fi
    done
    printf '%-24s %s, link %s\n' "node $Z_NODE" \
      "$(kubectl get node "$Z_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || echo unknown)" \
      "$(ip -o link show "$Z_VETH" 2>/dev/null | grep -o 'state [A-Z]*' || echo absent)"
  done
}

zone_arg() { [[ -n "${1:-}" ]] || die "usage: node.sh $2 ZONE"; zone_index "$1" >/dev/null; }

case "${1:-}" in
  network-up) network_up ;;
  up) up ;;
  proxy-wait) proxy_wait ;;
  down) down ;;
  status) status ;;
  partition) zone_arg "${2:-}" partition; partition "$2" ;;
  heal) zone_arg "${2:-}" heal; heal "$2" ;;
  power-off) zone_arg "${2:-}" power-off; power_off "$2" ;;
  power-on) zone_arg "${2:-}" power-on; power_on "$2" ;;
  slow) zone_arg "${2:-}" slow; slow "$2" "${3:?rate, e.g. 2mbit}" "${4:-400ms}" ;;
  unslow) zone_arg "${2:-}" unslow; unslow "$2" ;;
  exec) zone_arg "${2:-}" exec; z="$2"; shift 2; in_zone "$z" "$@" ;;
  pids) zone_arg "${2:-}" pids; pids=(); zone_pids "$2"; printf '%s\n' "${pids[@]}" | sort -un ;;
  *) die "usage: node.sh network-up | up | down | status | partition|heal|power-off|power-on|unslow|pids ZONE | slow ZONE RATE [LATENCY] | exec ZONE CMD..." ;;
esac
