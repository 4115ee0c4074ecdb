#!/usr/bin/env bash
# One screen: control plane, stand-in, Kafka nodes, pods.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tb="$root/.testbed"
bash "$here/control-plane.sh" status
bash "$here/standin.sh" status
bash "$here/kafka.sh" status
[[ -f "$tb/kubeconfig" ]] && "$tb/bin/kubectl" get pods -n kafka -o wide 2>/dev/null
exit 0
