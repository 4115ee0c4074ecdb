#!/usr/bin/env bash
# The operator installed the way users install it: by its Helm chart (charts/kafka-observer-operator)
# into the bed's cluster, two replicas in pods on the bed's real node, with exactly the chart's
# ServiceAccount and RBAC (no admin kubeconfig, unlike e2e/testbed/operator.sh's local process).
#
# Usage: operator-chart.sh up | down | status
#   up      apply the chart's CRD (server-side, as operator.sh does), then
#           `helm upgrade --install --wait` with the locally built image, then wait until both
#           pods are Ready and one of them holds the leader Lease; prints the time taken.
#           On failure: the pods' `kubectl describe` and the last 50 log lines of each, exit 1.
#   down    `helm uninstall --wait`, then wait until the release's pods are gone. The CRD, the
#           ObserverSets and the Lease object stay (helm never deletes CRDs).
#   rbac    the release with replicaCount 0: the chart's ServiceAccount and RBAC without operator
#           pods, for the local-process operator with the chart's credentials
#           (KOO_OPERATOR_CREDENTIALS=chart e2e/testbed/operator.sh up).
#   status  the release, its pods (ready or not) and the Lease holder.
#
# Environment: KOO_IMAGE_REPOSITORY (default kafka-observer-operator), KOO_IMAGE_TAG (dev),
# KOO_IMAGE_PULL_POLICY (Never: the image must already be in the node's container runtime;
# IfNotPresent also works for a loaded image), KOO_CHART_TIMEOUT (seconds, default 180, for the
# helm install and again for the Lease), KOO_CHART_ARGS (extra helm arguments, e.g.
# "--set logging.level=debug").
#
# The local-process operator (operator.sh) campaigns for the same Lease in the same namespace,
# so `up` refuses to run while it runs: stop it first with `e2e/testbed/operator.sh down`.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

chart="$root/charts/kafka-observer-operator"
ns="kafka-observer-system"
release="kafka-observer-operator"
replicas=2
# The chart's defaults (leaderElection.leaseName, the release-qualified name): with a release
# name that contains the chart name, the chart's full name is the release name.
lease="kafka-observer-operator"
selector="app.kubernetes.io/name=kafka-observer-operator,app.kubernetes.io/instance=$release"
image_repository="${KOO_IMAGE_REPOSITORY:-kafka-observer-operator}"
image_tag="${KOO_IMAGE_TAG:-dev}"
pull_policy="${KOO_IMAGE_PULL_POLICY:-Never}"
timeout="${KOO_CHART_TIMEOUT:-180}"
local_bin="${KOO_OPERATOR_BIN:-$CARGO_TARGET_DIR/release/kafka-observer-operator}"

# The bed's wrapper carries its kubeconfig and helm's config and cache directories.
helm() { "$tb/bin/helm" "$@"; }

now_ms() { date +%s%3N; }
# shellcheck disable=SC2312 # now_ms is date(1); the result is a duration for a message
secs_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

require_bed() {
  [[ -f "$tb/kubeconfig" ]] || die "no test bed at $tb: run 'make testbed-up'"
  [[ -x "$tb/bin/kubectl" ]] || die "no $tb/bin/kubectl: run 'make testbed-up' (control-plane.sh writes it)"
  [[ -x "$tb/bin/helm" ]] || die "no $tb/bin/helm: run 'make testbed-up' (control-plane.sh writes it)"
}

# One line per pod of the release: name|deleting (a timestamp or empty)|Ready status|phase.
pod_lines() {
  kubectl -n "$ns" get pods -l "$selector" -o \
    jsonpath='{range .items[*]}{.metadata.name}{"|"}{.metadata.deletionTimestamp}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"|"}{.status.phase}{"\n"}{end}'
}

# The names of the release's pods that are not being deleted and are Ready, one a line.
ready_pods() {
  local name deleting ready phase
  # shellcheck disable=SC2312 # a probe polled until a deadline: a failed read is "none Ready yet"
  while IFS='|' read -r name deleting ready phase; do
    [[ -n "$name" && -z "$deleting" && "$ready" == True ]] && echo "$name"
  done < <(pod_lines)
  return 0
}

# The release's pods ("pod/NAME" a line); fails when they cannot be listed.
release_pods() { kubectl -n "$ns" get pods -l "$selector" -o name 2>/dev/null; }

holder() { kubectl -n "$ns" get lease "$lease" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }

# What a failed start-up needs: the objects, every pod described, the last 50 log lines of each
# container (and of its previous run, after a restart).
diagnose() {
  log "---- diagnostics (namespace $ns)"
  kubectl -n "$ns" get deployment,replicaset,pods,lease -o wide >&2 || true
  kubectl -n "$ns" describe pods -l "$selector" >&2 || true
  local pod
  for pod in $(kubectl -n "$ns" get pods -l "$selector" -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
    log "---- last 50 log lines of $pod"
    kubectl -n "$ns" logs "$pod" --all-containers --tail=50 >&2 || true
    if kubectl -n "$ns" logs "$pod" --all-containers --previous --tail=1 >/dev/null 2>&1; then
      log "---- last 50 log lines of $pod, previous run (the container restarted)"
      kubectl -n "$ns" logs "$pod" --all-containers --previous --tail=50 >&2 || true
    fi
  done
  local reasons
  reasons="$(kubectl -n "$ns" get pods -l "$selector" \
    -o jsonpath='{.items[*].status.containerStatuses[*].state.waiting.reason}' 2>/dev/null || true)"
  if [[ "$reasons" == *ErrImageNeverPull* || "$reasons" == *ImagePull* ]]; then
    log "hint: the node has no image $image_repository:$image_tag (pullPolicy $pull_policy): load it into the node's container runtime first"
  fi
}

fail() { diagnose; die "$*"; }

up() {
  require_bed
  [[ -d "$chart" ]] || die "no chart at $chart"
  local pid
  if pid="$(live_pid "$tb/pids/operator.pid" "$local_bin")"; then
    die "the local-process operator runs (pid $pid) and campaigns for the same Lease: stop it first with e2e/testbed/operator.sh down"
  fi
  local t0 t_helm t_ready; t0="$(now_ms)"

  # The chart's CRD copy (checked in sync with crds/ and the binary by e2e/chart-check.sh).
  # helm installs a chart's crds/ only when the release is first installed and never updates
  # them, so the bed applies it itself, like operator.sh, and helm skips it.
  kubectl apply --server-side --force-conflicts --field-manager=koo-testbed \
    -f "$chart/crds/observerset.yaml" >/dev/null
  wait_crd observersets.kafkaobserver.io

  log "helm upgrade --install $release (image $image_repository:$image_tag, pullPolicy $pull_policy, $replicas replicas) into $ns"
  # shellcheck disable=SC2312 # message text only
  helm_install "$replicas" || fail "helm upgrade --install failed after $(secs_since "$t0") s"
  t_helm="$(secs_since "$t0")"
  log "helm: release $release deployed after $t_helm s"

  # Both replicas Ready (the standby is ready too) and one of them, not a pod of an earlier
  # install or the local process, holding the Lease.
  local deadline=$((SECONDS + timeout)) ready current count
  while :; do
    ready="$(ready_pods)"
    count="$(grep -c . <<<"$ready" || true)"
    current="$(holder)"
    if ((count == replicas)) && [[ -n "$current" ]] && grep -qxF -- "$current" <<<"$ready"; then break; fi
    if ((SECONDS > deadline)); then
      fail "not up after ${timeout}s: $count/$replicas pods Ready, Lease $ns/$lease held by '${current:-nobody}'"
    fi
    sleep 0.5
  done
  t_ready="$(secs_since "$t0")"
  log "up in $t_ready s (helm --wait $t_helm s): pods ${ready//$'\n'/ } Ready, Lease $ns/$lease held by $current"
}

# helm_install REPLICAS: `helm upgrade --install --wait` of the chart with the local image; helm's
# output on failure.
helm_install() {
  local out
  # shellcheck disable=SC2086
  if ! out="$(helm upgrade --install "$release" "$chart" --namespace "$ns" --create-namespace \
      --skip-crds --wait --timeout "${timeout}s" \
      --set image.repository="$image_repository" --set image.tag="$image_tag" \
      --set image.pullPolicy="$pull_policy" --set replicaCount="$1" \
      --set leaderElection.enabled=true --set logging.format=text \
      --values "$root/e2e/testbed/operator-values.yaml" ${KOO_CHART_ARGS:-} 2>&1)"; then
    printf '%s\n' "$out" >&2
    return 1
  fi
}

rbac_only() {
  require_bed
  helm_install 0 || die "helm upgrade --install (replicaCount 0) failed"
  local deadline=$((SECONDS + timeout)) left
  # A failed list is not "no pods": it is polled again until the deadline.
  until left="$(release_pods)" && [[ -z "$left" ]]; do
    ((SECONDS < deadline)) || die "the release's pods still exist (or cannot be listed) after ${timeout}s"
    sleep 0.5
  done
  log "release $release: ServiceAccount and RBAC only (0 replicas)"
}

down() {
  require_bed
  local t0; t0="$(now_ms)"
  if helm status "$release" --namespace "$ns" >/dev/null 2>&1; then
    helm uninstall "$release" --namespace "$ns" --wait --timeout "${timeout}s" >/dev/null ||
      die "helm uninstall $release failed"
    log "release $release uninstalled"
  else
    log "release $release not installed"
  fi
  local deadline=$((SECONDS + timeout)) left
  # A failed list is not "no pods": it is polled again until the deadline.
  until left="$(release_pods)" && [[ -z "$left" ]]; do
    if ((SECONDS > deadline)); then
      die "pods still there (or not listed) after ${timeout}s: ${left//$'\n'/ }"
    fi
    sleep 0.5
  done
  # shellcheck disable=SC2312 # message text only
  log "down in $(secs_since "$t0") s: no pods left"
}

status() {
  if [[ ! -f "$tb/kubeconfig" || ! -x "$tb/bin/helm" ]]; then echo "operator-chart: no test bed"; return; fi
  if ! helm status "$release" --namespace "$ns" >/dev/null 2>&1; then
    echo "operator-chart: not installed"
    return
  fi
  local name deleting ready phase line="" current
  # shellcheck disable=SC2312 # status text only: a failed read shows no pods
  while IFS='|' read -r name deleting ready phase; do
    [[ -n "$name" ]] || continue
    line+=" $name($phase, ready ${ready:-?}${deleting:+, terminating})"
  done < <(pod_lines)
  current="$(holder)"
  # shellcheck disable=SC2312 # status text only: a failed read shows no revision
  printf 'operator-chart: release %s in %s, revision %s; pods:%s; Lease %s held by %s\n' \
    "$release" "$ns" "$(helm history "$release" --namespace "$ns" --max 1 -o json 2>/dev/null |
      sed -n 's/.*"revision":\([0-9]*\).*/\1/p')" "${line:- none}" "$lease" "${current:-nobody}"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  rbac) rbac_only ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
