#!/usr/bin/env bash
# Stop every process the bed started (by pid file only), in reverse order, then check that no
# bed process is left (pid files, and any bed binary whose command line names this .testbed/).
# Usage: down.sh [--purge]   (--purge also drops etcd's data)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
[[ -d "$tb" ]] || { echo "no test bed at $tb"; exit 0; }
# The multi-cluster bed (multi.sh) runs here: its three members come down together.
if [[ -f "$tb/multi" ]]; then bash "$here/multi.sh" down "$@" || exit 1; fi
[[ -f "$here/operator.sh" ]] && bash "$here/operator.sh" down
bash "$here/node.sh" down
bash "$here/control-plane.sh" down "$@"
left=$(for p in "$tb"/pids/*.pid; do live_pid "$p" >/dev/null && echo "$p"; done)
if [[ -n "$left" ]]; then echo "still running: $left"; exit 1; fi
# Not killed here (only pid files are authoritative): reported, so nothing is left unnoticed.
stray=$(for proc in /proc/[0-9]*; do
  cmd="$(tr '\0' ' ' 2>/dev/null < "$proc/cmdline")" || continue
  [[ "$cmd" == *"$tb/"* ]] || continue
  case "$cmd" in
    *kafka.Kafka*|*kube-apiserver*|*kube-controller-manager*|*/etcd\ *|*kafka-observer-operator*|*/kubelet\ *|*kube-scheduler*|*kube-proxy*|*containerd*)
      echo "  pid ${proc#/proc/}: ${cmd:0:160}" ;;
  esac
done)
if [[ -n "$stray" ]]; then printf 'bed processes without a pid file are still running:\n%s\n' "$stray"; exit 1; fi
echo "test bed down: no bed process running"
