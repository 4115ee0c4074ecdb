#!/usr/bin/env bash
# Stop every process the bed started (by pid file only), in reverse order.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tb="$root/.testbed"
[[ -d "$tb" ]] || { echo "no test bed at $tb"; exit 0; }
[[ -f "$here/operator.sh" ]] && bash "$here/operator.sh" down
bash "$here/standin.sh" down
bash "$here/kafka.sh" down
bash "$here/control-plane.sh" down "$@"
left=$(for p in "$tb"/pids/*.pid; do [[ -f $p ]] && kill -0 "$(cat "$p")" 2>/dev/null && echo "$p"; done)
if [[ -n "$left" ]]; then echo "still running: $left"; exit 1; fi
echo "test bed down"
