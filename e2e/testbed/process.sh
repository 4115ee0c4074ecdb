# Shared by the bed's process scripts (control-plane.sh, node.sh, operator.sh, operator-chart.sh):
# starting, waiting for, finding and stopping a process the bed started from its pid file.
# Sourced; the caller defines `log MSG`, `die MSG` and, for wait_healthy, `alive NAME` and $tb.

# live_pid PIDFILE EXE: prints the pid in PIDFILE if that process is alive and runs EXE (also
# when EXE was rebuilt since: the kernel then shows "EXE (deleted)"). A reused pid, or a process
# still in its exec chain (bash, setsid), does not count.
live_pid() {
  local file="$1" exe="$2" pid running
  [[ -f "$file" ]] || return 1
  pid="$(tr -d '[:space:]' < "$file")"
  [[ -n "$pid" ]] || return 1
  running="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  [[ "$running" == "$exe" || "$running" == "$exe (deleted)" ]] || return 1
  echo "$pid"
}

# stop_pid PIDFILE EXE LABEL GRACE_S [SIGNAL]: sends SIGNAL (TERM) to the live process of
# PIDFILE, SIGKILL if it still runs after GRACE_S seconds, then removes PIDFILE. Only that pid is
# ever signalled.
stop_pid() {
  local file="$1" exe="$2" label="$3" grace="$4" sig="${5:-TERM}" pid deadline
  if pid="$(live_pid "$file" "$exe")"; then
    kill "-$sig" "$pid" 2>/dev/null || true
    deadline=$((SECONDS + grace))
    while [[ -e /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.2; done
    if [[ -e /proc/$pid ]]; then
      log "$label (pid $pid) still running after ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 25); do [[ -e /proc/$pid ]] || break; sleep 0.2; done
    fi
    log "$label (pid $pid) stopped (SIG$sig)"
  fi
  rm -f "$file"
}

# start_detached NAME EXE ARGS...: EXE detached in its own session (it outlives the script), output
# appended to $tb/logs/NAME.log, pid in $tb/pids/NAME.pid. Returns once the pid runs EXE: until
# setsid's exec, a liveness check would call the process dead.
start_detached() {
  local name="$1" exe="$2" pid; shift 2
  echo "==== $(date -u +%FT%TZ) starting $name" >> "$tb/logs/$name.log"
  setsid "$exe" "$@" >> "$tb/logs/$name.log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$tb/pids/$name.pid"
  for _ in $(seq 1 50); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]] && break
    sleep 0.1
  done
  log "$name started (pid $pid), log $tb/logs/$name.log"
}

# wait_healthy NAME WHAT TIMEOUT_S COMMAND...: polls COMMAND every second until it succeeds; fails
# naming NAME and its log (with its last lines) when NAME dies or TIMEOUT_S pass.
wait_healthy() {
  local name="$1" what="$2" limit="$3"; shift 3
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ! alive "$name"; then
      tail -n 30 "$tb/logs/$name.log" >&2
      die "$name exited before $what; see $tb/logs/$name.log"
    fi
    if ((SECONDS > deadline)); then
      tail -n 30 "$tb/logs/$name.log" >&2
      die "$name not $what after ${limit}s; see $tb/logs/$name.log"
    fi
    sleep 1
  done
}
