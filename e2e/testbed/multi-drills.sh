#!/usr/bin/env bash
# The multi-cluster drills in one command, the last stage of `make test` (e2e/integration.sh;
# about 9 minutes with both beds' changes; docs/multi-cluster.md): the single-cluster bed
# taken down (the two beds share the bed's address ranges), the three-member bed brought up
# (`multi.sh up`), then its drills one after the other: multi-reconcile.sh (the lists across
# members, tie and east lost, manual promotions) and multi-promote.sh (MC1: east lost whole with
# the operator's leader, automatic promotion, every acknowledged record read back; MC3 tie lost
# and MC2 west lost: nothing promoted, the conditions say why), and the
# multi bed taken down again. Each step's time is printed. Usage: multi-drills.sh [MC1_RUNS] (1).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
log_tag="multi-drills" log_time="%T"
runs="${1:-1}"
step() { # name, command...
  local name="$1" t=$SECONDS
  shift
  log "== $name"
  "$@"
  log "== $name: $((SECONDS - t)) s"
}
trap 'bash "$here/multi.sh" down >/dev/null 2>&1 || true' EXIT
step "single-cluster bed down" bash "$here/down.sh"
step "multi-cluster bed up" bash "$here/multi.sh" up
step "multi-reconcile.sh" bash "$here/multi-reconcile.sh" 20
step "multi-promote.sh (MC1, $runs run(s))" bash "$here/multi-promote.sh" "$runs"
step "multi-cluster bed down" bash "$here/multi.sh" down
