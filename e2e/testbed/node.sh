#!/usr/bin/env bash
# The bed's real Kubernetes node `koo-node`: containerd + runc (Debian packages), the kubelet,
# kube-scheduler and kube-proxy (built by e2e/build/k8s.sh), the CNI bridge plugin (built by
# e2e/build/node-tools.sh), the locally built images and cluster DNS (CoreDNS).
#
#   node.sh network-up   the node address: bridge koo0 holding $KOO_NODE_IP/24 (control-plane.sh
#                        calls it before the apiserver binds that address)
#   node.sh up           network-up, then containerd, images, kubelet, scheduler, kube-proxy, DNS;
#                        waits until the Node is Ready and CoreDNS answers
#   node.sh down         stops every component, kills every container of the node's containerd
#                        (even with containerd gone), unmounts, removes veths, netns, iptables
#                        chains, the bridge, and restores the sysctls it changed
#   node.sh status       one line per component
#
# Everything stays on this machine: the node address and the pod subnet exist only on koo0;
# kube-proxy serves NodePorts on the node address only.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"

pki="$tb/pki"
# The cached binary itself, not the wrapper in .testbed/bin.
kubectl_bin="$k8s_bin/kubectl"
pod_cidr="${KOO_POD_CIDR:-10.214.0.0/24}"
bridge="koo0"
service_cidr="10.96.0.0/16"
cluster_dns="10.96.0.10"
# containerd's runtime state lives on tmpfs (/run), its root (images, snapshots) in the cache: the
# images cannot be pulled again, so they survive a testbed-down.
run_dir="/run/koo-node"
sock="$run_dir/containerd.sock"
ctrd_root="$KOO_CACHE/node/containerd"
runc_root="$run_dir/runc"
node_dir="$tb/node"
kubelet_root="$node_dir/kubelet"
start_timeout="${KOO_NODE_TIMEOUT:-180}"
procs=(containerd kubelet kube-scheduler kube-proxy)

exe_of() {
  case "$1" in
    containerd) command -v containerd ;;
    *) echo "$k8s_bin/$1" ;;
  esac
}
# node_tool KEY: a path from `node-tools.sh paths` (cni_bin_dir, crictl, coredns).
node_tool() { bash "$root/e2e/build/node-tools.sh" paths 2>/dev/null | sed -n "s/^$1=//p"; }
ctr() { command ctr --address "$sock" --namespace k8s.io "$@"; }

# start NAME ARGS...: NAME's binary, unless it already runs.
start() {
  local name="$1" exe; shift
  exe="$(exe_of "$name")"
  if alive "$name"; then log "$name already running (pid $(pid_of "$name"))"; return; fi
  [[ -x "$exe" ]] || die "$name: missing $exe"
  start_detached "$name" "$exe" "$@"
}

# write_if_changed FILE < content: kube-proxy exits when its config file is written to while it
# runs, even with the same content, so a second `up` touches nothing that did not change.
write_if_changed() {
  local file="$1"
  cat > "$file.new"
  if cmp -s "$file.new" "$file"; then rm -f "$file.new"; else mv -f "$file.new" "$file"; fi
}

# --- network ---------------------------------------------------------------------------------

# Sysctls the node needs; the previous values are kept in node/sysctl.saved for `down`.
sysctls=(net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1)

network_up() {
  mkdir -p "$node_dir"
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    log "bridge $bridge created"
  fi
  # Read whole, then matched: with pipefail, `ip addr show | grep -q` fails when grep exits
  # before ip has written everything (SIGPIPE), and the add then reports "Address already
  # assigned" (seen in D5's apiserver restart under load).
  local addrs
  addrs="$(ip -4 addr show dev "$bridge")"
  [[ "$addrs" == *"inet $node_ip/"* ]] || ip addr add "$node_ip/${pod_cidr#*/}" dev "$bridge"
  ip link set "$bridge" up
  if [[ ! -f "$node_dir/sysctl.saved" ]]; then
    local kv
    for kv in "${sysctls[@]}"; do echo "${kv%%=*}=$(sysctl -n "${kv%%=*}")"; done > "$node_dir/sysctl.saved"
  fi
  local kv
  for kv in "${sysctls[@]}"; do sysctl -qw "$kv"; done
  # Service addresses go to koo0, not the default route: a packet to a ClusterIP that kube-proxy
  # has no rule for (yet) dies here instead of leaving the machine.
  ip route replace "$service_cidr" dev "$bridge"
  # Pods talk to each other, to Services and to the node, never beyond: forwarded traffic from
  # koo0 to any other interface is refused.
  iptables -N KOO-NODE-FORWARD 2>/dev/null || iptables -F KOO-NODE-FORWARD
  iptables -A KOO-NODE-FORWARD -i "$bridge" ! -o "$bridge" -j REJECT
  iptables -C FORWARD -j KOO-NODE-FORWARD 2>/dev/null || iptables -I FORWARD 1 -j KOO-NODE-FORWARD
}

write_cni_config() {
  local dir="$node_dir/cni/net.d"
  mkdir -p "$dir" "$node_dir/cni/ipam"
  # The bridge plugin attaches each pod's veth to koo0 (the node address is the pods' gateway);
  # no masquerade: pod traffic never leaves the machine.
  write_if_changed "$dir/10-koo.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "koo-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$node_dir/cni/ipam",
        "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip", "rangeStart": "${pod_cidr%.*/*}.10"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

# --- containerd ------------------------------------------------------------------------------

write_containerd_config() {
  local cni_bin="$1"
  mkdir -p "$node_dir" "$ctrd_root" "$run_dir"
  write_if_changed "$node_dir/containerd.toml" <<EOF
# Generated by e2e/testbed/node.sh.
version = 2
root = "$ctrd_root"
state = "$run_dir/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$run_dir/containerd.sock.ttrpc"
[debug]
  address = "$run_dir/containerd-debug.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node_dir/opt"
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
        BinaryName = "$(command -v runc)"
        # Our own runc state root, so down.sh finds (and kills) every container even when
        # containerd and its shims are gone.
        Root = "$runc_root"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$node_dir/cni/net.d"
EOF
}

containerd_up() {
  ctr version
}

# --- kubelet ---------------------------------------------------------------------------------

write_kubelet_config() {
  mkdir -p "$kubelet_root"
  write_if_changed "$node_dir/kubelet.yaml" <<EOF
# Generated by e2e/testbed/node.sh.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$sock
# Container logs inside the bed (not /var/log/pods): the bed leaves nothing outside .testbed/.
podLogsDir: $node_dir/pod-logs
# This machine: cgroup v1 ("hybrid"), no systemd, swap allowed.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
clusterDNS: [$cluster_dns]
clusterDomain: cluster.local
podCIDR: $pod_cidr
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
EOF
}

kubelet_healthy() { [[ "$(curl -s http://127.0.0.1:10248/healthz)" == ok ]]; }
node_ready() {
  [[ "$(kubectl get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}

# --- scheduler, kube-proxy --------------------------------------------------------------------

write_proxy_config() {
  write_if_changed "$node_dir/kube-proxy.yaml" <<EOF
# Generated by e2e/testbed/node.sh.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $pki/kube-proxy.kubeconfig}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $pod_cidr
# NodePorts answer on the node address only, never on the machine's other interfaces.
nodePortAddresses: ["$node_ip/32"]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the machine's conntrack table size alone.
conntrack: {maxPerCore: 0, min: 0}
EOF
}

scheduler_healthy() { [[ "$(curl -sk https://127.0.0.1:10259/healthz)" == ok ]]; }
proxy_healthy() { curl -sf http://127.0.0.1:10256/healthz >/dev/null; }

# --- cluster DNS -----------------------------------------------------------------------------

dns_ready() {
  [[ "$(kubectl -n kube-system get deploy coredns -o jsonpath='{.status.readyReplicas}')" == 1 ]]
}

up() {
  local t0=$SECONDS
  mkdir -p "$tb"/{logs,pids} "$node_dir"
  command -v containerd >/dev/null && command -v runc >/dev/null ||
    die "containerd and runc are missing: run 'bash e2e/build/node-packages.sh' (apt-get install)"
  for b in kubelet kube-scheduler kube-proxy kubectl; do
    [[ -x "$k8s_bin/$b" ]] || die "missing $k8s_bin/$b: run 'make k8s-binaries' (e2e/build/k8s.sh)"
  done
  local cni_bin
  cni_bin="$(node_tool cni_bin_dir)"
  [[ -x "$cni_bin/bridge" ]] || die "missing CNI plugins in '$cni_bin': run 'bash e2e/build/node-tools.sh'"

  network_up
  write_cni_config
  write_containerd_config "$cni_bin"
  start containerd --config "$node_dir/containerd.toml"
  wait_proc=containerd wait_for "$start_timeout" "answering on $sock" containerd_up

  KOO_CONTAINERD_SOCK="$sock" bash "$root/e2e/build/images.sh" import

  write_kubelet_config
  start kubelet --config="$node_dir/kubelet.yaml" --kubeconfig="$pki/kubelet.kubeconfig" \
    --root-dir="$kubelet_root" --cert-dir="$node_dir/kubelet-pki" \
    --hostname-override="$node_name" --node-ip="$node_ip" \
    --node-labels=koo.io/test-bed=real-node
  wait_proc=kubelet wait_for "$start_timeout" "healthy (:10248/healthz)" kubelet_healthy

  start kube-scheduler --kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$pki/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
  wait_proc=kube-scheduler wait_for "$start_timeout" "healthy (:10259/healthz)" scheduler_healthy

  write_proxy_config
  start kube-proxy --config="$node_dir/kube-proxy.yaml"
  wait_proc=kube-proxy wait_for "$start_timeout" "healthy (:10256/healthz)" proxy_healthy

  wait_proc=kubelet wait_for "$start_timeout" "Ready (Node $node_name)" node_ready
  # A bed of an older layout registered a Node for its kubelet stand-in: gone for good.
  kubectl delete node testbed-node --ignore-not-found >/dev/null

  kubectl apply -f "$here/manifests/coredns.yaml" >/dev/null
  # CoreDNS is checked through the kubelet that runs it.
  wait_proc=kubelet wait_for "$start_timeout" "running CoreDNS (kube-system/coredns Ready)" dns_ready
  log "node $node_name up in $((SECONDS - t0))s (address $node_ip, pods $pod_cidr)"
}

# --- down ------------------------------------------------------------------------------------

# Mount points under PREFIX, deepest first.
mounts_under() {
  awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r
}

kill_containers() {
  local ids id
  [[ -d "$runc_root" ]] || return 0
  for ns_root in "$runc_root"/*; do
    [[ -d "$ns_root" ]] || continue
    ids="$(runc --root "$ns_root" list -q 2>/dev/null || true)"
    for id in $ids; do
      runc --root "$ns_root" kill -a "$id" KILL 2>/dev/null || true
    done
    for id in $ids; do
      for _ in $(seq 20); do
        [[ "$(runc --root "$ns_root" state "$id" 2>/dev/null | sed -n 's/.*"status": "\(.*\)".*/\1/p')" == stopped ]] && break
        sleep 0.1
      done
      runc --root "$ns_root" delete -f "$id" 2>/dev/null || true
    done
  done
}

# The kubelet's own chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT), and any
# KUBE-* chain kube-proxy --cleanup left: the rules jumping to them go first, then the chains.
remove_kube_chains() {
  local cmd table rule chain
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    for table in filter nat mangle raw; do
      "$cmd" -t "$table" -S >/dev/null 2>&1 || continue
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

# The shims of this containerd (they outlive a killed containerd).
kill_shims() {
  local proc cmd
  for proc in /proc/[0-9]*; do
    cmd="$(tr '\0' ' ' 2>/dev/null < "$proc/cmdline")" || continue
    [[ "$cmd" == *containerd-shim* && "$cmd" == *"$sock"* ]] && kill -KILL "${proc#/proc/}" 2>/dev/null
  done
  return 0
}

down() {
  local name
  for name in kube-proxy kube-scheduler kubelet; do
    stop_pid "$tb/pids/$name.pid" "$(exe_of "$name")" "$name" 20
  done
  # kube-proxy's own cleanup removes its KUBE-* chains and rules.
  if [[ -x "$k8s_bin/kube-proxy" ]]; then
    "$k8s_bin/kube-proxy" --cleanup >> "$tb/logs/kube-proxy.log" 2>&1 || true
  fi
  remove_kube_chains
  # Through containerd while it runs, so its metadata (in the cache, kept across beds) holds no
  # pod of this bed; then runc for whatever is left (containerd already gone, a shim killed).
  if alive containerd; then
    local crictl
    crictl="$(node_tool crictl)"
    [[ -x "$crictl" ]] && "$crictl" --config /dev/null --runtime-endpoint "unix://$sock" --timeout 30s \
      rmp --all --force >> "$tb/logs/containerd.log" 2>&1 || true
  fi
  kill_containers
  stop_pid "$tb/pids/containerd.pid" "$(exe_of containerd)" containerd 20
  kill_shims
  kill_containers
  # Pod network namespaces (containerd's CNI netns mounts), their veths with them.
  local veth ns m
  for veth in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$veth" 2>/dev/null || true
  done
  for m in $(mounts_under "$run_dir") $(mounts_under "$kubelet_root") $(mounts_under "$ctrd_root"); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
  done
  # containerd's pod network namespaces (cni-<uuid>): with their veths deleted above only `lo`
  # is left in them; a namespace that still holds another interface is not ours and stays.
  for ns in /run/netns/cni-*; do
    [[ -e "$ns" ]] || continue
    if (($(ip -n "$(basename "$ns")" -o link show 2>/dev/null | grep -vc ': lo:') == 0)); then
      umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
      rm -f "$ns"
    fi
  done
  rm -rf "$node_dir/cni/ipam" "$run_dir"
  while iptables -D FORWARD -j KOO-NODE-FORWARD 2>/dev/null; do :; done
  iptables -F KOO-NODE-FORWARD 2>/dev/null && iptables -X KOO-NODE-FORWARD 2>/dev/null
  # Deleting the bridge deletes its routes (the service range's too).
  if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge"; log "bridge $bridge removed"; fi
  if [[ -f "$node_dir/sysctl.saved" ]]; then
    while IFS= read -r kv; do sysctl -qw "$kv" || true; done < "$node_dir/sysctl.saved"
    rm -f "$node_dir/sysctl.saved"
  fi
}

status() {
  local name
  for name in "${procs[@]}"; do
    if alive "$name"; then printf '%-24s alive (pid %s)\n' "$name" "$(pid_of "$name")"
    else printf '%-24s dead\n' "$name"; fi
  done
  printf '%-24s %s\n' "node $node_name" \
    "$(kubectl get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || echo unknown)"
}

case "${1:-}" in
  network-up) network_up ;;
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: node.sh network-up | up | down | status" ;;
esac
