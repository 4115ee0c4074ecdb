#!/usr/bin/env bash
# The operator's leadership over the three members of the multi-cluster bed (docs/multi-cluster.md,
# build order step 5; the leader half of drill MC5), with the chart's per-member objects and
# remote identities:
#   - in each member: the CRD, and the chart's multi-cluster objects (`helm template` of
#     templates/multi-cluster.yaml: the Lease in namespace kafka, the kafka-observer-remote
#     ServiceAccount and its Lease-only Role); in each member's kafka-observer-system the
#     kubeconfig Secrets of the two others, each holding a token of that member's
#     kafka-observer-remote (`kubectl create token`), so a replica reaches another member only as
#     that identity;
#   - one operator process per member (`run --member M --members east,west,tie`), as the chart
#     runs it, against its own member's apiserver;
#   - RUNS times: the leader's member lost whole (`multi.sh lose`: control plane and node
#     SIGKILLed, addresses dropped) and its operator SIGKILLed with it; the time until one of
#     the two others leads (its `leader` metric 1, sampled every 50 ms) is the hand-over; at no
#     sample may two replicas lead. Then the member returns and its operator restarts.
# Prints one line per run and the p50. Needs the multi bed up (`multi.sh up`); stops its
# operators and deletes what it created on exit. Usage: multi-leader.sh [RUNS] (default 5).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
log_tag="multi-leader" log_time="%T"
runs="${1:-5}"
work="$(mktemp -d)"
source "$here/multi-operators.sh"
trap members_clean_up EXIT

# 1. Per member: the CRD, the chart's objects, then the others' kubeconfig Secrets.
members_set_up

# 2. One operator per member; wait for exactly one leader.
for m in "${MEMBERS[@]}"; do start_operator "$m"; done
if ! leader="$(wait_one_leader 60)"; then
  tail -n 5 "$east_tb"/logs/operator-*.log >&2 || true
  die "no single leader within 60 s"
fi
log "leader: $leader (operator-$leader holds a majority of the three Leases)"

# 3. The runs.
handovers=() fails=0
for ((run = 1; run <= runs; run++)); do
  leader="$(wait_one_leader 60)" || die "run $run: no single leader to start from"
  lost_out="$(bash "$here/multi.sh" lose "$leader" 2>&1)" || die "run $run: multi.sh lose $leader failed: $lost_out"
  kill_operator KILL "$leader"
  at="${lost_out##*at_ms=}" at="${at%%[!0-9]*}"
  [[ -n "$at" ]] || die "run $run: no at_ms in: $lost_out"
  next="" both=0 deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    found="$(leaders)"
    n="$(count "$found")"
    if ((n > 1)); then both=1; fi
    if [[ -n "$found" ]]; then
      now="$(date +%s%3N)"
      next="${found%%$'\n'*}"
      break
    fi
    sleep 0.05
  done
  if [[ -z "$next" ]]; then
    log "run $run: FAIL lost $leader, no other replica led within 60 s"; fails=$((fails + 1))
  elif ((both)); then
    log "run $run: FAIL two replicas led at once ($found)"; fails=$((fails + 1))
  else
    ms=$((now - at)); handovers+=("$ms")
    log "run $run: lost $leader at_ms=$at; operator-$next leads after ${ms} ms"
  fi
  bash "$here/multi.sh" return "$leader" >/dev/null 2>&1 || die "run $run: multi.sh return $leader failed"
  start_operator "$leader"
  sleep 3
done

if ((${#handovers[@]})); then
  # shellcheck disable=SC2312 # printf of numbers into sort cannot fail
  mapfile -t sorted < <(printf '%s\n' "${handovers[@]}" | sort -n)
  p50="${sorted[$(((${#sorted[@]} - 1) / 2))]}"
  log "hand-over after the leader's member was lost: p50 ${p50} ms over ${#sorted[@]} runs (runs: ${sorted[*]})"
fi
((fails == 0)) || die "$fails run(s) failed"
log "PASS"
