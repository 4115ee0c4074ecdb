# shellcheck shell=bash
# D8 and D10: what happens to the resource itself. Sourced by run.sh.

# D8: the ObserverSet deleted with the default deletionPolicy (Retain): both ConfigMaps keep
# listing 4, every node's file too, and 4 joins no ISR for 20 s afterwards. Before that, the
# brokers' ConfigMap emptied by hand, then edited to another list, is restored by the operator
# each time (timed).
set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d8() {
  local topic t t_fixed edit
  local policy
  # An empty answer means the default (Retain): a failed read must not pass for it.
  policy="$(obs_get '{.spec.deletionPolicy}')" || fail "cannot read the example ObserverSet's deletionPolicy"
  [[ "$policy" =~ ^(|Retain)$ ]] || fail "the example ObserverSet's deletionPolicy is $policy, expected Retain (the default)"
  topic="$(new_drill_topic d8 1:2:4,2:3:4,3:1:4)"
  start_isr_sampler "$topic"
  t="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_none(4) && isr_min() == 2' 60 "every ISR two primaries, without 4" >/dev/null

  for edit in "" "# edited by hand\n3\n"; do
    t="$(now_ms)"
    kubectl -n "$KAFKA_NS" patch configmap kafka-observers-broker --type merge \
      -p "{\"data\":{\"observer.ids\":\"$edit\"}}" >/dev/null || fail "cannot edit the brokers' ConfigMap"
    # shellcheck disable=SC2312 # a failed read ('?') is not 4: the wait goes on, checked just below
    for _ in $(seq 150); do [[ "$(cm_ids broker)" == 4 ]] && break; sleep 0.2; done
    # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
    [[ "$(cm_ids broker)" == 4 ]] || fail "the brokers' ConfigMap edited to '$edit' was not restored within 30 s (lists '$(cm_ids broker)')"
    t_fixed="$(now_ms)"
    # shellcheck disable=SC2312 # message text only
    echo "DRILL D8 configmap_edited_to='${edit//\\n/ }' restored_after_s=$(secs "$t" "$t_fixed")"
  done
  wait_role_shows broker "4" 30 || fail "brokers$ROLE_PENDING do not show 4 again 30 s after the restore"

  log "== delete the ObserverSet (deletionPolicy Retain)"
  t="$(now_ms)"
  kubectl -n "$KAFKA_NS" delete obs "$OBS" --timeout=60s >/dev/null || fail "the ObserverSet was not deleted within 60 s"
  sleep 20
  local role id
  for role in controller broker; do
    # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
    [[ "$(cm_ids "$role")" == 4 ]] || fail "the ${role}s' ConfigMap lists '$(cm_ids "$role")' after the deletion, expected 4"
    for id in $(role_nodes "$role"); do
      file_shows "$id" "4" || fail "node $id's observer.ids no longer lists 4 after the deletion"
    done
  done
  # shellcheck disable=SC2312 # now_ms (date +%s%3N) does not fail
  never_sample "$SCENARIO_DIR/isr.log" "$t" "$(now_ms)" '!isr_none(4)' "4 joined an ISR after the ObserverSet was deleted"
  echo "DRILL D8 deleted_set_lists_kept=yes observer_in_isr_during_20s=no"
}

# D10: invalid and hostile specs (flapping knobs, Time mode without a settle time, credentials sent
# in clear text to a host of the author's choice, ...) are refused by the apiserver with a message that says what to fix (each a
# server-side dry-run merge patch of the live example ObserverSet: nothing is stored), and a
# second ObserverSet selecting the same pods is marked Conflict with nothing written.
D10_CASES=(
  '{"spec":{"observers":[-1]}}|observers must be node ids >= 0'
  '{"spec":{"observers":[4,4]}}|observers must not list a node id twice'
  '{"spec":{"promotion":{"promoted":[-1]}}}|promotion.promoted must be node ids >= 0'
  '{"spec":{"promotion":{"promoted":[7]}}}|every id in promotion.promoted must also be listed in observers'
  '{"spec":{"promotion":{"promoted":[4,4]}}}|promotion.promoted must not list a node id twice'
  '{"spec":{"rollout":{"timeout":"2 minutes"}}}|spec.rollout.timeout'
  '{"spec":{"rollout":{"timeout":"500ms"}}}|rollout.timeout must be between'
  '{"spec":{"rollout":{"settleTime":"2h"}}}|rollout.settleTime must be between 0s and 1h'
  '{"spec":{"rollout":{"acknowledgement":"Time","settleTime":"0s"}}}|rollout.settleTime must be at least 10s when rollout.acknowledgement is Time'
  '{"spec":{"rollout":{"acknowledgement":"Maybe"}}}|spec.rollout.acknowledgement'
  '{"spec":{"promotion":{"cooldown":"1.5s"}}}|spec.promotion.cooldown'
  '{"spec":{"promotion":{"cooldown":"25h"}}}|promotion.cooldown must be between 5s and 24h'
  '{"spec":{"promotion":{"cooldown":"0s"}}}|promotion.cooldown must be between 5s and 24h'
  '{"spec":{"promotion":{"policy":"Sometimes"}}}|spec.promotion.policy'
  '{"spec":{"promotion":{"confirmations":0}}}|spec.promotion.confirmations'
  '{"spec":{"promotion":{"confirmations":101}}}|promotion.confirmations must be between 1 and 100'
  '{"spec":{"promotion":{"maxConcurrentPromotions":0}}}|promotion.maxConcurrentPromotions must be between 1 and 256'
  '{"spec":{"promotion":{"maxLagMessages":-1}}}|promotion.maxLagMessages must be 0 or more'
  '{"spec":{"promotion":{"scanInterval":"50ms"}}}|promotion.scanInterval must be between 100ms and 10m'
  '{"spec":{"promotion":{"autoDemote":{"enabled":true,"stabilizationWindow":"1441m"}}}}|promotion.autoDemote.stabilizationWindow must be between 10s and 24h'
  '{"spec":{"promotion":{"autoDemote":{"enabled":true,"stabilizationWindow":"0s"}}}}|promotion.autoDemote.stabilizationWindow must be between 10s and 24h'
  '{"spec":{"rollout":{"acknowledgement":"Time","settleTime":"30s","timeout":"30s"}}}|rollout.timeout must be longer than rollout.settleTime when rollout.acknowledgement is Time'
  '{"spec":{"rollout":{"agentPort":0}}}|rollout.agentPort must be between 1 and 65535'
  '{"spec":{"rollout":{"agentPort":70000}}}|rollout.agentPort must be between 1 and 65535'
  '{"spec":{"observers":[2147483648]}}|observers must be node ids >= 0 and <= 2147483647'
  '{"spec":{"kafka":{"bootstrapServers":"http://evil.example:9092/x"}}}|bootstrapServers must be host:port entries'
  '{"spec":{"kafka":{"tls":null,"sasl":{"mechanism":"PLAIN","secretRef":{"name":"other-team"}}}}}|spec.kafka.sasl needs spec.kafka.tls'
  '{"spec":{"nodes":{"brokers":{"nodeId":{"label":"Not A Label!","ordinalOffset":null}}}}}|nodeId.label must be a label key'
  '{"spec":{"nodes":{"brokers":{"selector":{"matchLabels":null}}}}}|selector must have at least one matchLabels entry or matchExpressions term'
  '{"spec":{"nodes":{"brokers":{"nodeId":{"label":"x","ordinalOffset":1}}}}}|nodeId needs exactly one of label or ordinalOffset'
  '{"spec":{"nodes":{"brokers":{"nodeId":{"ordinalOffset":2147483648}}}}}|nodeId.ordinalOffset must be between 0 and 2147483647'
  '{"spec":{"kafka":{"bootstrapServers":" "}}}|bootstrapServers must list at least one host:port'
  '{"spec":{"deletionPolicy":"Sometimes"}}|spec.deletionPolicy'
)
# A tenant's topic filter bounded in length and count (the operator also bounds its compiled size).
D10_CASES+=("{\"spec\":{\"promotion\":{\"topics\":{\"include\":[\"$(printf 'a%.0s' {1..257})\"]}}}}|spec.promotion.topics.include[0]")
D10_CASES+=("{\"spec\":{\"promotion\":{\"topics\":{\"include\":[$(printf '"t%s",' {1..64})\"t65\"]}}}}|spec.promotion.topics.include: Too many")
scenario_d10() {
  local case patch want out n=0 bad=()
  for case in "${D10_CASES[@]}"; do
    patch="${case%%|*}" want="${case#*|}"
    if out="$(kubectl -n "$KAFKA_NS" patch obs "$OBS" --type merge --dry-run=server -p "$patch" 2>&1)"; then
      bad+=("accepted: $patch")
    elif [[ "$out" != *"$want"* ]]; then
      bad+=("$patch: the message lacks '$want': $out")
    else
      n=$((n + 1))
      # shellcheck disable=SC2312 # message text only
      log "refused as expected: $patch: $(grep -o "$want.*" <<<"$out" | head -c 160)"
    fi
  done
  ((${#bad[@]} == 0)) || { printf '%s\n' "${bad[@]}" >&2; fail "${#bad[@]} invalid specs not refused as expected, first: ${bad[0]}"; }
  echo "DRILL D10 invalid_specs_refused=$n"

  log "== a second ObserverSet selecting the same pods"
  local before
  before="$(cm_snapshot)" || fail "the ConfigMaps cannot be read before the second ObserverSet"
  on_restore "kubectl -n '$KAFKA_NS' delete obs kafka-dup --ignore-not-found --timeout=60s >/dev/null"
  # shellcheck disable=SC2154 # root: set by e2e/lib.sh, sourced by run.sh before this file
  sed "s/^  name: kafka$/  name: kafka-dup/" "$root/examples/kafka/observerset/observerset.yaml" |
    kubectl -n "$KAFKA_NS" apply -f - >/dev/null || fail "cannot create ObserverSet kafka-dup"
  wait_obs 60 "kafka-dup in phase Conflict" '[[ "$(obs_get "{.status.phase}" kafka-dup)" == Conflict ]]'
  local msg
  msg="$(obs_get '{.status.conditions[?(@.type=="Ready")].message}' kafka-dup)"
  [[ "$msg" == *"kafka"* ]] || fail "kafka-dup's Ready condition does not name the ObserverSet it conflicts with: $msg"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(obs_get '{.status.phase}')" == Ready ]] || fail "the older ObserverSet kafka left phase Ready: $(obs_get '{.status.phase}')"
  kubectl -n "$KAFKA_NS" get configmap kafka-dup-observers-controller kafka-dup-observers-broker >/dev/null 2>&1 &&
    fail "the conflicting ObserverSet wrote ConfigMaps"
  expect_lists_unchanged "$before" "the ConfigMaps changed while kafka-dup was in conflict"
  log "kafka-dup: Conflict: $msg"
  echo "DRILL D10 conflicting_set=Conflict configmaps_written=none"
}
