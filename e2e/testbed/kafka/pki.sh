# shellcheck shell=bash
# The secured listeners' PKI of one bed namespace (sourced by e2e/testbed/kafka.sh): the brokers
# of examples/kafka-secured/ need the Secret kafka-broker-tls, and the ObserverSets and drills
# that connect over SASL_SSL or mutual TLS use the client side. Its own CA (not the bed's
# Kubernetes CA, which signs the apiserver's and kubelet's certificates), in $state/pki:
#
#   kafka-ca.crt / .key       the listeners' CA, 10 years
#   broker.crt / .key         serverAuth, DNS *.kafka-broker.<ns>.svc.cluster.local (the names the
#                             brokers advertise on 9094/9095) and kafka-bootstrap.<ns>.svc[.cluster.local]
#   client.crt / .key         clientAuth, CN=koo-observer: the operator's mutual-TLS identity
#   scram-password            the SCRAM-SHA-512 password of user koo-observer
#
# Secrets in the namespace (created or updated, never deleted here):
#   kafka-broker-tls   kubernetes.io/tls: tls.crt, tls.key (broker), ca.crt (trusts client certs)
#   kafka-ca           ca.crt: what a client trusts
#   kafka-user         username koo-observer, password (SCRAM-SHA-512)
#   kafka-client       kubernetes.io/tls: tls.crt, tls.key (client certificate koo-observer)
# The last three opt in to the example's ObserverSet, $OPT_IN_SETS (annotation $OPT_IN, which the
# operator requires: docs/kafka-security.md); the brokers' own kafka-broker-tls does not, so no
# ObserverSet can have the operator read the brokers' key.
# The user koo-observer itself is created in Kafka by scram_user once the brokers run.

SCRAM_USER="koo-observer"
OPT_IN="kafkaobserver.io/observer-sets"
# The ObserverSet of examples/observersets/ and the drills (e2e/drills/operator/lib.sh: OBS).
OPT_IN_SETS="kafka"

# pki_issue DIR NAME SUBJECT EXT_KEY_USAGE [SAN]: an EC P-256 key (PKCS#8, what Kafka's PEM key
# store reads) and a certificate the listeners' CA signs; kept when it exists. Each step's status
# is checked: listener_pki runs it on the left of `||`, where set -e does not apply.
pki_issue() {
  local dir="$1" name="$2" subj="$3" eku="$4" san="${5:-}"
  [[ -f "$dir/$name.crt" && -f "$dir/$name.key" ]] && return 0
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/$name.key" 2>/dev/null || return 1
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$eku"
    [[ -z "$san" ]] || echo "subjectAltName=$san"
  } > "$dir/$name.ext" || return 1
  openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null || return 1
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/kafka-ca.crt" -CAkey "$dir/kafka-ca.key" \
    -CAcreateserial -sha256 -days 3650 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null || return 1
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

# shellcheck disable=SC2154 # state, ns: set by kafka.sh before it calls this
listener_pki() {
  local dir="$state/pki" ca
  mkdir -p "$dir" && chmod 700 "$dir"
  # Every step with `|| exit 1`: on the left of `||`, set -e does not apply in the subshell, whose
  # status would otherwise be its last command's only.
  (
    umask 077
    if [[ ! -f "$dir/kafka-ca.crt" || ! -f "$dir/kafka-ca.key" ]]; then
      rm -f "$dir"/*.crt "$dir"/*.key "$dir"/*.srl
      openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/kafka-ca.key" 2>/dev/null || exit 1
      openssl req -x509 -new -key "$dir/kafka-ca.key" -sha256 -days 3650 -subj "/CN=koo-testbed-kafka-ca-$ns" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$dir/kafka-ca.crt" 2>/dev/null || exit 1
    fi
    pki_issue "$dir" broker "/CN=kafka-broker.$ns" serverAuth \
      "DNS:*.kafka-broker.$ns.svc.cluster.local,DNS:*.kafka-broker.$ns.svc,DNS:kafka-bootstrap.$ns.svc,DNS:kafka-bootstrap.$ns.svc.cluster.local" || exit 1
    pki_issue "$dir" client "/CN=$SCRAM_USER" clientAuth || exit 1
    if [[ ! -s "$dir/scram-password" ]]; then
      # $(...) drops the newline as tr did, without a pipeline that would mask openssl's status.
      password="$(openssl rand -hex 16)" || exit 1
      printf '%s' "$password" > "$dir/scram-password"
    fi
  ) || die "cannot create the listeners' PKI in $dir"
  secret_apply tls kafka-broker-tls --cert="$dir/broker.crt" --key="$dir/broker.key"
  # kubectl create secret tls takes no ca.crt: add it to the same object.
  ca="$(base64 -w0 < "$dir/kafka-ca.crt")" || die "cannot read $dir/kafka-ca.crt"
  kubectl -n "$ns" patch secret kafka-broker-tls --type merge \
    -p "{\"data\":{\"ca.crt\":\"$ca\"}}" >/dev/null ||
    die "cannot add ca.crt to Secret $ns/kafka-broker-tls"
  opt_in="$OPT_IN_SETS" secret_apply generic kafka-ca --from-file=ca.crt="$dir/kafka-ca.crt"
  opt_in="$OPT_IN_SETS" secret_apply generic kafka-user --from-literal=username="$SCRAM_USER" --from-file=password="$dir/scram-password"
  opt_in="$OPT_IN_SETS" secret_apply tls kafka-client --cert="$dir/client.crt" --key="$dir/client.key"
}

# secret_apply TYPE NAME ARGS...: `kubectl create secret` as an apply (create or update); with
# opt_in=SETS in its environment, the Secret carries $OPT_IN=SETS (`kubectl create secret` has no
# flag for annotations: `kubectl annotate --local` adds it to the object before the apply).
secret_apply() {
  local type="$1" name="$2" annotate=(cat)
  shift 2
  [[ -z "${opt_in:-}" ]] || annotate=(kubectl annotate --local -f - "$OPT_IN=$opt_in" -o yaml)
  # shellcheck disable=SC2312 # not masked: kafka.sh, which sources this, sets pipefail (and apply fails on no input)
  kubectl -n "$ns" create secret "$type" "$name" "$@" --dry-run=client -o yaml | "${annotate[@]}" |
    kubectl -n "$ns" apply -f - >/dev/null || die "cannot apply Secret $ns/$name"
}

# scram_user: user koo-observer with the password of $state/pki/scram-password, SCRAM-SHA-512, in
# the cluster's metadata (an upsert: the same password again changes nothing a client sees).
# The password read apart: an unreadable file would otherwise set an empty one.
scram_user() {
  local out server password
  server="$(bootstrap)" || die "no bootstrap address for the SCRAM user $SCRAM_USER"
  password="$(cat "$state/pki/scram-password")" || die "cannot read $state/pki/scram-password"
  # shellcheck disable=SC2154 # tb: set by e2e/lib.sh, sourced by kafka.sh before this file
  out="$("$tb/bin/kafka-configs" --bootstrap-server "$server" --alter --entity-type users \
    --entity-name "$SCRAM_USER" --add-config "SCRAM-SHA-512=[password=$password]" 2>&1)" ||
    die "cannot create the SCRAM user $SCRAM_USER: $out"
}
