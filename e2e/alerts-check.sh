#!/usr/bin/env bash
# The chart's monitoring assets, checked without the test bed (make alerts-check, part of make test):
#   1. the PrometheusRule rendered by the bed's helm (release koo, prometheusRule.enabled=true), its
#      rule groups extracted exactly as the chart ships them, `promtool check rules` on them (and on
#      a rendering with a custom selector and runbook URLs);
#   2. `promtool test rules e2e/alerts/alerts.test.yaml` against those groups; every alert must have
#      a test where it fires and one where it does not;
#   3. the dashboard ConfigMap renders with the sidecar label and carries dashboards/*.json verbatim;
#   4. both options off by default: the default rendering has neither object;
#   5. tests/monitoring_assets.rs: the dashboard is valid JSON and, like the rules, queries only
#      metric names the operator's real registry exports.
# helm and promtool are built from the Go module proxy on first use (e2e/build/k8s.sh helm,
# e2e/build/promtool.sh) and cached in $KOO_CACHE.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
chart="$root/charts/kafka-observer-operator"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
start=$SECONDS
ok() { echo "alerts-check: ok   $*"; }
bad() { echo "alerts-check: FAIL $*"; fails=$((fails + 1)); }

tb="${KOO_TESTBED:-$tb}"
helm="$tb/bin/helm"
[[ -x "$helm" ]] || helm="$helm_bin"
[[ -x "$helm" ]] || { bash "$root/e2e/build/k8s.sh" helm >&2; helm="$helm_bin"; }
promtool="$(bash "$root/e2e/build/promtool.sh" | tail -n1)"
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"

# rule_groups RENDERING: the `spec:` of the PrometheusRule, de-indented, is a Prometheus rule file.
rule_groups() {
  awk 'in_spec { sub(/^  /, ""); print } /^spec:$/ { in_spec = 1 }' "$1"
}
render() { # name, helm args...: renders the PrometheusRule into $work/name.yaml and its groups into $work/name.rules.yaml
  local name="$1"; shift
  # shellcheck disable=SC2312 # message text only
  if "$helm" template koo "$chart" --namespace monitoring --set prometheusRule.enabled=true "$@" \
       --show-only templates/prometheusrule.yaml > "$work/$name.yaml" 2> "$work/$name.err"; then
    rule_groups "$work/$name.yaml" > "$work/$name.rules.yaml"
  else bad "helm template ($name): $(cat "$work/$name.err")"; return 1; fi
}

# 1. render and check.
if render defaults; then
  cp "$work/defaults.rules.yaml" "$work/rules.yaml"
  # shellcheck disable=SC2312 # message text only
  if out=$("$promtool" check rules "$work/rules.yaml" 2>&1); then ok "promtool check rules (defaults): $(grep -o '[0-9]* rules found' <<<"$out")"
  else bad "promtool check rules (defaults):"$'\n'"$out"; fi
fi
if render custom --set 'prometheusRule.selector=job="koo"\,namespace="ops"' --set prometheusRule.heldBackMinutes=30 \
     --set prometheusRule.runbookBaseUrl=https://example.com/runbooks.md --set prometheusRule.additionalAlertLabels.team=kafka; then
  if out=$("$promtool" check rules "$work/custom.rules.yaml" 2>&1); then
    # shellcheck disable=SC2312 # message text only
    if grep -q 'runbook_url: https://example.com/runbooks.md#' "$work/custom.rules.yaml" && grep -q 'for: 30m' "$work/custom.rules.yaml" \
       && grep -q 'kafka_observer_leader{job="koo",namespace="ops"}' "$work/custom.rules.yaml" && grep -q 'team: kafka' "$work/custom.rules.yaml"; then
      ok "promtool check rules (custom selector, runbook URLs, alert labels, heldBackMinutes=30)"
    else bad "the custom values do not reach the rules:"$'\n'"$(cat "$work/custom.rules.yaml")"; fi
  else bad "promtool check rules (custom):"$'\n'"$out"; fi
fi

# 2. unit tests of every alert.
tests="$root/e2e/alerts/alerts.test.yaml"
if [[ -s "$work/rules.yaml" ]]; then
  cp "$tests" "$work/alerts.test.yaml"
  if out=$(cd "$work" && "$promtool" test rules alerts.test.yaml 2>&1); then ok "promtool test rules e2e/alerts/alerts.test.yaml"
  else bad "promtool test rules:"$'\n'"$out"; fi
  # Each alert of the chart: a test expecting it to fire, and one expecting silence.
  alerts="$(sed -n 's/^ *- alert: //p' "$work/rules.yaml")" || bad "cannot read $work/rules.yaml"
  [[ -n "$alerts" ]] || bad "no alert in the rendered PrometheusRule"
  while read -r alert; do
    [[ -n "$alert" ]] || continue
    firing=$(awk -v a="$alert" '$1 == "alertname:" && $2 == a { want = 1; next } want && /exp_alerts:/ { if ($2 != "[]") n++; want = 0 } END { print n + 0 }' "$tests")
    silent=$(awk -v a="$alert" '$1 == "alertname:" && $2 == a { want = 1; next } want && /exp_alerts:/ { if ($2 == "[]") n++; want = 0 } END { print n + 0 }' "$tests")
    if ((firing > 0 && silent > 0)); then ok "$alert: $firing firing and $silent silent evaluations"
    else bad "$alert: needs firing and silent cases in e2e/alerts/alerts.test.yaml (has $firing firing, $silent silent)"; fi
  done <<<"$alerts"
fi

# 3. the dashboard ConfigMap.
# shellcheck disable=SC2312 # message text only
if "$helm" template koo "$chart" --set dashboard.enabled=true --set dashboard.namespace=grafana \
     --set dashboard.annotations.grafana_folder=Kafka --show-only templates/dashboard.yaml > "$work/dashboard.yaml" 2> "$work/dashboard.err"; then
  awk 'in_data { sub(/^    /, ""); print } /^  kafka-observer-operator.json: \|-$/ { in_data = 1 }' "$work/dashboard.yaml" > "$work/dashboard.json"
  if ! grep -q '^    grafana_dashboard: "1"$' "$work/dashboard.yaml"; then bad "the dashboard ConfigMap lacks the label grafana_dashboard: \"1\""
  elif ! grep -q '^  namespace: grafana$' "$work/dashboard.yaml" || ! grep -q 'grafana_folder: Kafka' "$work/dashboard.yaml"; then bad "dashboard.namespace or .annotations do not reach the ConfigMap"
  elif ! cmp -s "$chart/dashboards/kafka-observer-operator.json" "$work/dashboard.json"; then bad "the ConfigMap's JSON differs from dashboards/kafka-observer-operator.json"
  else ok "dashboard ConfigMap: sidecar label, namespace, annotations, the JSON verbatim"; fi
else bad "helm template (dashboard): $(cat "$work/dashboard.err")"; fi

# The dashboard's PromQL parses: each panel query becomes a recording rule for `promtool check
# rules`, Grafana's variables replaced by values ($__rate_interval 5m, $__range 1h, the
# namespace and ObserverSet variables .*). The JSON keeps one "expr" per line, quotes escaped.
exprs="$(sed -n 's/^ *"expr": "\(.*\)",\{0,1\}$/\1/p' "$chart/dashboards/kafka-observer-operator.json" |
  sed 's/\\"/"/g; s/\$__rate_interval/5m/g; s/\$__range/1h/g; s/\$namespace/.*/g; s/\$observerset/.*/g')"
{
  echo "groups:"; echo "  - name: dashboard-queries"; echo "    rules:"
  n=0
  while IFS= read -r e; do
    n=$((n + 1)); printf '      - record: dashboard:query:%d\n        expr: |-\n          %s\n' "$n" "$e"
  done <<<"$exprs"
} > "$work/dashboard-queries.yaml"
# shellcheck disable=SC2312 # message text only
if [[ -z "$exprs" ]]; then bad "no \"expr\" found in the dashboard JSON"
elif out=$("$promtool" check rules "$work/dashboard-queries.yaml" 2>&1); then ok "the dashboard's $(grep -c . <<<"$exprs") queries parse (promtool check rules)"
else bad "the dashboard's queries do not parse:"$'\n'"$out"; fi

# 4. off by default.
# shellcheck disable=SC2312 # message text only
if "$helm" template koo "$chart" > "$work/plain.yaml" 2> "$work/plain.err"; then
  if grep -q '^kind: PrometheusRule\|grafana_dashboard' "$work/plain.yaml"; then bad "the default rendering has a PrometheusRule or dashboard"
  else ok "PrometheusRule and dashboard are off by default"; fi
else bad "helm template (defaults): $(cat "$work/plain.err")"; fi

# 5. metric names against the operator's registry.
# shellcheck disable=SC2312 # message text only
if out=$(cd "$root" && cargo test --quiet --release --test monitoring_assets 2>&1); then ok "tests/monitoring_assets.rs: $(grep -o 'test result: .*passed' <<<"$out" | tail -n1)"
else bad "tests/monitoring_assets.rs:"$'\n'"$out"; fi

if ((fails)); then echo "alerts-check: $fails check(s) failed ($((SECONDS - start)) s)"; exit 1; fi
echo "alerts-check: PASS ($((SECONDS - start)) s)"
