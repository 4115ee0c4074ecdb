#!/usr/bin/env bash
# The Debian packages the bed's real node and its image builds need: containerd and runc (the
# container runtime), buildah and debootstrap (images built locally: nothing can be pulled),
# iptables and conntrack (kube-proxy). Installs only what is missing; needs root and the apt mirror.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
declare -A need=([containerd]=containerd [runc]=runc [buildah]=buildah [debootstrap]=debootstrap
                 [iptables]=iptables [conntrack]=conntrack [ip]=iproute2 [curl]=curl)
missing=()
for cmd in "${!need[@]}"; do command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}"); done
if ((${#missing[@]} == 0)); then
  log "all present"
  exit 0
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
# The Debian package would start containerd under systemd where there is one; the bed runs its
# own containerd with its own socket and config, so the packaged service is not needed.
log "installed ${missing[*]}"
