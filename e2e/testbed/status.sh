#!/usr/bin/env bash
# One screen: control plane, the real node, the Kafka pods.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/control-plane.sh" status
bash "$here/node.sh" status
bash "$here/kafka.sh" status
exit 0
