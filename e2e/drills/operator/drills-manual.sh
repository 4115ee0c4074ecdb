# shellcheck shell=bash
# D2: manual promotion and demotion, through the resource and through `kubectl observer`.
# Sourced by run.sh.
#
# A topic with three partitions (1:2:4, 2:3:4, 3:1:4), every ISR two primaries. Four changes,
# each timed from the moment it is made to what Kafka shows:
#   1. spec.promotion.promoted: [4] (kubectl patch)  -> 4 in every ISR
#   2. spec.promotion.promoted: []                   -> 4 out of every ISR, leading nothing
#   3. kubectl observer promote 4                    -> the spec lists 4; 4 in every ISR
#   4. kubectl observer demote 4                     -> the spec is empty; 4 out of every ISR
# Each change reaches the controllers' ConfigMap no later than the brokers' one (both read in
# one list call every 200 ms), and status.history records each one as manual.

set -o pipefail # as run.sh, which sources this file: a pipeline fails when any of it fails
scenario_d2() {
  local topic t t_in t_out started
  started="$(date -u +%Y-%m-%dT%H:%M:%S)"
  topic="$(new_drill_topic d2 1:2:4,2:3:4,3:1:4)"
  start_isr_sampler "$topic"
  start_cm_sampler
  t="$(now_ms)"
  wait_sample "$SCENARIO_DIR/isr.log" "$t" 'isr_none(4) && isr_min() == 2' 60 "every ISR two primaries, without 4" >/dev/null

  log "== through the resource"
  t="$(now_ms)"
  obs_patch '{"spec":{"promotion":{"promoted":[4]}}}'
  t_in="$(manual_change_reaches "$t" promote)"
  t="$(now_ms)"
  obs_patch '{"spec":{"promotion":{"promoted":[]}}}'
  t_out="$(manual_change_reaches "$t" demote)"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D2 resource_promote_to_4_in_every_isr_s=$(secs "${t_in% *}" "${t_in#* }") resource_demote_to_4_out_of_every_isr_s=$(secs "${t_out% *}" "${t_out#* }")"

  log "== through kubectl observer"
  t="$(now_ms)"
  plugin promote 4 || fail "kubectl observer promote 4 failed"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(obs_get '{.spec.promotion.promoted}')" == "[4]" ]] || fail "kubectl observer promote 4 left spec.promotion.promoted at $(obs_get '{.spec.promotion.promoted}')"
  t_in="$(manual_change_reaches "$t" promote)"
  t="$(now_ms)"
  plugin demote 4 || fail "kubectl observer demote 4 failed"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(obs_get '{.spec.promotion.promoted}')" == "[]" ]] || fail "kubectl observer demote 4 left spec.promotion.promoted at $(obs_get '{.spec.promotion.promoted}')"
  t_out="$(manual_change_reaches "$t" demote)"
  # shellcheck disable=SC2312 # message text only
  echo "DRILL D2 plugin_promote_to_4_in_every_isr_s=$(secs "${t_in% *}" "${t_in#* }") plugin_demote_to_4_out_of_every_isr_s=$(secs "${t_out% *}" "${t_out#* }")"
  local manual
  manual="$(obs_get '{range .status.history[?(@.nodeId==4)]}{.at} {.action} {.reason}{"\n"}{end}' |
    awk -v since="$started" '$1 >= since && $3 == "spec" && $4 == "change:"' | wc -l)"
  ((manual == 4)) || fail "status.history records $manual manual actions on 4 since $started, expected the 4 made here"
}

# manual_change_reaches SINCE_MS promote|demote: waits for the ConfigMaps (controllers first)
# and the ISRs to show the change; echoes "SINCE_MS <time Kafka showed it>".
manual_change_reaches() {
  local since="$1" ctrl brk isr
  if [[ "$2" == promote ]]; then
    ctrl="$(wait_sample "$SCENARIO_DIR/cm.log" "$since" 'lacks($2, 4)' 60 "$2: the controllers' ConfigMap without 4")"
    brk="$(wait_sample "$SCENARIO_DIR/cm.log" "$since" 'lacks($3, 4)' 60 "$2: the brokers' ConfigMap without 4")"
    isr="$(wait_sample "$SCENARIO_DIR/isr.log" "$since" 'isr_all(4)' 60 "$2: 4 in every ISR")"
  else
    ctrl="$(wait_sample "$SCENARIO_DIR/cm.log" "$since" 'lists($2, 4)' 60 "$2: the controllers' ConfigMap lists 4")"
    brk="$(wait_sample "$SCENARIO_DIR/cm.log" "$since" 'lists($3, 4)' 60 "$2: the brokers' ConfigMap lists 4")"
    isr="$(wait_sample "$SCENARIO_DIR/isr.log" "$since" 'isr_none(4) && !leads(4)' 60 "$2: 4 out of every ISR")"
  fi
  ((ctrl <= brk)) || fail "$2: the brokers' ConfigMap changed before the controllers' one"
  # shellcheck disable=SC2312 # message text only
  log "$2: controllers' ConfigMap +$(secs "$since" "$ctrl")s, brokers' +$(secs "$since" "$brk")s, Kafka +$(secs "$since" "$isr")s"
  echo "$since $isr"
}

# The kubectl plugin as a user runs it: the bed's kubeconfig, the Service address from the host.
plugin() {
  # shellcheck disable=SC2312,SC2154 # bootstrap was resolved by run.sh; kubectl-observer fails on an empty one; tb: set by e2e/lib.sh, sourced by run.sh before this file
  KUBECONFIG="$tb/kubeconfig" "$CARGO_TARGET_DIR/release/kubectl-observer" -n "$KAFKA_NS" -s "$OBS" \
    --bootstrap "$(bootstrap)" "$@" >&2
}
