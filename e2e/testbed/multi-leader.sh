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
east_tb="$tb"
[[ -f "$east_tb/multi" ]] || die "the multi-cluster bed is not up: e2e/testbed/multi.sh up"
bin="${KOO_OPERATOR_BIN:-$CARGO_TARGET_DIR/release/kafka-observer-operator}"
[[ -x "$bin" ]] || die "no operator binary at $bin: make build"
helm="$east_tb/bin/helm"
chart="$root/charts/kafka-observer-operator"
op_ns=kafka-observer-system kafka_ns=kafka
work="$(mktemp -d)"
pids_dir="$east_tb/pids"
members_csv="$(IFS=,; echo "${MEMBERS[*]}")"
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"

kc() {
  local dir
  dir="$(member_dir "$1")"
  shift
  "$k8s_bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"
}
port_of() { case "$1" in east) echo 8491 ;; west) echo 8492 ;; tie) echo 8493 ;; esac; }
start_operator() {
  local m="$1" dir port
  dir="$(member_dir "$m")"
  port="$(port_of "$m")"
  RUST_LOG=info "$bin" run --kubeconfig "$dir/kubeconfig" --watch-namespaces "$kafka_ns" \
    --member "$m" --members "$members_csv" --lease-namespace "$kafka_ns" \
    --operator-namespace "$op_ns" --leader-identity "operator-$m" \
    --metrics-listen "127.0.0.1:$port" >>"$east_tb/logs/operator-$m.log" 2>&1 &
  echo $! >"$pids_dir/operator-$m.pid"
  disown
}
kill_operator() { # signal member
  local pid
  pid="$(cat "$pids_dir/operator-$2.pid" 2>/dev/null)" || return 0
  kill "-$1" "$pid" 2>/dev/null || true
  rm -f "$pids_dir/operator-$2.pid"
}
stop_operators() { local m; for m in "${MEMBERS[@]}"; do kill_operator TERM "$m"; done; }
# leads M: 0 when member M's replica reports the leader gauge 1.
leads() {
  local out port
  port="$(port_of "$1")"
  out="$(curl -sf -m 1 "http://127.0.0.1:$port/metrics")" || return 1
  grep -Eq '^[a-z_]*leader 1$' <<<"$out"
}
count() { if [[ -z "$1" ]]; then echo 0; else grep -c . <<<"$1"; fi; }
leaders() { local m; for m in "${MEMBERS[@]}"; do if leads "$m"; then echo "$m"; fi; done; }

clean_up() {
  stop_operators
  local m
  for m in "${MEMBERS[@]}"; do
    kc "$m" delete namespace "$op_ns" --wait=false >/dev/null 2>&1 || true
    if [[ -s "$work/objects-$m.yaml" ]]; then
      kc "$m" delete -f "$work/objects-$m.yaml" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$work"
}
trap clean_up EXIT

# 1. Per member: the CRD, the chart's objects, then the others' kubeconfig Secrets.
for m in "${MEMBERS[@]}"; do
  kc "$m" apply --server-side --force-conflicts -f "$root/crds/observerset.yaml" >/dev/null
  kc "$m" get namespace "$op_ns" >/dev/null 2>&1 || kc "$m" create namespace "$op_ns" >/dev/null
  "$helm" template "koo-$m" "$chart" --namespace "$op_ns" --set "multiCluster.member=$m" \
    --set "multiCluster.members={$members_csv}" --set "multiCluster.kafkaNamespace=$kafka_ns" \
    --set multiCluster.remoteTokenSecret=false --show-only templates/multi-cluster.yaml >"$work/objects-$m.yaml"
  kc "$m" apply -f "$work/objects-$m.yaml" >/dev/null
done
for m in "${MEMBERS[@]}"; do
  token="$(kc "$m" -n "$kafka_ns" create token kafka-observer-remote --duration 1h)"
  server="$(kc "$m" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')"
  ca="$(kc "$m" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  [[ -n "$token" && -n "$server" && -n "$ca" ]] || die "member $m: no token, server or CA"
  cat >"$work/kubeconfig-$m" <<YAML
apiVersion: v1
kind: Config
current-context: $m
clusters: [{name: $m, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
contexts: [{name: $m, context: {cluster: $m, user: kafka-observer-remote, namespace: $kafka_ns}}]
users: [{name: kafka-observer-remote, user: {token: "$token"}}]
YAML
  for other in "${MEMBERS[@]}"; do
    [[ "$other" != "$m" ]] || continue
    kc "$other" -n "$op_ns" create secret generic "kafka-observer-member-$m" \
      --from-file=kubeconfig="$work/kubeconfig-$m" --dry-run=client -o yaml | kc "$other" apply -f - >/dev/null
  done
done
log "each member: CRD, Lease, kafka-observer-remote and its Role; the others' kubeconfig Secrets"

# 2. One operator per member; wait for exactly one leader.
for m in "${MEMBERS[@]}"; do start_operator "$m"; done
wait_one_leader() { # timeout_s: prints the leader
  local deadline=$((SECONDS + $1)) found
  while ((SECONDS < deadline)); do
    found="$(leaders)"
    n="$(count "$found")"
    if ((n == 1)); then echo "$found"; return 0; fi
    sleep 0.2
  done
  return 1
}
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
