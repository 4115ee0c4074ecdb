# shellcheck shell=bash
# D13, D14: the promotion drill D1 with the operator reaching Kafka only through a secured
# listener of examples/kafka-secured/ (the bed's certificates and Secrets: e2e/testbed/kafka/pki.sh).
# Sourced by run.sh.
#
# D13, SASL_SSL with SCRAM-SHA-512 (kafka-bootstrap.<ns>.svc:9094, CA Secret kafka-ca, user
# Secret kafka-user):
#   0. a Secret that has not opted in to the set (no annotation kafkaobserver.io/observer-sets):
#      KafkaReachable=False, reason SecretInvalid, the message names the Secret and the annotation
#      to add and shows no credential
#   1. the same Secret (a wrong password) opted in: KafkaReachable=False, its message names the
#      user, the mechanism and the Secret; nothing promoted or demoted meanwhile
#   2. the right Secret: KafkaReachable=True; D1 end to end (zone 1 lost, automatic promotion,
#      writes resumed, zone 1 back, automatic demotion, every acknowledged record read once)
#   3. the password rotated (Kafka's credential first, then the Secret): the operator logs the
#      new connection settings and stays KafkaReachable=True without a restart
# D14, mutual TLS (kafka-bootstrap.<ns>.svc:9095, client certificate Secret kafka-client):
#   1. a client certificate that expired in 2021 (the listeners' CA signed it): KafkaReachable=
#      False, its message names the Secret that holds it
#   2. the valid certificate: KafkaReachable=True; D1 end to end
# The spec change goes through `kubectl patch` of the ObserverSet; restore_scenario replaces it
# with the example's (plaintext) spec, and the drills delete the Secrets they made. Every Secret
# the set uses opts in to it (the bed's own since e2e/testbed/kafka/pki.sh does it; annotated again
# here, so a bed made before keeps working).

set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d13() {
  local t0 t_false t_true wrong="d13-wrong-password"
  opt_in kafka-ca kafka-user
  kubectl -n "$KAFKA_NS" create secret generic "$wrong" --from-literal=username=koo-observer \
    --from-literal=password=not-the-password >/dev/null || fail "cannot create Secret $wrong"
  on_restore "kubectl -n $KAFKA_NS delete secret $wrong --ignore-not-found >/dev/null"
  wait_obs 60 "KafkaReachable True at the start" '[[ "$(reachable)" == True ]]'
  local before
  before="$(cm_snapshot)" || fail "the ConfigMaps cannot be read at the start"

  log "== SASL_SSL with a Secret that has not opted in to the set"
  t0="$(now_ms)"
  connect_sasl_ssl "$wrong"
  wait_obs 60 "KafkaReachable SecretInvalid for the Secret without the annotation" \
    '[[ "$(reachable_reason)" == SecretInvalid ]]'
  expect_reachable_message "Secret $KAFKA_NS/$wrong has no annotation $OPT_IN" "$OPT_IN=$OBS"
  expect_not_shown koo-observer "$t0"
  expect_not_shown not-the-password "$t0"

  log "== SASL_SSL with a wrong password"
  opt_in "$wrong"
  wait_obs 60 "KafkaReachable False with the wrong password" \
    '[[ "$(reachable_reason)" == ScanFailed ]]'
  t_false="$(now_ms)"
  expect_reachable_message "SASL authentication failed for the user in Secret $KAFKA_NS/$wrong key username (SCRAM-SHA-512" "Secret $KAFKA_NS/$wrong key password"
  # The username is a credential too: named by its Secret and key, its value shown nowhere.
  expect_not_shown koo-observer "$t0"
  expect_no_auto_promotion "something was promoted while the operator could not authenticate"
  expect_lists_unchanged "$before" "a ConfigMap changed while the operator could not authenticate"

  log "== SASL_SSL with the right password"
  connect_sasl_ssl kafka-user
  wait_obs 60 "KafkaReachable True over SASL_SSL" '[[ "$(reachable)" == True ]]'
  t_true="$(now_ms)"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D13 wrong_password_to_condition_false_s=$(secs "$t0" "$t_false") right_password_to_condition_true_s=$(secs "$t_false" "$t_true")"
  zone_lost_and_back D13

  log "== the password rotated: Kafka's credential, then the Secret"
  # shellcheck disable=SC2154 # kstate: set by ../kafka/lib.sh, sourced by run.sh before this file
  local pki="$kstate/pki" new since
  new="$(openssl rand -hex 16)"
  # Whatever happens below, Kafka and the Secret get the bed's password back.
  on_restore "scram_password \"\$(cat $pki/scram-password)\" && user_secret \"\$(cat $pki/scram-password)\""
  # shellcheck disable=SC2034 # read by the wait_obs condition below (a string, evaluated there)
  since="$(date -u +%FT%TZ)"
  scram_password "$new" || fail "cannot change the SCRAM password of koo-observer in Kafka"
  user_secret "$new" || fail "cannot update Secret kafka-user"
  t0="$(now_ms)"
  wait_obs 60 "the operator to log new connection settings after the rotation" \
    '[[ -n "$(settings_changed_since "$since")" ]]'
  # The watcher made after the change authenticates with the new password only: the old one is
  # gone from Kafka. Two scans later the condition must still be True.
  sleep 3
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(reachable)" == True ]] ||
    fail "KafkaReachable $(reachable) after the rotation: $(obs_get '{.status.conditions[?(@.type=="KafkaReachable")].message}')"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D13 rotation_to_new_settings_s=$(secs "$t0" "$(now_ms)") reachable_after_rotation=True"
}

scenario_d14() {
  local t0 t_false t_true expired="d14-expired-client" dir="$SCENARIO_DIR/expired"
  expired_client_cert "$dir" || fail "cannot make the expired client certificate"
  kubectl -n "$KAFKA_NS" create secret tls "$expired" --cert="$dir/client.crt" --key="$dir/client.key" >/dev/null ||
    fail "cannot create Secret $expired"
  on_restore "kubectl -n $KAFKA_NS delete secret $expired --ignore-not-found >/dev/null"
  opt_in kafka-ca kafka-client "$expired"
  wait_obs 60 "KafkaReachable True at the start" '[[ "$(reachable)" == True ]]'

  log "== mutual TLS with an expired client certificate"
  t0="$(now_ms)"
  connect_mtls "$expired"
  wait_obs 60 "KafkaReachable False with the expired certificate" '[[ "$(reachable)" == False ]]'
  t_false="$(now_ms)"
  expect_reachable_message "refused the client certificate" "Secret $KAFKA_NS/$expired"
  expect_no_auto_promotion "something was promoted while the operator could not connect"

  log "== mutual TLS with the valid client certificate"
  connect_mtls kafka-client
  wait_obs 60 "KafkaReachable True over mutual TLS" '[[ "$(reachable)" == True ]]'
  t_true="$(now_ms)"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D14 expired_certificate_to_condition_false_s=$(secs "$t0" "$t_false") valid_certificate_to_condition_true_s=$(secs "$t_false" "$t_true")"
  zone_lost_and_back D14
}

# The annotation by which a Secret lets ObserverSets use it (src/kafka/secret_opt_in.rs).
OPT_IN="kafkaobserver.io/observer-sets"
# reachable_reason: the reason of the KafkaReachable condition.
reachable_reason() { obs_get '{.status.conditions[?(@.type=="KafkaReachable")].reason}'; }
# opt_in SECRET...: each Secret opts in to the drills' ObserverSet $OBS.
opt_in() {
  local secret
  for secret in "$@"; do
    kubectl -n "$KAFKA_NS" annotate secret "$secret" "$OPT_IN=$OBS" --overwrite >/dev/null ||
      fail "cannot annotate Secret $secret with $OPT_IN=$OBS"
  done
}

# connect_sasl_ssl USER_SECRET: the ObserverSet reaches Kafka only on the SASL_SSL listener.
connect_sasl_ssl() {
  obs_patch "{\"spec\":{\"kafka\":{\"bootstrapServers\":\"kafka-bootstrap.$KAFKA_NS.svc:9094\",\"tls\":{\"caSecretRef\":{\"name\":\"kafka-ca\",\"key\":\"ca.crt\"},\"clientCertSecretRef\":null},\"sasl\":{\"mechanism\":\"SCRAM-SHA-512\",\"secretRef\":{\"name\":\"$1\"}}}}}"
}
# connect_mtls CLIENT_SECRET: only on the mutual-TLS listener, no SASL.
connect_mtls() {
  obs_patch "{\"spec\":{\"kafka\":{\"bootstrapServers\":\"kafka-bootstrap.$KAFKA_NS.svc:9095\",\"tls\":{\"caSecretRef\":{\"name\":\"kafka-ca\",\"key\":\"ca.crt\"},\"clientCertSecretRef\":{\"name\":\"$1\"}},\"sasl\":null}}}"
}

# expect_reachable_message TEXT...: the KafkaReachable message contains every TEXT.
expect_reachable_message() {
  local message text
  message="$(obs_get '{.status.conditions[?(@.type=="KafkaReachable")].message}')"
  for text in "$@"; do
    [[ "$message" == *"$text"* ]] || fail "the KafkaReachable message does not say '$text': $message"
  done
  log "KafkaReachable False: $message"
}

# expect_not_shown TEXT SINCE_MS: TEXT (a credential) appears in no status of the ObserverSet, no
# Event about it and no operator log line since SINCE_MS; each source must be readable.
expect_not_shown() {
  local status events logs since
  status="$(kubectl -n "$KAFKA_NS" get obs "$OBS" -o jsonpath='{.status}')" || fail "the ObserverSet cannot be read"
  [[ -n "$status" ]] || fail "the ObserverSet has no status to check"
  [[ "$status" != *"$1"* ]] || fail "the ObserverSet's status shows the credential '$1'"
  # A second early: an Event of the same second must not be left out by the string comparison.
  since="$(date -u -d "@$(($2 / 1000 - 1))" +%Y-%m-%dT%H:%M:%SZ)" || fail "bad time $2"
  # Events of this drill only (an earlier run's stay for an hour): by their last time.
  events="$(kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS" \
    -o jsonpath='{range .items[*]}{.eventTime}{.lastTimestamp} {.message}{"\n"}{end}')" ||
    fail "the Events of $OBS cannot be listed"
  events="$(awk -v since="$since" '$1 >= since' <<<"$events")" || fail "the Events of $OBS cannot be filtered"
  [[ -n "$events" ]] || fail "no Event about $OBS since $since to check (the wrong password gives a KafkaUnreachable Event)"
  [[ "$events" != *"$1"* ]] || fail "an Event about $OBS shows the credential '$1'"
  logs="$(kubectl -n "$OPERATOR_NS" logs -l "$OPERATOR_LABEL" --since-time="$since" --prefix)" || fail "the operator's logs cannot be read"
  [[ -n "$logs" ]] || fail "no operator log line since $since to check"
  # shellcheck disable=SC2312 # the failure message only: the check is the [[ ]] before it
  [[ "$logs" != *"$1"* ]] || fail "an operator log line shows the credential '$1': $(grep -m1 -F "$1" <<<"$logs")"
}

# The operator pods' log lines since TIME (RFC 3339) about changed Kafka connection settings.
settings_changed_since() {
  kubectl -n "$OPERATOR_NS" logs -l "$OPERATOR_LABEL" --since-time="$1" --prefix 2>/dev/null |
    grep 'connection settings changed' || true
}

# scram_password PASSWORD: koo-observer's SCRAM-SHA-512 credential in Kafka (over PLAINTEXT).
scram_password() {
  # shellcheck disable=SC2312,SC2154 # bootstrap was resolved by run.sh; kafka-configs fails on an empty one; tb: set by e2e/lib.sh, sourced by run.sh before this file
  "$tb/bin/kafka-configs" --bootstrap-server "$(bootstrap)" --alter --entity-type users \
    --entity-name koo-observer --add-config "SCRAM-SHA-512=[password=$1]" >/dev/null
}
# user_secret PASSWORD: Secret kafka-user with that password, opted in to $OBS (an apply without
# the annotation would remove the one pki.sh applied).
user_secret() {
  kubectl -n "$KAFKA_NS" create secret generic kafka-user --from-literal=username=koo-observer \
    --from-literal=password="$1" --dry-run=client -o yaml |
    kubectl annotate --local -f - "$OPT_IN=$OBS" -o yaml | kubectl -n "$KAFKA_NS" apply -f - >/dev/null
}

# expired_client_cert DIR: DIR/client.crt and .key, CN=koo-observer, clientAuth, signed by the
# listeners' CA, valid from 2020-01-01 to 2021-01-01 (openssl ca: openssl x509 cannot backdate).
expired_client_cert() {
  local d="$1" pki="$kstate/pki"
  mkdir -p "$d" && : > "$d/index.txt" && echo 1000 > "$d/serial" || return 1
  cat > "$d/ca.cnf" <<EOF
[ca]
default_ca = bed
[bed]
database = $d/index.txt
new_certs_dir = $d
serial = $d/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
EOF
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/client.key" 2>/dev/null &&
    openssl req -new -key "$d/client.key" -subj "/CN=koo-observer" -out "$d/client.csr" 2>/dev/null &&
    openssl ca -batch -notext -config "$d/ca.cnf" -extensions client -cert "$pki/kafka-ca.crt" \
      -keyfile "$pki/kafka-ca.key" -startdate 20200101000000Z -enddate 20210101000000Z \
      -in "$d/client.csr" -out "$d/client.crt" 2>/dev/null
}
