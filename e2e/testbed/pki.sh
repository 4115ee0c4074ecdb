#!/usr/bin/env bash
# Create the test bed's PKI with openssl, idempotently: usage e2e/testbed/pki.sh DIR.
# One CA signs everything: the apiserver, etcd and kubelet serving certs, and the client certs of
# the admin (system:masters), the apiserver towards etcd and kubelets, kube-controller-manager,
# kube-scheduler, kube-proxy and the kubelet.
# A new CA (e.g. after deleting ca.key) re-issues every certificate.
set -euo pipefail
# $api_ip, $kubernetes_ip: the apiserver's address on koo0 and its Service's ClusterIP (e2e/lib.sh,
# per member of the multi-cluster bed; each member has a CA of its own, as real clusters do).
source "$(dirname "$0")/../lib.sh"
dir="${1:?usage: pki.sh DIR}"
mkdir -p "$dir"
cd "$dir"
umask 077

# EC P-256 keys: fast to make on a busy machine and accepted by every component.
newkey() { [[ -f "$1.key" ]] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key"; }

if [[ ! -f ca.crt || ! -f ca.key ]]; then
  rm -f ./*.crt ./*.key ./*.srl
  newkey ca
  ca_name=koo-testbed-ca
  [[ "$member" == east ]] || ca_name="koo-$member-ca"
  openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=$ca_name" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out ca.crt 2>/dev/null
fi

# issue NAME SUBJECT EXT_KEY_USAGE [SAN]
issue() {
  local name="$1" subj="$2" eku="$3" san="${4:-}"
  [[ -f "$name.crt" ]] && return
  newkey "$name"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$eku"
    [[ -n "$san" ]] && echo "subjectAltName=$san"
  } > "$name.ext"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

# $kubernetes_ip (10.96.0.1 for the bed) is the `kubernetes` Service address in the service range;
# pods reach the apiserver through it (kube-proxy), so the serving cert names it and the
# apiserver's address. A cert issued before the node existed lacks that address: re-issue it.
if [[ -f apiserver.crt ]] && ! openssl x509 -in apiserver.crt -noout -ext subjectAltName 2>/dev/null |
    grep -q "IP Address:$api_ip\b"; then
  rm -f apiserver.crt
fi
issue apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$kubernetes_ip,IP:$api_ip"
issue etcd-server "/CN=etcd" serverAuth "DNS:localhost,IP:127.0.0.1"
issue apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
issue admin "/O=system:masters/CN=kubernetes-admin" clientAuth
issue kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
# The real nodes, one per zone: kubelet (Node authorizer identity), its serving cert (the apiserver verifies it
# for logs/exec/port-forward), the apiserver's client cert towards kubelets, scheduler, kube-proxy.
for z in "${ZONES[@]}"; do
  # Apart: zone_ip fails on a zone it does not know, which a $(...) in an argument would hide.
  node="$(zone_node "$z")"
  ip="$(zone_ip "$z")" || die "no address for zone $z"
  issue "kubelet-$z" "/O=system:nodes/CN=system:node:$node" clientAuth
  issue "kubelet-serving-$z" "/O=system:nodes/CN=system:node:$node" serverAuth "DNS:$node,IP:$ip"
done
issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
issue kube-scheduler "/CN=system:kube-scheduler" clientAuth
issue kube-proxy "/CN=system:kube-proxy" clientAuth
# The multi-cluster bed: every member's CoreDNS reads this member's Services with it (node.sh,
# member zones; bound to the read-only ClusterRole system:coredns there).
issue dns-reader "/CN=koo-dns-reader" clientAuth

# Service-account token signing key pair (RS256, the issuer's default algorithm).
if [[ ! -f sa.key ]]; then
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
  rm -f sa.pub
fi
[[ -f sa.pub ]] || openssl pkey -in sa.key -pubout -out sa.pub
