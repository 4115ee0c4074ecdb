#!/usr/bin/env bash
# Helm chart validation against the real bed (run by e2e/integration.sh):
#   1. the chart's CRD copy equals crds/observerset.yaml and what the operator binary prints;
#   2. helm lint --strict (values.schema.json included) and helm template of several value sets;
#      the default rendering's RBAC rules equal the list below (the calls the code makes, see
#      docs/rbac.md), so a permission cannot come back unnoticed;
#   3. values.schema.json rejects bad values (each case must fail with the offending key named);
#   4. kubectl apply --dry-run=server of every rendering (CRD included) against the bed's
#      apiserver: admission, schema and RBAC validation by a real kube-apiserver.
# KOO_TESTBED=off: steps 1-3 only (helm needs no cluster), the dry-run is skipped with a line.
# Otherwise nothing is skipped: a missing helm, operator binary, bed or kubectl is a failure.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
tb="${KOO_TESTBED:-$tb}"
chart="$root/charts/kafka-observer-operator"
ns="koo-chart-check-$$"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "chart-check: ok   $*"; }
bad() { echo "chart-check: FAIL $*"; fails=$((fails + 1)); }

helm="$tb/bin/helm"
[[ -x "$helm" ]] || helm="$helm_bin"
[[ -x "$helm" ]] || { echo "chart-check: no helm at $helm: run make k8s-binaries"; exit 1; }
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"

# 1. CRD copies in sync.
if cmp -s "$root/crds/observerset.yaml" "$chart/crds/observerset.yaml"; then ok "chart CRD == crds/observerset.yaml"
else bad "charts/kafka-observer-operator/crds/observerset.yaml differs from crds/observerset.yaml: run make crds"; fi
bin="$CARGO_TARGET_DIR/release/kafka-observer-operator"
if [[ ! -x "$bin" ]]; then bad "no operator binary at $bin to compare the chart's CRD with: run make build"
elif "$bin" crd | cmp -s - "$chart/crds/observerset.yaml"; then ok "chart CRD == \`kafka-observer-operator crd\`"
else bad "the chart's CRD is stale against the binary: run make crds"; fi

# 2. lint and template.
if out=$("$helm" lint --strict "$chart" 2>&1); then ok "helm lint --strict"; else bad "helm lint --strict:"$'\n'"$out"; fi
declare -A variants=(
  [defaults]=""
  [single-replica]="--set replicaCount=1 --set leaderElection.enabled=false --set podDisruptionBudget.enabled=false"
  [text-no-service]="--set logging.format=text --set metrics.service.enabled=false"
  [local-image]="--set image.repository=kafka-observer-operator --set image.tag=dev --set image.pullPolicy=Never --set replicaCount=2"
  [existing-sa]="--set serviceAccount.create=false --set serviceAccount.name=koo-sa --set rbac.create=false"
  [monitoring]="--set metrics.serviceMonitor.enabled=true --set prometheusRule.enabled=true --set dashboard.enabled=true"
  # Namespaces that exist on the bed, so the server-side dry run below can create the Roles.
  [secret-namespaces]="--set rbac.secretNamespaces={default,kube-public}"
  [no-secrets]="--set rbac.readSecrets=false"
  [cluster-dns]="--set dnsConfig=null"
  # The namespaced mode, in namespaces that exist on the bed (the dry run creates the Roles).
  [namespaced]="--set watchNamespaces={default,kube-public}"
  [no-admission-policy]="--set admissionPolicy.enabled=false"
  # One member of three (docs/multi-cluster.md); kube-public stands in for the Kafka namespace.
  [multi-cluster]="--set multiCluster.member=east --set multiCluster.members={east,west,tie} --set multiCluster.kafkaNamespace=kube-public"
)
for v in "${!variants[@]}"; do
  # shellcheck disable=SC2086,SC2312 # variants[$v] is several words on purpose; message text only
  if "$helm" template koo "$chart" --namespace "$ns" --include-crds ${variants[$v]} > "$work/$v.yaml" 2> "$work/$v.err"; then
    # shellcheck disable=SC2312 # message text only
    ok "helm template ($v): $(grep -c '^kind:' "$work/$v.yaml") objects"
  else bad "helm template ($v): $(cat "$work/$v.err")"; fi
done
grep -q 'kind: CustomResourceDefinition' "$work/defaults.yaml" || bad "the rendering does not include the CRD"
grep -q 'kind: Lease\|leases' "$work/defaults.yaml" || bad "no RBAC for leader election Leases in the default rendering"
if [[ -s "$work/monitoring.yaml" ]]; then
  before=$fails
  for kind in ServiceMonitor PrometheusRule; do
    grep -q "^kind: $kind\$" "$work/monitoring.yaml" || bad "the monitoring rendering has no $kind"
  done
  grep -q 'grafana_dashboard: "1"' "$work/monitoring.yaml" || bad "the monitoring rendering has no dashboard ConfigMap with the sidecar label"
  if grep -q '^kind: PrometheusRule$\|^kind: ServiceMonitor$\|grafana_dashboard' "$work/defaults.yaml"; then
    bad "the default rendering has monitoring objects (they are opt-in)"
  fi
  ((fails > before)) || ok "monitoring objects only when asked for (ServiceMonitor, PrometheusRule, dashboard ConfigMap)"
fi
# The resolver options (values.yaml, dnsConfig: a lookup sent to a lost zone's CoreDNS gives up
# after 1 s, not 5 s) reach the pod by default, and null leaves the cluster's.
if [[ -s "$work/defaults.yaml" && -s "$work/cluster-dns.yaml" ]]; then
  if grep -A2 '^      dnsConfig:$' "$work/defaults.yaml" | grep -q 'name: timeout' &&
    grep -A1 'name: timeout' "$work/defaults.yaml" | grep -q 'value: "1"'; then
    ok "the default rendering sets the resolver's timeout to 1 s (dnsConfig)"
  else bad "the default rendering has no dnsConfig with timeout 1"; fi
  if grep -q 'dnsConfig:' "$work/cluster-dns.yaml"; then bad "dnsConfig=null still renders a dnsConfig"
  else ok "dnsConfig=null leaves the cluster's resolver options"; fi
fi
if [[ -s "$work/local-image.yaml" ]]; then
  grep -q 'image: kafka-observer-operator:dev$' "$work/local-image.yaml" && grep -q 'imagePullPolicy: Never$' "$work/local-image.yaml" &&
    ok "local image values reach the Deployment" || bad "the local-image rendering lacks image kafka-observer-operator:dev with imagePullPolicy Never"
fi

# The RBAC rules of the default rendering, one "apiGroup resource resourceNames verbs" line per
# rule, must be exactly the calls the code makes (docs/rbac.md gives the file and function of
# each). A change of the code's calls changes this list, the chart and docs/rbac.md together.
expected_rbac='coordination.k8s.io leases - create
coordination.k8s.io leases "kafka-observer-operator" get,patch
core configmaps - get,list,watch,create,patch,delete
core nodes - get
core pods - list,watch,patch
core secrets - get
events.k8s.io events - create,patch
kafkaobserver.io observersets - get,list,watch,patch
kafkaobserver.io observersets/status - patch'
rbac_rules() { # rendering: prints the rules of its Roles and ClusterRoles, sorted
  awk '
    /^kind: / { rbac = ($2 == "Role" || $2 == "ClusterRole") }
    !rbac { next }
    function list(line) { sub(/^[^[]*\[/, "", line); sub(/\].*$/, "", line); gsub(/ /, "", line); return line }
    /^ *- apiGroups: / { group = list($0); if (group == "\"\"") group = "core"; names = "-" }
    /^ *resources: / { res = list($0) }
    /^ *resourceNames: / { names = list($0) }
    /^ *verbs: / { print group, res, names, list($0) }
  ' "$1" | LC_ALL=C sort
}
if [[ -s "$work/defaults.yaml" ]]; then
  expected_rbac=$(LC_ALL=C sort <<<"$expected_rbac")
  if got=$(rbac_rules "$work/defaults.yaml") && [[ "$got" == "$expected_rbac" ]]; then
    # shellcheck disable=SC2312 # message text only
    ok "RBAC rules == the calls the code makes ($(wc -l <<<"$got") rules)"
  else bad "RBAC rules differ from the expected list (update the chart, this list and docs/rbac.md together):"$'\n'"$(diff <(echo "$expected_rbac") <(echo "$got") || true)"; fi
fi

# Secrets: `get` cluster-wide by default; with rbac.secretNamespaces only by a Role in each of
# those namespaces (none in the ClusterRole); with rbac.readSecrets=false nowhere.
secret_grants() { # rendering: "<kind> <namespace or -> <verbs>" per rule on secrets
  awk '
    /^kind: / { kind = $2; namespace = "-" }
    /^  namespace: / { namespace = $2 }
    /^ *resources: \[secrets\]/ { pending = 1; next }
    pending && /^ *verbs: / { sub(/^ *verbs: /, ""); print kind, namespace, $0; pending = 0 }
  ' "$1" | LC_ALL=C sort
}
if [[ -s "$work/defaults.yaml" && -s "$work/secret-namespaces.yaml" && -s "$work/no-secrets.yaml" ]]; then
  # shellcheck disable=SC2312 # secret_grants greps rendered files; a failed one gives a different string, which fails the comparison below
  got="$(secret_grants "$work/defaults.yaml")|$(secret_grants "$work/secret-namespaces.yaml")|$(secret_grants "$work/no-secrets.yaml")"
  want="ClusterRole - [get]|Role default [get]"$'\n'"Role kube-public [get]|"
  if [[ "$got" == "$want" ]]; then
    ok "Secrets: get cluster-wide by default, only per namespace with rbac.secretNamespaces, none with rbac.readSecrets=false"
  else bad "Secret grants differ: got '$got', want '$want'"; fi
  grep -q 'kind: RoleBinding' "$work/secret-namespaces.yaml" || bad "rbac.secretNamespaces renders no RoleBinding"
fi

# The namespaced mode: the ClusterRole keeps `nodes: get` only; each watched namespace gets a
# Role (and RoleBinding) with the rules the cluster-wide mode grants everywhere; the operator is
# told the namespaces. Without it: no Role outside the release namespace, no WATCH_NAMESPACES.
cluster_rules() { # rendering: the rules of its ClusterRoles only
  awk '/^kind: / { keep = ($2 == "ClusterRole") } keep' "$1" > "$1.cluster" && rbac_rules "$1.cluster"
}
role_namespaces() { # rendering: the namespaces of its Roles and RoleBindings named like the ClusterRole
  awk '/^kind: / { kind = $2 } /^  name: / { name = $2 } /^  namespace: / && (kind == "Role" || kind == "RoleBinding") && name == "koo-kafka-observer-operator" { print kind, $2 }' "$1" | LC_ALL=C sort | tr '\n' ' '
}
if [[ -s "$work/namespaced.yaml" && -s "$work/defaults.yaml" ]]; then
  before=$fails
  got="$(cluster_rules "$work/namespaced.yaml")"
  [[ "$got" == "core nodes - get" ]] || bad "namespaced mode: the ClusterRole grants more than nodes get:"$'\n'"$got"
  got="$(role_namespaces "$work/namespaced.yaml")"
  [[ "$got" == "Role default Role kube-public RoleBinding default RoleBinding kube-public " ]] ||
    bad "namespaced mode: Roles and RoleBindings '$got', want one of each in default and kube-public"
  # shellcheck disable=SC2312 # a failed rendering read gives a different list, which fails the comparison
  # Each namespace's Role holds exactly the rules the cluster-wide ClusterRole holds minus Nodes.
  ns_rules="$(awk '/^kind: / { kind = $2; ns = "" } /^  namespace: / { ns = $2; if (kind == "Role" && ns == "default") print "kind: Role" } kind == "Role" && ns == "default"' "$work/namespaced.yaml" > "$work/ns-default" && rbac_rules "$work/ns-default")"
  want="$(cluster_rules "$work/defaults.yaml" | grep -v '^core nodes ')"
  [[ "$ns_rules" == "$want" ]] || bad "namespaced mode: the Role in default differs from the cluster-wide rules:"$'\n'"$(diff <(echo "$want") <(echo "$ns_rules") || true)"
  grep -A1 'name: WATCH_NAMESPACES' "$work/namespaced.yaml" | grep -q 'value: "default,kube-public"' ||
    bad "namespaced mode: the Deployment lacks WATCH_NAMESPACES=default,kube-public"
  ! grep -q 'WATCH_NAMESPACES' "$work/defaults.yaml" || bad "cluster-wide mode sets WATCH_NAMESPACES"
  # shellcheck disable=SC2312 # a failed read prints nothing here, but the namespaced check above reads the same way
  [[ "$(role_namespaces "$work/defaults.yaml")" == "" ]] || bad "cluster-wide mode renders per-namespace Roles"
  ((fails > before)) || ok "namespaced mode: Roles in exactly the watched namespaces, the ClusterRole only nodes get, WATCH_NAMESPACES set"
fi
# The ValidatingAdmissionPolicy: on by default, matching the release's ServiceAccount; off on request.
if [[ -s "$work/defaults.yaml" && -s "$work/no-admission-policy.yaml" ]]; then
  if grep -q '^kind: ValidatingAdmissionPolicy$' "$work/defaults.yaml" && grep -q '^kind: ValidatingAdmissionPolicyBinding$' "$work/defaults.yaml" &&
    grep -q "request.userInfo.username == 'system:serviceaccount:$ns:koo-kafka-observer-operator'" "$work/defaults.yaml"; then
    ok "the default rendering has the ValidatingAdmissionPolicy and binding, matching the operator's ServiceAccount"
  else bad "the default rendering lacks the ValidatingAdmissionPolicy, its binding or the ServiceAccount match"; fi
  if grep -q '^kind: ValidatingAdmissionPolicy' "$work/no-admission-policy.yaml"; then bad "admissionPolicy.enabled=false still renders the policy"
  else ok "admissionPolicy.enabled=false renders no policy"; fi
  grep -q 'name: POD_SELECTOR' "$work/defaults.yaml" && grep -A1 'name: POD_SELECTOR' "$work/defaults.yaml" | grep -q 'app.kubernetes.io/name=kafka' &&
    ok "the pod watch is label-filtered by default (POD_SELECTOR)" || bad "the default rendering has no POD_SELECTOR app.kubernetes.io/name=kafka"
fi

# Multi-cluster: in the Kafka namespace two Roles and nothing else for the remote identity:
# <fullname>-member-lease, get and patch on the member's Lease by name, bound to the local operator
# and to the remote identity; <fullname>-member-reconcile, exactly the calls the reconciler makes
# in another member (expected_remote_rbac, docs/rbac.md "Multi-cluster"), bound to the remote
# identity only. The remote identity is bound by RoleBindings of the Kafka namespace to Roles of
# that namespace and nowhere else; the admission policy matches its requests too. The Lease
# itself rendered there (nobody may create Leases); the member Secrets readable by name only; the
# Deployment told its members and the Lease namespace. Nothing of it without members.
lease_rule='coordination.k8s.io leases "kafka-observer-operator" get,patch'
expected_remote_rbac='core configmaps - get,create,patch
core pods - list,patch
events.k8s.io events - create,patch
kafkaobserver.io observersets - get
kafkaobserver.io observersets/status - patch'
roles_in() { # rendering namespace: the rules of the Roles in that namespace
  awk -v ns="$2" 'BEGIN { RS = "\n---\n" } /\nkind: Role\n/ && $0 ~ ("\n  namespace: " ns "\n") { print "kind: Role"; print }' "$1" > "$1.$2" && rbac_rules "$1.$2"
}
role_named() { # rendering name: the rules of the Role of that name
  awk -v name="$2" 'BEGIN { RS = "\n---\n" } /\nkind: Role\n/ && $0 ~ ("\n  name: " name "\n") { print "kind: Role"; print }' "$1" > "$1.role-$2" && rbac_rules "$1.role-$2"
}
objects() { # rendering: "kind name namespace" per object (namespace - when it has none)
  awk 'BEGIN { RS = "\n---\n" } {
    n = split($0, l, "\n"); kind = ""; name = ""; ns = "-"; meta = 0
    for (i = 1; i <= n; i++) {
      if (l[i] ~ /^kind: /) kind = substr(l[i], 7)
      else if (l[i] ~ /^[a-zA-Z]/) meta = (l[i] == "metadata:")
      else if (meta && l[i] ~ /^  name: /) name = substr(l[i], 9)
      else if (meta && l[i] ~ /^  namespace: /) ns = substr(l[i], 14)
    }
    if (kind != "") print kind, name, ns
  }' "$1" | LC_ALL=C sort
}
bindings() { # rendering: "kind namespace name roleRefKind/roleRefName subjectKind/name/namespace" per subject of every (Cluster)RoleBinding
  awk 'BEGIN { RS = "\n---\n" } {
    n = split($0, l, "\n"); kind = ""; name = ""; ns = "-"; sec = ""; rk = ""; rn = ""; s = 0
    for (i = 1; i <= n; i++) {
      if (l[i] ~ /^kind: /) { kind = substr(l[i], 7); continue }
      if (l[i] ~ /^[a-zA-Z]/) { sec = l[i]; continue }
      if (sec == "metadata:" && l[i] ~ /^  name: /) name = substr(l[i], 9)
      if (sec == "metadata:" && l[i] ~ /^  namespace: /) ns = substr(l[i], 14)
      if (sec == "roleRef:" && l[i] ~ /^  kind: /) rk = substr(l[i], 9)
      if (sec == "roleRef:" && l[i] ~ /^  name: /) rn = substr(l[i], 9)
      if (sec == "subjects:" && l[i] ~ /^  - kind: /) { s++; sk[s] = substr(l[i], 11); sn[s] = ""; sns[s] = "-" }
      if (sec == "subjects:" && s && l[i] ~ /^    name: /) sn[s] = substr(l[i], 11)
      if (sec == "subjects:" && s && l[i] ~ /^    namespace: /) sns[s] = substr(l[i], 16)
    }
    if (kind ~ /RoleBinding$/) for (j = 1; j <= s; j++) print kind, ns, name, rk "/" rn, sk[j] "/" sn[j] "/" sns[j]
  }' "$1" | LC_ALL=C sort
}
if [[ -s "$work/multi-cluster.yaml" && -s "$work/defaults.yaml" ]]; then
  m="$work/multi-cluster.yaml" before=$fails
  fullname=koo-kafka-observer-operator remote=kafka-observer-remote
  # The Kafka namespace's Roles grant the Lease rule and the reconciler's calls, nothing more.
  got="$(roles_in "$m" kube-public)"
  want="$(LC_ALL=C sort <<<"$lease_rule"$'\n'"$expected_remote_rbac")"
  [[ "$got" == "$want" ]] ||
    bad "multi-cluster: the Kafka namespace's Roles grant more or less than the Lease's get,patch and the reconciler's calls:"$'\n'"$(diff <(echo "$want") <(echo "$got") || true)"
  # Named: extra verbs (watch, delete, update, ...) or resources (secrets, core events, nodes,
  # ...; events.k8s.io Events only to create and patch the leader's copies of its Events).
  extra="$(awk '{ n = split($4, v, ","); for (i = 1; i <= n; i++) if (v[i] ~ /^(watch|delete|deletecollection|update|escalate|bind|impersonate|\*)$/) print "verb " v[i] ": " $0
      if ($2 ~ /^(secrets|nodes|namespaces|serviceaccounts|\*)$/ || $1 == "*" || ($2 == "events" && $1 != "events.k8s.io")) print "resource " $2 ": " $0 }' <<<"$got")"
  [[ -z "$extra" ]] || bad "multi-cluster: the Kafka namespace's Roles grant what the remote identity must not have:"$'\n'"$extra"
  got="$(role_named "$m" "$fullname-member-reconcile")"
  want="$(LC_ALL=C sort <<<"$expected_remote_rbac")"
  [[ "$got" == "$want" ]] ||
    bad "multi-cluster: Role $fullname-member-reconcile differs from the reconciler's calls (update the chart, this list and docs/rbac.md together):"$'\n'"$(diff <(echo "$want") <(echo "$got") || true)"
  got="$(role_named "$m" "$fullname-member-lease")"
  [[ "$got" == "$lease_rule" ]] || bad "multi-cluster: Role $fullname-member-lease changed: '$got', want '$lease_rule'"
  # shellcheck disable=SC2312 # objects reads a rendered file; a failed read prints nothing and fails the comparison
  got="$(objects "$m" | grep -E "^Role $fullname-member-(lease|reconcile) " | tr '\n' ' ')"
  [[ "$got" == "Role $fullname-member-lease kube-public Role $fullname-member-reconcile kube-public " ]] ||
    bad "multi-cluster: the remote identity's Roles must be one each, in the Kafka namespace, got '$got'"
  got="$(roles_in "$m" "$ns" | grep secrets)"
  [[ "$got" == 'core secrets "kafka-observer-member-west","kafka-observer-member-tie" get' ]] ||
    bad "multi-cluster: the member Secrets are not readable by name only (got '$got')"
  all_rules="$(rbac_rules "$m")"
  [[ -n "$all_rules" ]] || bad "multi-cluster: no RBAC rules read from the rendering"
  ! grep -q '^coordination.k8s.io leases - create$' <<<"$all_rules" || bad "multi-cluster: a Role may create Leases"
  # Bound only in the Kafka namespace, only to its two Roles there; the reconcile Role to it alone;
  # no Group subject (system:serviceaccounts:<ns> would bind it too).
  all_bindings="$(bindings "$m")"
  [[ -n "$all_bindings" ]] || bad "multi-cluster: no bindings read from the rendering"
  # shellcheck disable=SC2312 # grep over the bindings printed above; no match gives an empty string, which fails the comparison
  got="$(grep " ServiceAccount/$remote/" <<<"$all_bindings" || true)"
  want="RoleBinding kube-public $fullname-member-lease Role/$fullname-member-lease ServiceAccount/$remote/kube-public
RoleBinding kube-public $fullname-member-reconcile Role/$fullname-member-reconcile ServiceAccount/$remote/kube-public"
  [[ "$got" == "$want" ]] ||
    bad "multi-cluster: $remote must be bound by RoleBindings of the Kafka namespace to its two Roles there and nowhere else:"$'\n'"$(diff <(echo "$want") <(echo "$got") || true)"
  got="$(grep "^RoleBinding [^ ]* $fullname-member-reconcile " <<<"$all_bindings" || true)"
  [[ "$got" == "RoleBinding kube-public $fullname-member-reconcile Role/$fullname-member-reconcile ServiceAccount/$remote/kube-public" ]] ||
    bad "multi-cluster: the reconcile Role must be bound to $remote only, got:"$'\n'"$got"
  ! grep -q ' Group/' <<<"$all_bindings" || bad "multi-cluster: a binding names a Group:"$'\n'"$(grep ' Group/' <<<"$all_bindings" || true)"
  grep -B1 -A3 '^kind: Lease$' "$m" | grep -q 'namespace: kube-public' || bad "multi-cluster: no Lease rendered in the Kafka namespace"
  grep -A1 'name: KOO_MEMBERS$' "$m" | grep -q 'value: "east,west,tie"' && grep -A1 'name: KOO_MEMBER$' "$m" | grep -q 'value: "east"' &&
    grep -q -- '- "--lease-namespace=kube-public"' "$m" || bad "multi-cluster: the Deployment is not told KOO_MEMBER, KOO_MEMBERS and --lease-namespace"
  # The admission policy limits the remote identity's writes as the local operator's.
  grep -A3 'name: operator-service-account$' "$m" | grep -q "request.userInfo.username == 'system:serviceaccount:$ns:$fullname' ||" &&
    grep -A3 'name: operator-service-account$' "$m" | grep -q "request.userInfo.username == 'system:serviceaccount:kube-public:$remote'$" ||
    bad "multi-cluster: the ValidatingAdmissionPolicy does not match both the operator's ServiceAccount and $remote"
  ! grep -q 'KOO_MEMBER\|kafka-observer-remote\|^kind: Lease$\|member-reconcile' "$work/defaults.yaml" || bad "the default rendering has multi-cluster objects"
  ((fails > before)) || ok "multi-cluster: the remote identity gets the member's Lease and the reconciler's calls (observersets get, status patch, configmaps get/create/patch, pods list/patch), only in the Kafka namespace; the admission policy covers it; member Secrets by name; Deployment told its members"
fi
multi=(--set multiCluster.kafkaNamespace=kafka --set 'multiCluster.members={east,west,tie}')
reject_render() { # description, expected text, helm args...: a template's fail, not the schema
  local what="$1" want="$2"; shift 2
  local out
  if out=$("$helm" template koo "$chart" "$@" 2>&1); then bad "rendered $what"
  elif grep -q -- "$want" <<<"$out"; then ok "refuses $what"
  else bad "refused $what without saying $want: $out"; fi
}
reject_render "a member not in multiCluster.members" "must be one of" "${multi[@]}" --set multiCluster.member=north
reject_render "an even number of members" "odd number" --set multiCluster.member=east --set 'multiCluster.members={east,west}' --set multiCluster.kafkaNamespace=kafka
reject_render "members without multiCluster.kafkaNamespace" "kafkaNamespace is required" --set multiCluster.member=east --set 'multiCluster.members={east,west,tie}'
reject_render "members without leader election" "needs leaderElection" "${multi[@]}" --set multiCluster.member=east --set replicaCount=1 --set leaderElection.enabled=false

# 3. values.schema.json must reject bad values, naming the key.
reject() { # description, expected text, helm args...
  local what="$1" want="$2"; shift 2
  local out
  if out=$("$helm" template koo "$chart" "$@" 2>&1); then bad "schema accepted $what"
  elif grep -q -- "$want" <<<"$out"; then ok "schema rejects $what"
  else bad "schema rejected $what without naming $want: $out"; fi
}
reject "logging.format=xml" "format" --set logging.format=xml
reject "an unknown top-level key" "additional" --set nosuchkey=1
reject "a bad lease duration" "leaseDuration" --set leaderElection.leaseDuration=15sec
reject "metrics.port=0" "port" --set metrics.port=0
reject "2 replicas without leader election" "leaderElection" --set replicaCount=2 --set leaderElection.enabled=false
reject "a watched namespace that is not a name" "watchNamespaces" --set "watchNamespaces={Team_A}"
reject "admissionPolicy.enabled=maybe" "enabled" --set admissionPolicy.enabled=maybe
reject "a namespace name that is not a DNS label in rbac.secretNamespaces" "secretNamespaces" --set 'rbac.secretNamespaces={Team_A}'
reject "prometheusRule.heldBackMinutes=0" "heldBackMinutes" --set prometheusRule.heldBackMinutes=0
reject "a prometheusRule.selector with braces" "selector" --set-string 'prometheusRule.selector={job="x"}'
reject "a member name that is not a DNS label" "members" --set 'multiCluster.members={East,west,tie}'

# 4. server-side dry run against the bed's apiserver.
if [[ "$tb" == off ]]; then
  echo "chart-check: SKIP kubectl apply --dry-run=server (KOO_TESTBED=off)"
elif [[ ! -f "$tb/kubeconfig" ]]; then
  bad "kubectl apply --dry-run=server: no test bed at $tb (run make testbed-up, or KOO_TESTBED=off to skip this step)"
elif [[ ! -x "$tb/bin/kubectl" ]]; then
  bad "kubectl apply --dry-run=server: no kubectl wrapper at $tb/bin/kubectl (make testbed-up writes it)"
else
  kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns" >/dev/null
  for v in "${!variants[@]}"; do
    [[ -s "$work/$v.yaml" ]] || continue
    # The bed has no Prometheus Operator CRDs: ServiceMonitor and PrometheusRule are checked by
    # helm lint/template here and by promtool in e2e/alerts-check.sh, not by the apiserver.
    awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/\napiVersion: monitoring\.coreos\.com\// && !/^apiVersion: monitoring\.coreos\.com\//' \
      "$work/$v.yaml" > "$work/$v.apply.yaml"
    if out=$(kubectl apply --dry-run=server --server-side --force-conflicts --field-manager=chart-check -f "$work/$v.apply.yaml" 2>&1); then
      # shellcheck disable=SC2312 # message text only
      ok "kubectl apply --dry-run=server ($v): $(grep -c 'serverside-applied\|created\|configured' <<<"$out") objects accepted"
    else bad "kubectl apply --dry-run=server ($v):"$'\n'"$out"; fi
  done
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
fi

if ((fails)); then echo "chart-check: $fails check(s) failed"; exit 1; fi
echo "chart-check: PASS"
