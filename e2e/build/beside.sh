#!/usr/bin/env bash
# The Go builds of the test bed (Kubernetes, etcd and helm; the node tools; promtool), run beside
# make test's cargo stages (fmt, clippy, compile, unit tests) instead of after them: on a cold
# machine they are a large part of the run, and cargo leaves the second core idle for part of its
# time (linking, the one big crate, tests that wait). Each build script takes its own lock and
# skips what its stamps say is built, so a caller that needs one of them meanwhile (alerts-check
# asks for helm and promtool, testbed-up for all) waits for it and then finds it done.
#   beside.sh start   starts them in the background (nice 5, a process group of their own)
#   beside.sh wait    waits for them, prints their log, exits with their status
#   beside.sh stop    stops them if still running (.ci/run's exit trap)
# Not the Maven builds (kafka-jars, kafka-patched): they would share ~/.m2 with patch-unit's Maven.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
log_tag="beside.sh" log_time="%T"
dir="$KOO_CACHE/beside"
pid_file="$dir/pid" rc_file="$dir/rc" log_file="$dir/log"
builds=("k8s.sh" "node-tools.sh" "promtool.sh")

running_pid() { # the pid of a run still going, if any
  local pid
  pid="$(cat "$pid_file" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

stop() {
  local pid
  if pid="$(running_pid)"; then
    kill -- "-$pid" 2>/dev/null || true
    log "stopped the builds beside (pid $pid)"
  fi
  rm -f "$pid_file"
}

case "${1:-}" in
  start)
    mkdir -p "$dir"
    stop
    rm -f "$rc_file"
    # Every descriptor to the log: make's and .ci/run's pipes must not wait for these builds.
    setsid nice -n 5 bash -c '
      rc=0
      for b in "${@:2}"; do
        t=$SECONDS
        bash "$1/$b" || { rc=$?; echo "beside: $b failed (status $rc)"; break; }
        echo "beside: $b done in $((SECONDS - t))s"
      done
      echo "$rc" > "$0"' "$rc_file" "$root/e2e/build" "${builds[@]}" > "$log_file" 2>&1 < /dev/null &
    echo $! > "$pid_file"
    log "started ${builds[*]} beside (pid $!, log $log_file)"
    ;;
  wait)
    [[ -f "$pid_file" ]] || { log "nothing started beside: nothing to wait for"; exit 0; }
    t=$SECONDS
    while running_pid >/dev/null; do sleep 2; done
    rm -f "$pid_file"
    log "the builds beside finished (waited $((SECONDS - t))s here); their log:"
    sed 's/^/  | /' "$log_file"
    rc="$(cat "$rc_file" 2>/dev/null || echo 1)"
    [[ "$rc" == 0 ]] || die "a build beside failed (status $rc): see above"
    ;;
  stop) stop ;;
  *) echo "usage: beside.sh start|wait|stop" >&2; exit 2 ;;
esac
