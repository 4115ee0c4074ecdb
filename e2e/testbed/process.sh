# Shared by the bed's process scripts (control-plane.sh, standin.sh, operator.sh): finding and
# stopping a process the bed started from its pid file. Sourced; the caller defines `log MSG`.

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
