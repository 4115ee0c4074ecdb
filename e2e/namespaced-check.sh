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
#      operator's labels) can;
#   3. the multi-cluster remote identity (kafka-observer-remote, docs/multi-cluster.md): get and
#      patch on its member's Lease; the reconciler's calls (observersets get, observersets/status
#      patch, configmaps get/create/patch, pods list/patch), the copies of the leader's Events
#      (events.k8s.io create/patch) and nothing else: no Lease creation, no watch, no delete, no
#      Secrets, core Events or Nodes, nothing in another namespace; the
#      policy limits its pod and ConfigMap writes as it limits the operator's.
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

sets=observersets.kafkaobserver.io
# can_i_as USER NAMESPACE VERB RESOURCE [--subresource=S]: yes or no. For the ObserverSets through
# a SubjectAccessReview that names group and resource itself: `kubectl auth can-i` finds them by
# discovery, and the CRD may not be installed yet at this stage (an unknown resource is "no"
# whatever RBAC grants). NAMESPACE empty: every namespace.
can_i_as() {
  local user="$1" namespace="$2" verb="$3" resource="$4" sub="${5:-}" out
  sub="${sub#--subresource=}"
  if [[ "$resource" != "$sets" ]]; then
    if [[ -n "$namespace" ]]; then kubectl auth can-i --as="$user" -n "$namespace" "$verb" "$resource" ${5:+"$5"} 2>/dev/null
    else kubectl auth can-i --as="$user" --all-namespaces "$verb" "$resource" ${5:+"$5"} 2>/dev/null; fi
    return 0
  fi
  out="$(kubectl create -o jsonpath='{.status.allowed}' -f - <<JSON
{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"$user",
 "groups":["system:serviceaccounts","system:serviceaccounts:$ns","system:authenticated"],
 "resourceAttributes":{"namespace":"$namespace","verb":"$verb","group":"kafkaobserver.io","resource":"observersets","subresource":"$sub"}}}
JSON
)" || { echo error; return 0; }
  if [[ "$out" == true ]]; then echo yes; else echo no; fi
}
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
  for verb_res in "patch pods" "list pods" "get configmaps" "patch configmaps" "create configmaps" "get secrets"; do
    # shellcheck disable=SC2086 # verb and resource as two words
    expect_cannot $verb_res -n "$other"
  done
  if [[ "$(can_i_as "$as" "$other" list "$sets")" == no ]]; then ok "cannot list $sets -n $other"
  else bad "can list $sets -n $other (must not be granted)"; fi
done
for verb_res in "list pods" "watch configmaps" "get secrets" "list nodes"; do
  # shellcheck disable=SC2086
  expect_cannot $verb_res --all-namespaces
done
if [[ "$(can_i_as "$as" "" list "$sets")" == no ]]; then ok "cannot list $sets --all-namespaces"
else bad "can list $sets --all-namespaces (must not be granted)"; fi
if [[ "$(can_i_as "$as" "$ns" list "$sets")" == yes ]]; then ok "can list $sets -n $ns"
else bad "cannot list $sets -n $ns (the Role should grant it)"; fi

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

# 3. The multi-cluster remote identity, this namespace standing in for the member's Kafka namespace.
# The policy is rendered again with the members: it now matches the remote identity too.
"$tb/bin/helm" template "$release" "$chart" --namespace "$ns" --set multiCluster.member=east \
  --set 'multiCluster.members={east,west,tie}' --set "multiCluster.kafkaNamespace=$ns" \
  --set multiCluster.remoteTokenSecret=false --show-only templates/multi-cluster.yaml \
  --show-only templates/admission-policy.yaml > "$work/multi.yaml"
kubectl apply -f "$work/multi.yaml" >/dev/null
remote="system:serviceaccount:$ns:kafka-observer-remote"
remote_can() { can_i_as "$remote" "$ns" "$@"; }
lease=leases.coordination.k8s.io/kafka-observer-operator
for verb in get patch; do
  if [[ "$(remote_can "$verb" "$lease")" == yes ]]; then ok "remote can $verb $lease"; else bad "remote cannot $verb $lease"; fi
done
# What the reconciler calls in another member (templates/multi-cluster.yaml, Role
# <release>-member-reconcile; docs/rbac.md "Multi-cluster").
for verb_res in "get $sets" "patch $sets --subresource=status" "get configmaps" "create configmaps" \
  "patch configmaps" "list pods" "patch pods" "create events.events.k8s.io" "patch events.events.k8s.io"; do
  # shellcheck disable=SC2086 # verb, resource (and flag) as separate words
  if [[ "$(remote_can $verb_res)" == yes ]]; then ok "remote can $verb_res"; else bad "remote cannot $verb_res (the chart should grant it)"; fi
done
for verb_res in "create leases.coordination.k8s.io" "patch leases.coordination.k8s.io/other" "delete $lease" \
  "list leases.coordination.k8s.io" "get secrets" "list secrets" \
  "delete configmaps" "list configmaps" "watch configmaps" "update configmaps" \
  "watch pods" "delete pods" "get pods" "create pods" "update pods" \
  "list $sets" "watch $sets" "patch $sets" "update $sets" "delete $sets" \
  "get $sets --subresource=status" "update $sets --subresource=status" \
  "create events" "list events.events.k8s.io" "delete events.events.k8s.io" "get nodes" "list nodes"; do
  # shellcheck disable=SC2086 # verb, resource (and flag) as separate words
  if [[ "$(remote_can $verb_res)" == no ]]; then ok "remote cannot $verb_res"; else bad "remote can $verb_res (must not be granted)"; fi
done
# Nodes are cluster-scoped: asked without a namespace as well.
for verb in get list; do
  if [[ "$(kubectl auth can-i --as="$remote" "$verb" nodes 2>/dev/null)" == no ]]; then ok "remote cannot $verb nodes (cluster-wide)"
  else bad "remote can $verb nodes (must not be granted)"; fi
done
# Nothing that it may do here may it do in another namespace, nor cluster-wide.
for other in kube-system default; do
  for verb_res in "get $lease" "get $sets" "patch $sets --subresource=status" "get configmaps" "create configmaps" \
    "patch configmaps" "delete configmaps" "list pods" "patch pods" "watch pods" "delete pods" "get secrets" \
    "create events.events.k8s.io"; do
    # shellcheck disable=SC2086 # verb, resource (and flag) as separate words
    if [[ "$(can_i_as "$remote" "$other" $verb_res)" == no ]]; then ok "remote cannot $verb_res in $other"
    else bad "remote can $verb_res in $other (must not be granted)"; fi
  done
done
for verb_res in "get $sets" "get configmaps" "create configmaps" "list pods" "patch pods"; do
  # shellcheck disable=SC2086 # verb and resource as two words
  if [[ "$(can_i_as "$remote" "" $verb_res)" == no ]]; then ok "remote cannot $verb_res --all-namespaces"
  else bad "remote can $verb_res --all-namespaces (must not be granted)"; fi
done
# The same through real calls: the Lease the chart created can be taken, no other Lease made.
if out="$(kubectl --as="$remote" -n "$ns" patch "$lease" --type=merge -p '{"spec":{"holderIdentity":"check"}}' 2>&1)"; then
  ok "remote patched the member's Lease"
else bad "remote could not patch the member's Lease: $out"; fi
if out="$(kubectl --as="$remote" -n "$ns" create -f - 2>&1 <<<'{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"other"}}')"; then
  bad "remote created a Lease"
elif grep -q Forbidden <<<"$out"; then ok "remote cannot create a Lease (Forbidden)"
else bad "creating a Lease as remote failed for another reason: $out"; fi

# The policy holds for the remote identity as for the operator: kubectl reads a pod before it
# patches it, which the remote identity may not (it only lists); the test-only Role of section 2
# grants that read, bound now to it as well (after the can-i checks above).
kubectl -n "$ns" create rolebinding kubectl-reads-remote --role=kubectl-reads --serviceaccount="$ns:kafka-observer-remote" >/dev/null
remote_op() { kubectl --as="$remote" -n "$ns" "$@"; }
remote_refused() { local out; ! out="$(remote_op "$@" 2>&1)" && grep -q "ValidatingAdmissionPolicy" <<<"$out"; }
# The policy's new match is enforced a moment after the update: wait for the first refusal, with
# a label value new at each try, so a try that lands before the policy holds leaves nothing to
# make the next one a no-op.
try=0 deadline=$((SECONDS + 30))
until remote_refused patch pod target -p "{\"metadata\":{\"labels\":{\"remote-check\":\"$((++try))\"}}}"; do
  ((SECONDS < deadline)) || { bad "the policy never refused a label change by the remote identity in 30 s"; break; }
  sleep 1
done
expect_remote_refused() { if remote_refused "$@"; then ok "remote refused by the policy: $*"; else bad "remote not refused by the policy: $*"; fi; }
expect_remote_allowed() { local out; if out="$(remote_op "$@" 2>&1)"; then ok "remote allowed: $*"; else bad "remote refused: $*: $out"; fi; }
expect_remote_refused patch pod target -p "$image"
expect_remote_refused patch pod target -p "$(annotations '"team":"c"')"
expect_remote_allowed patch pod target -p "$(annotations '"kafkaobserver.io/observer-ids-nudged-at":"2026-12-07T00:00:00Z"')"
expect_remote_refused create configmap unowned-remote --from-literal=k=v
expect_remote_refused patch configmap foreign --type=merge -p '{"data":{"k":"x"}}'
owned kafka-observers-controller 2 > "$work/owned-remote.yaml"
expect_remote_allowed create -f "$work/owned-remote.yaml"
# (The retained list of section 2, not the one just created: the garbage collector may delete that
# one at any moment, its owner does not exist.)
expect_remote_allowed patch configmap retained --type=merge -p '{"data":{"k":"x"}}'
# Deleting is not granted at all (RBAC, before the policy).
if out="$(remote_op delete configmap kafka-observers-controller --wait=false 2>&1)"; then bad "remote deleted a ConfigMap"
elif grep -q Forbidden <<<"$out"; then ok "remote cannot delete a ConfigMap (Forbidden)"
else bad "deleting a ConfigMap as remote failed for another reason: $out"; fi

echo "namespaced-check: $fails failure(s)"
exit "$fails"
