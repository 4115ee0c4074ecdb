#!/usr/bin/env bash
# Sourced by the multi-cluster bed's operator drills (multi-leader.sh, multi-reconcile.sh), after
# e2e/lib.sh: the chart's per-member objects and remote identities, and one operator process per
# member (`run --member M --members east,west,tie`, as the chart runs it) against its own
# member's apiserver. The caller sets `work` (a temporary directory) and calls
# `members_clean_up` on exit.
# shellcheck disable=SC2154 # tb, root and k8s_bin come from e2e/lib.sh, work from the caller
east_tb="$tb"
[[ -f "$east_tb/multi" ]] || die "the multi-cluster bed is not up: e2e/testbed/multi.sh up"
bin="${KOO_OPERATOR_BIN:-$CARGO_TARGET_DIR/release/kafka-observer-operator}"
[[ -x "$bin" ]] || die "no operator binary at $bin: make build"
helm="$east_tb/bin/helm"
chart="$root/charts/kafka-observer-operator"
op_ns=kafka-observer-system kafka_ns=kafka
pids_dir="$east_tb/pids"
members_csv="$(IFS=,; echo "${MEMBERS[*]}")"
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"

kc() {
  local dir
  dir="$(member_dir "$1")"
  shift
  "$k8s_bin/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout=5s "$@"
}
port_of() { case "$1" in east) echo 8491 ;; west) echo 8492 ;; tie) echo 8493 ;; esac; }
operator_log() { echo "$east_tb/logs/operator-$1.log"; }
start_operator() {
  local m="$1" dir port gid
  dir="$(member_dir "$m")"
  port="$(port_of "$m")"
  gid="$(member_gid "$m")" || die "no group for member $m"
  # Under its member's group (lib.sh member_gid), so that `multi.sh cut` can cut its links.
  RUST_LOG="${KOO_OPERATOR_LOG:-info}" setpriv --regid "$gid" --clear-groups \
    "$bin" --log-format json run --kubeconfig "$dir/kubeconfig" --watch-namespaces "$kafka_ns" \
    --member "$m" --members "$members_csv" --lease-namespace "$kafka_ns" \
    --operator-namespace "$op_ns" --leader-identity "operator-$m" \
    --metrics-listen "127.0.0.1:$port" >>"$(operator_log "$m")" 2>&1 &
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
wait_one_leader() { # timeout_s: prints the leader
  local deadline=$((SECONDS + $1)) found n
  while ((SECONDS < deadline)); do
    found="$(leaders)"
    n="$(count "$found")"
    if ((n == 1)); then echo "$found"; return 0; fi
    sleep 0.2
  done
  return 1
}

members_clean_up() {
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

# Per member: the CRD, the chart's multi-cluster objects (the Lease, kafka-observer-remote and its
# Roles in the Kafka namespace), then the other members' kubeconfig Secrets, each holding a token
# of that member's kafka-observer-remote, so a replica reaches another member only as that
# identity.
# not_terminating MEMBER: the operator namespace of MEMBER is not being deleted (a previous run's
# clean-up deletes it without waiting).
not_terminating() {
  local phase
  phase="$(kc "$1" get namespace "$op_ns" -o jsonpath='{.status.phase}' 2>/dev/null)" || return 0
  [[ "$phase" != Terminating ]]
}
members_set_up() {
  local m other token server ca
  for m in "${MEMBERS[@]}"; do
    wait_for 60 "namespace $op_ns of member $m deleted by a previous run" not_terminating "$m"
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
        --from-file=kubeconfig="$work/kubeconfig-$m" --dry-run=client -o yaml >"$work/secret-$m-in-$other.yaml"
      kc "$other" apply -f "$work/secret-$m-in-$other.yaml" >/dev/null
    done
  done
  log "each member: CRD, Lease, kafka-observer-remote and its Roles; the others' kubeconfig Secrets"
}
