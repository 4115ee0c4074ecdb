#!/usr/bin/env bash
# The chart's namespaced install and ValidatingAdmissionPolicy against the bed's apiserver, with
# no operator running: renders the chart (release koo-ns-check-<pid>, watchNamespaces [its own
# namespace]) and applies only its ServiceAccount, RBAC and policy, then acts as the operator's
# ServiceAccount (kubectl --as) to check
#   1. RBAC: pods, ConfigMaps and Secrets granted in the watched namespace and nowhere else
#      (kafka, kube-system, cluster-wide), Nodes get only;
#   2. the policy: a pod's image, a label or a foreign annotation cannot change, a
#      kafkaobserver.io/ annotation can; a ConfigMap no ObserverSet owns cannot be created,
#      patched, adopted or deleted, one an ObserverSet owns (or one retained with the
#      operator's labels) can.
# Everything it creates (a namespace, a ClusterRole and its binding, the policy and its
# binding) is deleted on exit. Touches no other namespace. Exit status: the number of failures.
# Environment: KOO_TESTBED (default .testbed of this checkout).
# shellcheck disable=SC2312 # each $(...) here feeds a comparison or a patch body that fails the check when it fails
set -euo pipefail
source "$(dirname "$0")/lib.sh"
tb="${KOO_TESTBED:-$tb}"
chart="$root/charts/kafka-observer-operator"
release="koo-ns-check-$$"
ns="$release"
work="$(mktemp -d)"
fails=0
ok() { echo "namespaced-check: ok   $*"; }
bad() { echo "namespaced-check: FAIL $*"; fails=$((fails + 1)); }

[[ -f "$tb/kubeconfig" && -x "$tb/bin/helm" ]] || die "no test bed at $tb"
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"
rendered="$work/rendered.yaml"
"$tb/bin/helm" template "$release" "$chart" --namespace "$ns" --set "watchNamespaces={$ns}" \
  --show-only templates/serviceaccount.yaml --show-only templates/clusterrole.yaml \
  --show-only templates/namespace-roles.yaml --show-only templates/admission-policy.yaml \
  > "$rendered"
sa="$(sed -n 's/^  name: //p' "$rendered" | head -n1)"
as="system:serviceaccount:$ns:$sa"

clean_up() {
  kubectl delete -f "$rendered" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap clean_up EXIT

kubectl create namespace "$ns" >/dev/null
kubectl apply -f "$rendered" >/dev/null
op() { kubectl --as="$as" -n "$ns" "$@"; }

# 1. RBAC: what the namespaced install grants, and nothing cluster-wide.
can() { kubectl auth can-i --as="$as" "$@" 2>/dev/null; }
expect_can() { if [[ "$(can "$@")" == yes ]]; then ok "can $*"; else bad "cannot $* (the Role should grant it)"; fi; }
expect_cannot() { if [[ "$(can "$@")" == no ]]; then ok "cannot $*"; else bad "can $* (must not be granted)"; fi; }
expect_can patch pods -n "$ns"
expect_can watch pods -n "$ns"
expect_can create configmaps -n "$ns"
expect_can delete configmaps -n "$ns"
expect_can get secrets -n "$ns"
expect_can get nodes
for other in kafka kube-system default; do
  for verb_res in "patch pods" "list pods" "get configmaps" "patch configmaps" "create configmaps" "get secrets" "list observersets.kafkaobserver.io"; do
    # shellcheck disable=SC2086 # verb and resource as two words
    expect_cannot $verb_res -n "$other"
  done
done
for verb_res in "list pods" "watch configmaps" "get secrets" "list observersets.kafkaobserver.io" "list nodes"; do
  # shellcheck disable=SC2086
  expect_cannot $verb_res --all-namespaces
done

# 2. The policy. A pod that never runs (no node matches) is enough for admission.
kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: target, labels: {app.kubernetes.io/name: kafka}, annotations: {team: a}}
spec:
  nodeSelector: {koo-ns-check: nowhere}
  containers: [{name: kafka, image: registry.k8s.io/pause:3.10}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: foreign}
data: {k: v}
YAML
# kubectl reads a pod before it patches it; the operator does not (it has no `get`). A
# test-only Role grants that read, so the patches below reach the policy.
kubectl -n "$ns" create role kubectl-reads --verb=get --resource=pods >/dev/null
kubectl -n "$ns" create rolebinding kubectl-reads --role=kubectl-reads --serviceaccount="$ns:$sa" >/dev/null
# The operator patches pods (it has no `get`), as here. A policy is
# enforced a moment after it is created: wait until the first refusal shows up.
image='{"spec":{"containers":[{"name":"kafka","image":"registry.k8s.io/pause:3.9"}]}}'
refused() { local out; ! out="$(op "$@" 2>&1)" && grep -q "ValidatingAdmissionPolicy" <<<"$out"; }
deadline=$((SECONDS + 30))
until refused patch pod target -p "$image"; do
  ((SECONDS < deadline)) || { bad "the policy never refused an image change in 30 s"; break; }
  sleep 1
done
expect_refused() { if refused "$@"; then ok "refused by the policy: $*"; else bad "not refused by the policy: $*"; fi; }
expect_allowed() { local out; if out="$(op "$@" 2>&1)"; then ok "allowed: $*"; else bad "refused: $*: $out"; fi; }
annotations() { printf '{"metadata":{"annotations":{%s}}}' "$1"; }

expect_refused patch pod target -p "$image"
expect_refused patch pod target -p '{"metadata":{"labels":{"extra":"1"}}}'
expect_refused patch pod target -p "$(annotations '"team":"b"')"
expect_refused patch pod target -p "$(annotations '"team":null')"
expect_refused patch pod target -p "$(annotations '"other.io/x":"1"')"
expect_refused patch pod target -p "$(annotations '"kafkaobserver.io/observer-ids-revision":"9","team":"b"')"
expect_allowed patch pod target -p "$(annotations '"kafkaobserver.io/observer-ids-nudged-at":"2026-12-05T00:00:00Z"')"
expect_allowed patch pod target -p "$(annotations '"kafkaobserver.io/observer-ids-nudged-at":null')"

owned() {
  cat <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: $1
  ownerReferences: [{apiVersion: kafkaobserver.io/v1alpha1, kind: ObserverSet, name: kafka, uid: 00000000-0000-0000-0000-00000000000$2}]
data: {observer.ids: "4"}
YAML
}
expect_refused create configmap unowned --from-literal=k=v
expect_refused patch configmap foreign --type=merge -p '{"data":{"k":"w"}}'
# Adopting a foreign ConfigMap by adding an owner reference is refused too.
expect_refused patch configmap foreign --type=merge -p '{"metadata":{"ownerReferences":[{"apiVersion":"kafkaobserver.io/v1alpha1","kind":"ObserverSet","name":"kafka","uid":"00000000-0000-0000-0000-000000000001"}]}}'
expect_refused delete configmap foreign --wait=false
owned kafka-observers-broker 1 > "$work/owned.yaml"
expect_allowed create -f "$work/owned.yaml"
expect_allowed patch configmap kafka-observers-broker --type=merge -p '{"data":{"observer.ids":"5"}}'
expect_allowed delete configmap kafka-observers-broker --wait=false
# A list retained earlier (owner reference removed, the operator's labels kept) may be taken
# back; a foreign ConfigMap with only one of the labels may not.
kubectl -n "$ns" create configmap retained --from-literal=k=v >/dev/null
kubectl -n "$ns" label configmap retained app.kubernetes.io/managed-by=kafka-observer-operator kafkaobserver.io/observerset=kafka >/dev/null
kubectl -n "$ns" label configmap foreign app.kubernetes.io/managed-by=kafka-observer-operator >/dev/null
expect_refused patch configmap foreign --type=merge -p '{"data":{"k":"w"}}'
expect_allowed patch configmap retained --type=merge -p '{"data":{"k":"w"}}'

echo "namespaced-check: $fails failure(s)"
exit "$fails"
