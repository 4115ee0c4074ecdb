#!/usr/bin/env bash
# The Strimzi example (examples/strimzi/) against Strimzi's own CRDs.
#
#   e2e/strimzi-check.sh crds                    make the CRDs (cached), print their directory
#   e2e/strimzi-check.sh client                  validate every examples/strimzi/*.yaml locally:
#                                                schema (jsonschema), unknown fields, CEL rules
#   e2e/strimzi-check.sh [server] [KUBECONFIG]   install the CRDs into that apiserver (default
#                                                $KUBECONFIG) and `kubectl apply --dry-run=server`
#                                                every object; exits 1 on any rejection
#
# Where the CRDs come from: Strimzi publishes its CRD YAMLs in its release archives and Helm chart,
# neither reachable here. Maven Central has io.strimzi:api (the CRD model classes; its jar embeds
# the module's pom.xml) and io.strimzi:crd-generator (the tool Strimzi's build runs to write
# packaging/install/cluster-operator/0*-Crd-*.yaml). This script resolves both at
# $STRIMZI_VERSION (default 1.2.0) with Maven, takes the generator's options and the Kafka and
# KafkaNodePool class names from the embedded pom (execution generate-crd-co-install-v1) and runs
# the generator (it needs Java >= 21: $STRIMZI_JAVA, else the first such JDK found). Cached,
# keyed by version, under $KOO_CACHE/strimzi/ (Maven repo m2/, CRDs crds/<version>/, venv venv/).
# Maven Central has crd-generator 1.2.0 but not 0.49.0 ("Could not find artifact", 2026-12-02):
# other versions may not be possible this way.
#
# server: the ObserverSet CRD (crds/observerset.yaml) and the two Strimzi CRDs are created when
# missing (`kubectl create`: the Kafka CRD is too big for apply's last-applied annotation) and
# deleted again at the end if this run created them (KEEP_CRDS=1 keeps them); CRDs already
# present are left as they are and the dry-run validates against them. The objects go to a
# throwaway namespace, --validate=strict (unknown fields are errors). Then three broken objects
# must be rejected, so a check that accepts everything fails. kubectl: $KUBECTL, else the bed's
# cached one, else PATH.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_tag="strimzi-check"
STRIMZI_VERSION="${STRIMZI_VERSION:-1.2.0}"
cache="$KOO_CACHE/strimzi"
crd_dir="$cache/crds/$STRIMZI_VERSION"
examples="$root/examples/strimzi"
koo_crd="$root/crds/observerset.yaml"

# ---- crds ---------------------------------------------------------------------------------------
find_java() {
  local j v
  for j in "${STRIMZI_JAVA:-}" "${JAVA_HOME:+$JAVA_HOME/bin/java}" /usr/lib/jvm/*/bin/java "$(command -v java || true)"; do
    [[ -n "$j" && -x "$j" ]] || continue
    v=$("$j" -XshowSettings:properties -version 2>&1 | awk '/java.specification.version/ {print $3}')
    if [[ "$v" =~ ^[0-9]+$ ]] && ((v >= 21)); then echo "$j"; return 0; fi
  done
  die "no Java >= 21 (io.strimzi:crd-generator $STRIMZI_VERSION is built for it): set STRIMZI_JAVA"
}

make_crds() {
  [[ -f "$crd_dir/.complete" ]] && return 0
  command -v mvn >/dev/null || die "mvn not found"
  local java api_jar pom args classes
  java="$(find_java)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # The release's parent pom pins the dependency versions its build used.
  cat > "$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <parent><groupId>io.strimzi</groupId><artifactId>strimzi</artifactId><version>$STRIMZI_VERSION</version><relativePath/></parent>
  <artifactId>koo-strimzi-crds</artifactId>
  <dependencies>
    <dependency><groupId>io.strimzi</groupId><artifactId>api</artifactId><version>$STRIMZI_VERSION</version></dependency>
    <dependency><groupId>io.strimzi</groupId><artifactId>crd-generator</artifactId><version>$STRIMZI_VERSION</version></dependency>
  </dependencies>
</project>
EOF
  log "resolving io.strimzi:api and io.strimzi:crd-generator $STRIMZI_VERSION from Maven Central"
  (cd "$work" && mvn_strict -q -Dstyle.color=never -Dmaven.repo.local="$cache/m2" dependency:build-classpath \
    -Dmdep.outputFile="$work/cp.txt" >&2)
  api_jar="$cache/m2/io/strimzi/api/$STRIMZI_VERSION/api-$STRIMZI_VERSION.jar"
  [[ -f "$api_jar" ]] || die "no $api_jar after the Maven resolution"
  unzip -p "$api_jar" META-INF/maven/io.strimzi/api/pom.xml > "$work/api-pom.xml"
  # The first generator execution: its options up to --yaml, then Class=path pairs.
  pom="$(awk '/<id>generate-crd-co-install-v1<\/id>/ {on = 1} on && /<\/execution>/ {exit} on' "$work/api-pom.xml" |
    grep -o '<argument>[^<]*</argument>' | sed -e 's|<argument>||' -e 's|</argument>||')"
  args="$(sed -n '/^io\.strimzi\.crdgenerator\.CrdGenerator$/,/^--yaml$/p' <<<"$pom" | sed '1d;$d')"
  classes="$(grep -E '^io\.strimzi\.api\.[A-Za-z0-9_.]*\.(Kafka|KafkaNodePool)=' <<<"$pom" | sed 's/=.*//')"
  # shellcheck disable=SC2312 # wc over a string
  [[ -n "$args" && $(wc -l <<<"$classes") -eq 2 ]] ||
    die "cannot read the CrdGenerator options and the Kafka, KafkaNodePool classes from the api $STRIMZI_VERSION pom"
  rm -rf "$crd_dir.tmp"; mkdir -p "$crd_dir.tmp"
  local outputs=() c
  while read -r c; do
    case "$c" in
      *.KafkaNodePool) outputs+=("$c=$crd_dir.tmp/045-Crd-kafkanodepool.yaml") ;;
      *.Kafka) outputs+=("$c=$crd_dir.tmp/040-Crd-kafka.yaml") ;;
    esac
  done <<<"$classes"
  # shellcheck disable=SC2312,SC2086  # $args: one option or value per line, none with spaces / SC2312: cat of the class path file written above; java fails on a wrong one
  (IFS=$'\n'; "$java" -cp "$(cat "$work/cp.txt")" io.strimzi.crdgenerator.CrdGenerator $args --yaml "${outputs[@]}") >&2
  {
    echo "Strimzi $STRIMZI_VERSION CRDs for Kafka and KafkaNodePool, written by io.strimzi:crd-generator:$STRIMZI_VERSION"
    echo "from the classes of io.strimzi:api:$STRIMZI_VERSION (Maven Central), with the options of that release's api pom:"
    # shellcheck disable=SC2312 # message text only
    echo "  $(tr '\n' ' ' <<<"$args")"
    # shellcheck disable=SC2312 # message text only
    echo "$("$java" -version 2>&1 | head -1); $(date -u +%FT%TZ)"
    (cd "$cache/m2/io/strimzi" && sha256sum "api/$STRIMZI_VERSION/api-$STRIMZI_VERSION.jar" \
      "crd-generator/$STRIMZI_VERSION/crd-generator-$STRIMZI_VERSION.jar")
  } > "$crd_dir.tmp/SOURCE.txt"
  ls "$crd_dir.tmp/040-Crd-kafka.yaml" "$crd_dir.tmp/045-Crd-kafkanodepool.yaml" >/dev/null
  touch "$crd_dir.tmp/.complete"
  rm -rf "$crd_dir"; mv "$crd_dir.tmp" "$crd_dir"
  rm -rf "$work"; trap - EXIT
}

# ---- client -------------------------------------------------------------------------------------
# A venv with pinned jsonschema, PyYAML and cel-python (a pure-Python CEL), made once.
client_python() {
  local venv="$cache/venv"
  if [[ ! -f "$venv/.complete" ]]; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q jsonschema==4.26.0 PyYAML==6.0.3 cel-python==0.5.0 >&2
    touch "$venv/.complete"
  fi
  echo "$venv/bin/python"
}

client() {
  local py
  py="$(client_python)"
  "$py" - "$crd_dir/040-Crd-kafka.yaml" "$crd_dir/045-Crd-kafkanodepool.yaml" "$koo_crd" \
    -- "$examples"/*.yaml <<'PY'
"""Client-side stand-in for the apiserver's CRD validation: defaults, the OpenAPI schema
(jsonschema, draft 4 semantics as in OpenAPI 3.0), unknown fields (what --validate=strict
rejects) and the x-kubernetes-validations CEL rules (cel-python, plus the two Kubernetes string
functions the ObserverSet CRD uses). Not the apiserver: ObjectMeta is checked for a name only."""
import copy, os, sys
import celpy, celpy.celtypes as ct, jsonschema, yaml

sep = sys.argv.index("--")
crd_files, manifests = sys.argv[1:sep], sys.argv[sep + 1:]
schemas = {}
for f in crd_files:
    for d in yaml.safe_load_all(open(f)):
        if d and d.get("kind") == "CustomResourceDefinition":
            for v in d["spec"]["versions"]:
                if v.get("served"):
                    key = (d["spec"]["group"] + "/" + v["name"], d["spec"]["names"]["kind"])
                    schemas[key] = (v["schema"]["openAPIV3Schema"], os.path.basename(f))

def apply_defaults(s, o):
    if isinstance(o, dict):
        for k, ps in (s.get("properties") or {}).items():
            if k not in o and "default" in ps:
                o[k] = copy.deepcopy(ps["default"])
            if k in o:
                apply_defaults(ps, o[k])
        if isinstance(s.get("additionalProperties"), dict):
            for v in o.values():
                apply_defaults(s["additionalProperties"], v)
    elif isinstance(o, list) and isinstance(s.get("items"), dict):
        for v in o:
            apply_defaults(s["items"], v)

def unknown_fields(s, o, path, out):
    if isinstance(o, dict):
        if s.get("x-kubernetes-preserve-unknown-fields"):
            return
        props = s.get("properties") or {}
        extra = s.get("additionalProperties")
        for k, v in o.items():
            if path == "" and k in ("apiVersion", "kind", "metadata"):
                continue  # always allowed at the root, whether or not the schema lists them
            if k in props:
                unknown_fields(props[k], v, f"{path}.{k}", out)
            elif isinstance(extra, dict):
                unknown_fields(extra, v, f"{path}.{k}", out)
            elif extra is not True:
                out.append(f"{path}.{k}: unknown field")
    elif isinstance(o, list) and isinstance(s.get("items"), dict):
        for i, v in enumerate(o):
            unknown_fields(s["items"], v, f"{path}[{i}]", out)

env = celpy.Environment()
k8s_functions = {
    "trim": lambda s: ct.StringType(str(s).strip()),
    "substring": lambda s, a, b: ct.StringType(str(s)[int(a):int(b)]),
}
rules_seen = [0]

def cel(s, o, path, out):
    for r in s.get("x-kubernetes-validations") or []:
        rules_seen[0] += 1
        try:
            ok = env.program(env.compile(r["rule"]), functions=k8s_functions).evaluate(
                {"self": celpy.json_to_cel(o)})
        except Exception as e:  # an error is a rejection, as in the apiserver
            ok = f"error {type(e).__name__}"
        if ok is not True and not (isinstance(ok, ct.BoolType) and bool(ok)):
            out.append(f"{path or '.'}: {r.get('message', r['rule'])} (CEL: {ok})")
    if isinstance(o, dict):
        for k, v in o.items():
            ps = (s.get("properties") or {}).get(k)
            if ps is None and isinstance(s.get("additionalProperties"), dict):
                ps = s["additionalProperties"]
            if ps is not None:
                cel(ps, v, f"{path}.{k}", out)
    elif isinstance(o, list) and isinstance(s.get("items"), dict):
        for i, v in enumerate(o):
            cel(s["items"], v, f"{path}[{i}]", out)

def problems(obj):
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in schemas:
        return None, [f"no CRD serves {key[0]} {key[1]}"]
    schema, crd = schemas[key]
    o = copy.deepcopy(obj)
    apply_defaults(schema, o)
    out = []
    if not (o.get("metadata") or {}).get("name"):
        out.append(".metadata.name: required")
    for e in jsonschema.Draft4Validator(schema).iter_errors(o):
        out.append("." + ".".join(str(p) for p in e.absolute_path) + ": " + e.message[:300])
    unknown_fields(schema, o, "", out)
    cel(schema, o, "", out)
    return crd, out

objects = []
for f in manifests:
    for d in yaml.safe_load_all(open(f)):
        if d:
            objects.append((os.path.basename(f), d))

passed = failed = 0
for f, d in objects:
    crd, out = problems(d)
    name = f"{d.get('kind')}/{(d.get('metadata') or {}).get('name')}"
    if out:
        failed += 1
        print(f"strimzi-check: FAIL {f} {name}")
        for p in out:
            print(f"strimzi-check:        {p}")
    else:
        passed += 1
        print(f"strimzi-check: ok   {f} {name} ({d['apiVersion']}, schema of {crd})")

# What no CRD can say: Strimzi's cluster operator refuses additional volume mounts outside /mnt
# and volume names outside its pattern (TemplateUtils); the observer.ids contract (README.md):
# each pool mounts its role's ConfigMap of the ObserverSet as a directory (no subPath), not
# optional, KAFKA_OBSERVER_IDS_FILE inside that mount, the fallback ids equal to spec.observers.
import re
VOLUME_NAME = re.compile(r"^(?=.{0,63}$)[a-zA-Z0-9][a-zA-Z0-9-._]*[a-zA-Z0-9]$")

def contract(objects):
    out = []
    obs = [d for _, d in objects if d.get("kind") == "ObserverSet"]
    for _, d in objects:
        if d.get("kind") != "KafkaNodePool":
            continue
        pool, spec = d["metadata"]["name"], d["spec"]
        roles = set(spec.get("roles", []))
        role = "controller" if roles == {"controller"} else "broker" if roles == {"broker"} else None
        t = spec.get("template") or {}
        vols = {v["name"]: v for v in (t.get("pod") or {}).get("volumes") or []}
        kc = t.get("kafkaContainer") or {}
        mounts = kc.get("volumeMounts") or []
        env = {e["name"]: e.get("value") for e in kc.get("env") or []}
        for n in vols:
            if not VOLUME_NAME.match(n):
                out.append(f"KafkaNodePool/{pool}: volume name {n!r} does not match Strimzi's pattern")
        for m in mounts:
            if not m["mountPath"].startswith("/mnt"):
                out.append(f"KafkaNodePool/{pool}: mountPath {m['mountPath']} is outside /mnt (Strimzi refuses it)")
            if m["name"] not in vols:
                out.append(f"KafkaNodePool/{pool}: mount {m['name']} names no volume of template.pod.volumes")
        for o in obs:
            cm = f"{o['metadata']['name']}-observers-{role}"
            sel = o["spec"]["nodes"].get(role + "s", {}).get("selector", {}).get("matchLabels", {})
            if sel.get("strimzi.io/pool-name") != pool or sel.get("strimzi.io/cluster") != d["metadata"].get("labels", {}).get("strimzi.io/cluster"):
                out.append(f"KafkaNodePool/{pool}: ObserverSet/{o['metadata']['name']} does not select it as its {role}s")
            v = [n for n, vol in vols.items() if (vol.get("configMap") or {}).get("name") == cm]
            if role is None or len(v) != 1:
                out.append(f"KafkaNodePool/{pool}: no single volume of ConfigMap {cm}")
                continue
            if vols[v[0]]["configMap"].get("optional") is not False:
                out.append(f"KafkaNodePool/{pool}: ConfigMap volume {v[0]} must say optional: false")
            ms = [m for m in mounts if m["name"] == v[0]]
            if len(ms) != 1 or "subPath" in ms[0] or "subPathExpr" in ms[0]:
                out.append(f"KafkaNodePool/{pool}: volume {v[0]} must be mounted once, as a directory (no subPath)")
                continue
            want = ms[0]["mountPath"].rstrip("/") + "/observer.ids"
            if env.get("KAFKA_OBSERVER_IDS_FILE") != want:
                out.append(f"KafkaNodePool/{pool}: KAFKA_OBSERVER_IDS_FILE is {env.get('KAFKA_OBSERVER_IDS_FILE')!r}, the mount gives {want}")
            ids = sorted(int(x) for x in re.split(r"[,\s]+", env.get("KAFKA_OBSERVER_BROKER_IDS") or "") if x)
            if ids != sorted(o["spec"].get("observers", [])):
                out.append(f"KafkaNodePool/{pool}: KAFKA_OBSERVER_BROKER_IDS {ids} differs from spec.observers {o['spec'].get('observers')}")
    return out

for p in contract(objects) or [None]:
    if p is None:
        passed += 1
        print("strimzi-check: ok   Strimzi's operator-side volume rules and the observer.ids contract hold")
    else:
        failed += 1
        print(f"strimzi-check: FAIL {p}")

broken_pools = []
for what, change, expect in [
    ("mount outside /mnt", lambda kc, pod: kc["volumeMounts"][0].update(mountPath="/etc/kafka/observer"), "outside /mnt"),
    ("subPath mount", lambda kc, pod: kc["volumeMounts"][0].update(subPath="observer.ids"), "no subPath"),
    ("optional ConfigMap", lambda kc, pod: pod["volumes"][0]["configMap"].update(optional=True), "optional: false"),
    ("fallback ids 3", lambda kc, pod: kc["env"][2].update(value="3"), "differs from spec.observers"),
]:
    objs = copy.deepcopy(objects)
    pool = next(d for _, d in objs if d.get("kind") == "KafkaNodePool")
    change(pool["spec"]["template"]["kafkaContainer"], pool["spec"]["template"]["pod"])
    out = contract(objs)
    if any(expect in p for p in out):
        passed += 1
        print(f"strimzi-check: ok   rejected as expected: {what}: {next(p for p in out if expect in p)}")
    else:
        failed += 1
        print(f"strimzi-check: FAIL not rejected for '{expect}': {what}: {out}")

# Broken copies must be rejected, each for the reason named.
def find(kind, name=None):
    return next(copy.deepcopy(d) for _, d in objects
                if d["kind"] == kind and (name is None or d["metadata"]["name"] == name))

broken = []
o = find("Kafka"); o["spec"]["kafka"]["replicas"] = 3
broken.append(("Kafka with spec.kafka.replicas (not in v1)", o, "unknown field"))
o = find("Kafka"); o["spec"]["kafka"]["listeners"][0]["name"] = "plain-listener"
broken.append(("Kafka listener name with '-'", o, "does not match"))
o = find("KafkaNodePool", "brokers"); del o["spec"]["template"]["kafkaContainer"]["env"][0]["value"]
broken.append(("KafkaNodePool env entry without value", o, "is not valid under any of the given schemas"))
o = find("KafkaNodePool", "brokers"); o["spec"]["template"]["pod"]["volumes"][0]["configMap"]["optional"] = "no"
broken.append(("KafkaNodePool configMap.optional not a boolean", o, "is not of type 'boolean'"))
o = find("ObserverSet"); o["spec"]["observers"] = [4, 4]
broken.append(("ObserverSet with observers [4, 4]", o, "CEL"))
o = find("ObserverSet"); o["spec"]["rollout"]["settleTime"] = "2h"
broken.append(("ObserverSet settleTime 2h", o, "settleTime must be between"))
o = find("ObserverSet"); o["spec"]["rollout"]["acknowledgement"] = "Sidecar"
broken.append(("ObserverSet acknowledgement Sidecar", o, "is not one of"))
for what, o, expect in broken:
    _, out = problems(o)
    if any(expect in p for p in out):
        passed += 1
        print(f"strimzi-check: ok   rejected as expected: {what}: {next(p for p in out if expect in p)[:160]}")
    else:
        failed += 1
        print(f"strimzi-check: FAIL not rejected for '{expect}': {what}: {out}")
print(f"strimzi-check: CEL rules evaluated: {rules_seen[0]}")
print(f"client: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
}

# ---- server -------------------------------------------------------------------------------------
# Global, for the EXIT trap: the apiserver and what this run created there.
kubeconfig=""
kubectl_cmd=""
ns=""
created=()
server() {
  local fails=0 f crd name out rc line
  kubeconfig="${1:-${KUBECONFIG:-}}"
  [[ -n "$kubeconfig" && -f "$kubeconfig" ]] ||
    die "no kubeconfig: give it as the argument or in KUBECONFIG (got '${kubeconfig}')"
  kubectl_cmd="${KUBECTL:-}"
  [[ -n "$kubectl_cmd" ]] || { [[ -x "$k8s_bin/kubectl" ]] && kubectl_cmd="$k8s_bin/kubectl"; } ||
    kubectl_cmd="$(type -P kubectl)" || die "no kubectl: set KUBECTL"
  kc() { "$kubectl_cmd" --kubeconfig "$kubeconfig" "$@"; }
  kc get --raw /version >/dev/null || die "the apiserver of $kubeconfig does not answer"
  cleanup() {
    local c
    [[ -z "$ns" ]] || kc delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    if [[ "${KEEP_CRDS:-0}" != 1 ]]; then
      for c in "${created[@]}"; do
        kc delete crd "$c" --ignore-not-found --wait=false >/dev/null 2>&1 || true
      done
    fi
  }
  trap cleanup EXIT
  for crd in "$crd_dir/040-Crd-kafka.yaml" "$crd_dir/045-Crd-kafkanodepool.yaml" "$koo_crd"; do
    name="$(awk '/^metadata:/ {m = 1} m && /^  name:/ {print $2; exit}' "$crd")"
    if kc get crd "$name" >/dev/null 2>&1; then
      echo "strimzi-check: crd  $name already present: left as it is"
    else
      kc create -f "$crd" >/dev/null
      created+=("$name")
      # shellcheck disable=SC2312 # message text only
      echo "strimzi-check: crd  $name created from $(sed -e "s|^$KOO_CACHE/|\$KOO_CACHE/|" -e "s|^$root/||" <<<"$crd")"
    fi
    # Not `kubectl wait --for=condition=Established`: right after the create the CRD has no
    # status.conditions yet, and kubectl wait fails on that instead of waiting.
    for _ in $(seq 120); do
      # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
      [[ "$(kc get crd "$name" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == True ]] && break
      sleep 0.5
    done
    # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
    [[ "$(kc get crd "$name" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" == True ]] ||
      die "crd $name not Established within 60 s"
  done
  ns="koo-strimzi-check-$$"
  kc create namespace "$ns" >/dev/null
  dry_run() { kc apply --dry-run=server --validate=strict -n "$ns" -f "$1" 2>&1; }
  for f in "$examples"/*.yaml; do
    rc=0; out="$(dry_run "$f")" || rc=$?
    while IFS= read -r line; do
      [[ -n "$line" ]] || continue
      case "$line" in
        Warning:*) echo "strimzi-check: warn ${f##*/}: $line" ;;
        *"(server dry run)"*) echo "strimzi-check: ok   ${f##*/}: $line" ;;
        *) echo "strimzi-check: FAIL ${f##*/}: $line" ;;
      esac
    done <<<"$out"
    ((rc == 0)) || fails=$((fails + 1))
  done
  # Rejections: each broken object must be refused.
  local work; work="$(mktemp -d)"
  cat > "$work/kafka-unknown-field.yaml" <<'EOF'
apiVersion: kafka.strimzi.io/v1
kind: Kafka
metadata: {name: broken}
spec:
  kafka:
    replicas: 3
    listeners: [{name: plain, port: 9092, type: internal, tls: false}]
EOF
  cat > "$work/nodepool-env-without-value.yaml" <<'EOF'
apiVersion: kafka.strimzi.io/v1
kind: KafkaNodePool
metadata: {name: broken, labels: {strimzi.io/cluster: broken}}
spec:
  replicas: 1
  roles: [broker]
  storage: {type: ephemeral}
  template:
    kafkaContainer:
      env: [{name: KAFKA_OBSERVER_IDS_FILE}]
EOF
  cat > "$work/observerset-duplicate-observers.yaml" <<'EOF'
apiVersion: kafkaobserver.io/v1alpha1
kind: ObserverSet
metadata: {name: broken}
spec:
  kafka: {bootstrapServers: "broken-kafka-bootstrap:9092"}
  nodes:
    controllers: {selector: {matchLabels: {strimzi.io/pool-name: c}}, nodeId: {ordinalOffset: 0}}
    brokers: {selector: {matchLabels: {strimzi.io/pool-name: b}}, nodeId: {ordinalOffset: 0}}
  observers: [4, 4]
  rollout: {acknowledgement: Time}
EOF
  for f in "$work"/*.yaml; do
    rc=0; out="$(dry_run "$f")" || rc=$?
    if ((rc != 0)); then
      # shellcheck disable=SC2312 # message text only
      echo "strimzi-check: ok   rejected as expected: ${f##*/}: $(grep -v '^Warning:' <<<"$out" | head -1 | cut -c1-200)"
    else
      echo "strimzi-check: FAIL accepted: ${f##*/}: $out"; fails=$((fails + 1))
    fi
  done
  rm -rf "$work"
  ((fails == 0)) || { echo "strimzi-check: $fails failure(s)"; exit 1; }
  echo "strimzi-check: every example object accepted by the apiserver, every broken one refused"
}

case "${1:-server}" in
  crds) make_crds; echo "$crd_dir" ;;
  client) make_crds; client ;;
  server) make_crds; server "${2:-}" ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' ;;
  *) make_crds; server "$1" ;;   # a kubeconfig path as the only argument
esac
