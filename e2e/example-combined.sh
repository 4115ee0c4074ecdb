#!/usr/bin/env bash
# examples/kafka-combined/ (KRaft combined mode) on the bed's real node, in a namespace of its own
# (kafka-combined, beside the bed's cluster in kafka), applied as the example's README says, then
# checked:
#   1. 4 Kafka pods Ready with the patch active; kafka-broker-0..2 started combined (broker +
#      controller), kafka-broker-3 a broker only; the metadata quorum's voters are 1, 2, 3 and
#      4 is not one
#   2. the ObserverSet Ready with one list (brokers "4") and no controllers' ConfigMap
#   3. a topic 1:2:4, min ISR 2: its ISR is 1,2
#   4. spec.promotion.promoted [4]: the list empties and 4 joins the ISR
#   5. promoted []: the list is 4 again and 4 leaves the ISR
# and removed afterwards (e2e/example-lib.sh). Prints one line:
#   EXAMPLE combined PASS <s>s   or   EXAMPLE combined FAIL <reason>
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_tag="combined" log_time="%T"
example=combined ns="${KOO_COMBINED_NAMESPACE:-kafka-combined}"
source "$root/e2e/example-lib.sh"
dir="$root/examples/kafka-combined"

# ---- apply, as examples/kafka-combined/README.md says -------------------------------------------
kubectl create namespace "$ns" >/dev/null
KOO_CONTROLLER_COUNT=0 KOO_BROKER_COUNT=4 local_pvs
sed "s/\.kafka-combined\.svc:/.$ns.svc:/" "$dir/observerset.yaml" | kubectl -n "$ns" apply -f - >/dev/null
kubectl -n "$ns" apply -k "$dir" >/dev/null
log "applied in $ns; waiting for 4 pods (3 combined, 1 broker)"
wait_for 300 "4 Kafka pods Ready in $ns" pods_ready 4
wait_patched kafka-broker-{0..3}
started_as() { kubectl -n "$ns" logs "$1" -c kafka 2>/dev/null | grep "KAFKA_ROLE=auto: node $2 is $3 " >/dev/null; }
for i in 0 1 2; do started_as "kafka-broker-$i" $((i + 1)) combined || die "kafka-broker-$i did not start combined"; done
started_as kafka-broker-3 4 broker || die "kafka-broker-3 did not start as a broker only"
create_topic 1:2:4
quorum="$("$tb/bin/kafka-metadata-quorum" --bootstrap-server "$bootstrap" describe --replication 2>&1)" ||
  die "kafka-metadata-quorum failed: $quorum"
voters="$(awk '$NF == "Leader" || $NF == "Follower" { print $1 }' <<<"$quorum" | sort -n | paste -sd, -)"
[[ "$voters" == 1,2,3 ]] || die "metadata quorum voters '$voters', expected 1,2,3: $quorum"
awk '$1 == 4 && $NF == "Observer" { found = 1 } END { exit !found }' <<<"$quorum" ||
  die "node 4 is not a non-voting member of the metadata quorum: $quorum"
log "4 pods Ready with the patch active; voters $voters, node 4 a broker only"

# ---- one list, one step ---------------------------------------------------------------------------
wait_for 120 "ObserverSet $ns/kafka Ready" obs_ready
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
[[ "$(list broker)" == 4 ]] || die "brokers' list '$(list broker)', expected 4"
! kubectl -n "$ns" get configmap kafka-observers-controller >/dev/null 2>&1 ||
  die "a controllers' ConfigMap exists, but combined mode has no controllers' step"
roles_controller="$(kubectl -n "$ns" get obs kafka -o jsonpath='{.status.roles.controller}')" ||
  die "cannot read ObserverSet $ns/kafka"
[[ -z "$roles_controller" ]] || die "status.roles has a controller entry in combined mode"
log "ObserverSet Ready; one list (brokers: 4), no controllers' ConfigMap or status"

# ---- promote 4 and demote it again ----------------------------------------------------------------
wait_for 60 "ISR 1,2 on $topic" isr_is 1,2
promote 4
t=$SECONDS
wait_for 60 "4 in the ISR after its promotion" isr_has 4
# shellcheck disable=SC2312 # message text only
log "promoted 4: ISR $(isr) after $((SECONDS - t)) s; list '$(list broker)'"
brokers_list="$(list broker)" || die "cannot read the brokers' ConfigMap after promoting 4"
[[ -z "$brokers_list" ]] || die "after promoting 4 the list should be empty: '$brokers_list'"
promote ""
t=$SECONDS
wait_for 90 "4 out of the ISR after its demotion" isr_is 1,2
# shellcheck disable=SC2312 # message text only
log "demoted 4: ISR $(isr) after $((SECONDS - t)) s; list $(list broker)"
