#!/usr/bin/env bash
# examples/kafka-two-observers/ on the bed's real node, in a namespace of its own (kafka-two,
# beside the bed's cluster in kafka), applied as the example's README says, then checked:
#   1. 8 Kafka pods Ready, each JVM's start-up proof ("observer patch active"), the ObserverSet
#      Ready, both observer lists "4,5"
#   2. a topic 1:2:4:5 (two primaries, both observers), min ISR 2: its ISR is 1,2
#   3. spec.promotion.promoted [4]: 4 joins the ISR and 5 does not (it stays an observer)
#   4. promoted []: 4 leaves the ISR again (Kafka's ISR shrink after replica.lag.time.max.ms)
# and removed afterwards (e2e/example-lib.sh). Prints one line:
#   EXAMPLE two-observers PASS <s>s   or   EXAMPLE two-observers FAIL <reason>
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_tag="two-observers" log_time="%T"
example=two-observers ns="${KOO_TWO_NAMESPACE:-kafka-two}"
source "$root/e2e/example-lib.sh"
dir="$root/examples/kafka-two-observers"

# ---- apply, as examples/kafka-two-observers/README.md says --------------------------------------
kubectl create namespace "$ns" >/dev/null
KOO_BROKER_COUNT=5 local_pvs
sed "s/\.kafka-two\.svc:/.$ns.svc:/" "$dir/observerset.yaml" | kubectl -n "$ns" apply -f - >/dev/null
kubectl -n "$ns" apply -k "$dir" >/dev/null
log "applied in $ns; waiting for 3 controllers and 5 brokers"
wait_for 300 "8 Kafka pods Ready in $ns" pods_ready 8
wait_patched kafka-controller-{0..2} kafka-broker-{0..4}
wait_for 120 "ObserverSet $ns/kafka Ready" obs_ready
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
[[ "$(list controller)" == 4,5 && "$(list broker)" == 4,5 ]] ||
  die "observer lists: controllers '$(list controller)', brokers '$(list broker)', expected 4,5"
log "8 pods Ready with the patch active, ObserverSet Ready, both lists 4,5"

# ---- a topic of two primaries and both observers ------------------------------------------------
create_topic 1:2:4:5
wait_for 60 "ISR 1,2 on $topic" isr_is 1,2
# shellcheck disable=SC2312 # message text only
log "$topic: replicas 1,2,4,5, ISR $(isr)"

# ---- promote 4, not 5 ---------------------------------------------------------------------------
promote 4
t=$SECONDS
wait_for 60 "4 in the ISR after its promotion" isr_has 4
# shellcheck disable=SC2312 # message text only
log "promoted 4: ISR $(isr) after $((SECONDS - t)) s; lists: controllers $(list controller), brokers $(list broker)"
# shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
[[ "$(list controller)" == 5 && "$(list broker)" == 5 ]] || die "after promoting 4 the lists should be 5: $(list controller) / $(list broker)"
sleep 5
# shellcheck disable=SC2312 # message text only
! isr_has 5 || die "5 joined the ISR although it is still an observer: $(isr)"

# ---- demote 4 again -----------------------------------------------------------------------------
promote ""
t=$SECONDS
wait_for 90 "4 out of the ISR after its demotion" isr_is 1,2
# shellcheck disable=SC2312 # message text only
log "demoted 4: ISR $(isr) after $((SECONDS - t)) s; lists $(list controller) / $(list broker)"
