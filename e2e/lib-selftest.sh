#!/usr/bin/env bash
# e2e/lib.sh's helpers that the bed's teardowns rely on, tested without the bed: in_parallel
# fails when any of its jobs fails (a stop that failed must fail the down) and runs the jobs at
# once (each job below waits, up to 10 s, until every job has started: run one after the other,
# the first would time out).
#
#   e2e/lib-selftest.sh      prints "N passed, M failed"; non-zero if M > 0
set -uo pipefail
source "$(dirname "$0")/lib.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

passed=0 failed=0
expect() { # NAME WANT GOT (a status or a count)
  if [[ "$2" == "$3" ]]; then passed=$((passed + 1)); echo "ok   $1"
  else failed=$((failed + 1)); echo "FAIL $1: got $3, expected $2"; fi
}

fails_on_b() { [[ "$1" != b ]]; }
rc=0; in_parallel fails_on_b a b c || rc=$?
expect "in_parallel: one job of three fails -> status 1" 1 "$rc"
rc=0; in_parallel fails_on_b a c || rc=$?
expect "in_parallel: every job succeeds -> status 0" 0 "$rc"
rc=0; in_parallel fails_on_b || rc=$?
expect "in_parallel: no job -> status 0" 0 "$rc"

# barrier NAME: marks this job started, waits for all four to have started, then marks it passed
# (counted below, apart from in_parallel's status).
barrier() {
  touch "$work/started-$1"
  local i n
  for ((i = 0; i < 100; i++)); do
    n="$(find "$work" -maxdepth 1 -name 'started-*' | wc -l)" || return 1
    if ((n == 4)); then touch "$work/passed-$1"; return 0; fi
    sleep 0.1
  done
  return 1
}
rc=0; in_parallel barrier 1 2 3 4 || rc=$?
expect "in_parallel: four jobs that each wait for all four to start -> status 0" 0 "$rc"
through="$(find "$work" -maxdepth 1 -name 'passed-*' | wc -l)"
expect "in_parallel: ... and all four got through their barrier (they ran at once)" 4 "$through"

echo "$passed passed, $failed failed"
((failed == 0))
