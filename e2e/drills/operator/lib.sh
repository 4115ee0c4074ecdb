# shellcheck shell=bash source-path=SCRIPTDIR
# Shared pieces of the operator drills D1-D14 (e2e/drills/operator/run.sh), on top of the Kafka
# suite's library (the drill client, node control, run_scenarios, restore_default). Sourced.
#
# The drills act on the bed's example cluster (namespace kafka, brokers 1-4, broker 4 the
# observer) and its ObserverSet kafka/kafka, reconciled by the operator installed by its Helm
# chart (two replicas, one leader). Every drill starts from the example ObserverSet as applied
# by `kafka.sh observerset` (policy UnderMinIsr, autoDemote after 30 s) and restore_scenario puts
# it back, whatever the drill changed.

# The functions below rely on pipefail (a failed kubectl before `| ids_of` must fail the
# pipeline); every script that sources this file sets it already.
set -o pipefail
here_lib="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=../kafka/lib.sh
source "$here_lib/../kafka/lib.sh"
# DRILL_WORK: another work directory (accounting-selftest.sh uses a temporary one).
# Another namespace (the second lane of run.sh) works in a directory of its own.
if [[ "$KAFKA_NS" == kafka ]]; then drill_work="${DRILL_WORK:-$tb/drills/operator}"; else drill_work="${DRILL_WORK:-$tb/drills/operator.$KAFKA_NS}"; fi
mkdir -p "$drill_work"
OBS="kafka"
OPERATOR_NS="kafka-observer-system"
OPERATOR_LABEL="app.kubernetes.io/name=kafka-observer-operator"

# ---- the ObserverSet ----------------------------------------------------------------------------
obs_get() { kubectl -n "$KAFKA_NS" get obs "${2:-$OBS}" -o jsonpath="$1" 2>/dev/null; }
auto_promoted() { obs_get '{.status.autoPromotions[*].nodeId}'; }
# wait_cooldown_over: waits until the ObserverSet's last automatic action (any broker's
# status.engineState lastActionAt) is older than spec.promotion.cooldown, so that a drill's
# outage is not held back by the cooldown of the drill before it (CI's D15 of 13faf4c started
# 22 s after D12's demotion and its promotion waited 2.5 s for the cooldown). At most the
# cooldown itself; fails if the ObserverSet cannot be read.
wait_cooldown_over() {
  local cooldown last age_ms
  cooldown="$(obs_get '{.spec.promotion.cooldown}')" || fail "the ObserverSet cannot be read"
  [[ "$cooldown" =~ ^([0-9]+)s$ ]] || fail "spec.promotion.cooldown '$cooldown' is not in whole seconds"
  cooldown="${BASH_REMATCH[1]}"
  last="$(obs_get '{.status.engineState.brokers[*].lastActionAt}')" || fail "the ObserverSet cannot be read"
  [[ -n "$last" ]] || return 0
  last="$(tr ' ' '\n' <<<"$last" | sort | tail -n1)"
  last="$(date -d "$last" +%s%3N)" || fail "lastActionAt '$last' is not a timestamp"
  age_ms=$(($(now_ms) - last))
  if ((age_ms < cooldown * 1000)); then
    log "waiting $(((cooldown * 1000 - age_ms) / 1000 + 1)) s for the cooldown of the last automatic action"
    sleep "$(((cooldown * 1000 - age_ms) / 1000 + 1))"
  fi
}
# no_auto_promotion: the ObserverSet was read and lists no automatic promotion (a failed read is
# not "none": `[[ -z "$(auto_promoted)" ]]` would take it for one).
no_auto_promotion() { local a; a="$(auto_promoted)" && [[ -z "$a" ]]; }
# expect_no_auto_promotion WHAT: fails with WHAT unless the ObserverSet is read and lists none.
expect_no_auto_promotion() {
  local a
  a="$(auto_promoted)" || fail "$1: cannot be checked, the ObserverSet $KAFKA_NS/$OBS cannot be read"
  [[ -z "$a" ]] || fail "$1: autoPromotions [$a]"
}
obs_patch() { kubectl -n "$KAFKA_NS" patch obs "$OBS" --type merge -p "$1" >/dev/null || fail "cannot patch ObserverSet $KAFKA_NS/$OBS with $1"; }
# wait_obs TIMEOUT_S WHAT CONDITION...: until the shell condition holds (checked every 0.5 s).
wait_obs() {
  local timeout="$1" what="$2" deadline=$((SECONDS + $1))
  shift 2
  until eval "$*"; do
    # shellcheck disable=SC2312 # only the text of the failure being reported
    ((SECONDS < deadline)) || fail "$what: not within ${timeout}s (phase $(obs_get '{.status.phase}'), autoPromotions [$(auto_promoted)])"
    sleep 0.5
  done
}
# The ids a role's ConfigMap lists, comma-separated ("" if none, "?" if it cannot be read).
cm_ids() { configmap_ids "$1" 2>/dev/null || echo "?"; }
# cm_snapshot: "controllers=[<ids>] brokers=[<ids>]"; non-zero when a ConfigMap cannot be read.
cm_snapshot() { local c b; c="$(configmap_ids controller)" && b="$(configmap_ids broker)" && echo "controllers=[$c] brokers=[$b]"; }
# expect_lists_unchanged SNAPSHOT WHAT: fails with WHAT unless both ConfigMaps are read and hold
# what cm_snapshot saw (a failed read is not "unchanged").
expect_lists_unchanged() {
  local now
  now="$(cm_snapshot)" || fail "$2: cannot be checked, a ConfigMap cannot be read"
  [[ "$now" == "$1" ]] || fail "$2: $1 before, $now now"
}
# cm_lacks ROLE ID: the role's ConfigMap was read and does not list ID.
cm_lacks() { local ids; ids="$(configmap_ids "$1")" && [[ ",$ids," != *",$2,"* ]]; }

# on_restore COMMAND: run by restore_scenario after the drill, failed or not (the drill's own
# ObserverSets, namespaces, paused processes). after_restore COMMAND: the same, but once every
# node runs again (what needs a stopped broker back, such as its dynamic configs).
on_restore() { echo "$*" >> "$SCENARIO_DIR/on-restore"; }
after_restore() { echo "$*" >> "$SCENARIO_DIR/after-restore"; }
run_restore_file() { # run_restore_file FILE: each line; non-zero if any failed
  local cmd bad=0
  [[ -f "$1" ]] || return 0
  while IFS= read -r cmd; do eval "$cmd" < /dev/null || { log "restore: '$cmd' failed"; bad=1; }; done < "$1"
  return "$bad"
}

# After every drill: the drill's own cleanups, then the example ObserverSet as applied (the spec
# a drill patched, no manual promotion), every node running, no automatic promotion left (the
# operator demotes it itself once the partitions recovered, autoDemote 30 s later), and only then
# the default lists and the drill's topics gone (a list rewritten while an automatic promotion
# still holds would be reverted by the operator), and phase Ready.
restore_scenario() {
  local bad=0
  run_restore_file "$SCENARIO_DIR/on-restore" || bad=1
  kubectl -n "$KAFKA_NS" patch obs "$OBS" --type merge -p '{"spec":{"promotion":{"promoted":[]}}}' >/dev/null 2>&1 || true
  bash "$KAFKA_SH" observerset >&2 || bad=1
  resume_paused
  start_down_nodes || { log "restore: the stopped nodes do not start"; bad=1; }
  wait_auto_demoted 150 || bad=1
  restore_default || bad=1
  run_restore_file "$SCENARIO_DIR/after-restore" || bad=1
  wait_auto_demoted 60 || bad=1
  kubectl -n "$KAFKA_NS" wait obs/"$OBS" --for=jsonpath='{.status.phase}'=Ready --timeout=120s >/dev/null || bad=1
  return "$bad"
}

# wait_auto_demoted TIMEOUT_S: until the ObserverSet lists no automatic promotion.
wait_auto_demoted() {
  local deadline=$((SECONDS + $1))
  until no_auto_promotion; do
    # shellcheck disable=SC2312 # the message only: the status is no_auto_promotion's
    ((SECONDS < deadline)) || { log "restore: automatic promotions left (or the ObserverSet unreadable) after $1 s: [$(auto_promoted)]"; return 1; }
    sleep 1
  done
}

# ---- the operator -------------------------------------------------------------------------------
# The running operator pods (a pod evicted or killed earlier lingers as Completed or Error).
operator_pods() { kubectl -n "$OPERATOR_NS" get pods -l "$OPERATOR_LABEL" --field-selector=status.phase=Running -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
# The pod holding the operator's Lease (its holderIdentity is the pod name).
operator_leader() { kubectl -n "$OPERATOR_NS" get lease kafka-observer-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
# The Lease's holder once it is someone other than $1, polled every 0.5 s for up to 60 s; prints
# the last holder read (empty or $1 again when it never moved: the caller's check then fails).
lease_holder_after() {
  local old="$1" holder=""
  for _ in $(seq 120); do
    holder="$(operator_leader)"
    [[ -n "$holder" && "$holder" != "$old" ]] && break
    sleep 0.5
  done
  echo "$holder"
}
operator_log() { kubectl -n "$OPERATOR_NS" logs -l "$OPERATOR_LABEL" --tail=3000 --prefix 2>/dev/null; }

# What CI's record shows of a failed drill (kafka/lib.sh's fail calls it once, at the first
# failure, before the restore): the ObserverSet's phase, conditions and automatic promotions,
# its latest Events, the samplers' latest lines, and the operator leader's last lines about this
# namespace. Bounded, best effort: each read times out after 5 s.
diagnose_failure() {
  local leader f
  echo "ObserverSet $KAFKA_NS/$OBS:"
  kubectl --request-timeout=5s -n "$KAFKA_NS" get obs "$OBS" -o go-template='  phase={{.status.phase}} autoPromotions={{range .status.autoPromotions}}{{.nodeId}} {{end}}
{{range .status.conditions}}  {{.type}}={{.status}} {{.reason}}: {{.message}}
{{end}}' 2>&1 | cut -c1-400
  echo "its Events (latest 8):"
  kubectl --request-timeout=5s -n "$KAFKA_NS" get events --field-selector "involvedObject.kind=ObserverSet,involvedObject.name=$OBS" \
    --sort-by=.metadata.creationTimestamp -o go-template='{{range .items}}  {{or .lastTimestamp .eventTime .metadata.creationTimestamp}} {{.type}} {{.reason}}: {{.message}}
{{end}}' 2>&1 | tail -n 8 | cut -c1-400
  for f in cm isr; do
    [[ -f "$SCENARIO_DIR/$f.log" ]] || continue
    # shellcheck disable=SC2312 # a diagnosis: a failed count shows as empty
    echo "$f.log: $(wc -l < "$SCENARIO_DIR/$f.log") samples, $(grep -c '?' "$SCENARIO_DIR/$f.log") unreadable, the latest 3:"
    tail -n 3 "$SCENARIO_DIR/$f.log" | cut -c1-300 | sed 's/^/  /'
  done
  leader="$(operator_leader)" || leader=""
  echo "operator leader ${leader:-unknown}, its last lines about namespace $KAFKA_NS (latest 30):"
  [[ -z "$leader" ]] || kubectl --request-timeout=5s -n "$OPERATOR_NS" logs "$leader" --tail=4000 2>&1 |
    grep -E "namespace=$KAFKA_NS( |$)|observerset=$KAFKA_NS/|ObserverSet[.a-z0-9]*/$OBS\.$KAFKA_NS([^-a-z0-9]|$)| ERROR " | tail -n 30 | cut -c1-400
}

# ---- samplers (one line per sample, the first field the sample time in epoch ms) -----------------
# start_bg NAME COMMAND: a background process group, stopped by stop_bg (and by restore).
start_bg() {
  setsid bash -c "$2" > "$SCENARIO_DIR/$1.log" 2>&1 < /dev/null &
  echo "$!" > "$SCENARIO_DIR/$1.pid"
  on_restore "stop_bg $1"
}
stop_bg() { local p; p="$(cat "$SCENARIO_DIR/$1.pid" 2>/dev/null)" && kill -- "-$p" 2>/dev/null; rm -f "$SCENARIO_DIR/$1.pid"; return 0; }

# The partitions of TOPIC every 200 ms: "<ms> <leader0> ,<isr0>, <leader1> ,<isr1>, ..."
# (DrillStream.java, watch-all) into $SCENARIO_DIR/isr.log.
start_isr_sampler() {
  rm -f "$SCENARIO_DIR/isr.stop"
  dc watch-all "$1" "$SCENARIO_DIR/isr.log" 200 "$SCENARIO_DIR/isr.stop" > "$SCENARIO_DIR/isr.err" 2>&1 &
  on_restore "touch '$SCENARIO_DIR/isr.stop'"
}
# Both roles' lists every 200 ms from ONE list call (one resourceVersion: two gets could straddle
# the two writes and show the brokers' change first when it came second) into cm.log:
# "<ms> controller=<ids> broker=<ids>", "?" when the read fails, so a failed read never looks
# like "4 is gone".
start_cm_sampler() {
  # shellcheck disable=SC2312 # cat of a here-document
  start_bg cm "$(cat <<EOF
ids() { awk -v cm="kafka-observers-\$1" '\$0 == "==" cm { on = 1; next } /^==/ { on = 0 } on && !/^[[:space:]]*#/' | tr -s ' ,\n\t' ',' | sed 's/^,//; s/,\$//'; }
while :; do
  t=\$(date +%s%3N)
  if d=\$("$tb/bin/kubectl" --kubeconfig "$tb/kubeconfig" -n $KAFKA_NS get configmaps \
      -o go-template='{{range .items}}=={{.metadata.name}}{{"\\n"}}{{with .data}}{{index . "observer.ids"}}{{end}}{{"\\n"}}{{end}}' 2>/dev/null); then
    echo "\$t controller=\$(ids controller <<<"\$d") broker=\$(ids broker <<<"\$d")"
  else
    echo "\$t controller=? broker=?"
  fi
  sleep 0.2
done
EOF
)"
}

# awk helpers for isr.log lines: has(isr, id), isr_all(id) (every partition's ISR holds id),
# isr_none(id), leads(id) (id leads some partition), isr_min() (the smallest ISR size).
AWK_ISR='
function has(s, id) { return index(s, "," id ",") > 0 }
function ok() { return NF >= 3 && $2 != "?" }
function isr_all(id,  i) { if (!ok()) return 0; for (i = 3; i <= NF; i += 2) if (!has($i, id)) return 0; return 1 }
function isr_none(id,  i) { if (!ok()) return 0; for (i = 3; i <= NF; i += 2) if (has($i, id)) return 0; return 1 }
function leads(id,  i) { for (i = 2; i <= NF; i += 2) if ($i == id) return 1; return 0 }
function isr_min(  i, n, m, a) { m = 99; for (i = 3; i <= NF; i += 2) { n = split($i, a, ",") - 2; if (n < m) m = n }; return m }
'
# cm.log conditions: lists(role_field, id), with $2 the controllers' and $3 the brokers' list.
AWK_CM='
function lists(f, id) { return f !~ /[?]/ && f ~ ("[=,]" id "(,|$)") }
function lacks(f, id) { return f !~ /[?]/ && f !~ ("[=,]" id "(,|$)") }
'
# first_sample FILE AFTER_MS AWK_CONDITION: the time of the first sample at or after AFTER_MS
# that satisfies the condition (with the helpers above), or nothing.
first_sample() {
  [[ -f "$1" ]] || return 0
  awk -v after="$2" "$AWK_ISR $AWK_CM"' $1 >= after && ('"$3"') { print $1; exit }' "$1"
}
# wait_sample FILE AFTER_MS CONDITION TIMEOUT_S WHAT: waits for first_sample; echoes its time.
wait_sample() {
  local deadline=$((SECONDS + $4)) t
  while :; do
    t="$(first_sample "$1" "$2" "$3")"
    [[ -n "$t" ]] && { echo "$t"; return; }
    ((SECONDS < deadline)) || fail "$5: not seen within $4s"
    sleep 0.2
  done
}
# never_sample FILE FROM_MS TO_MS CONDITION WHAT: fails if a sample in [FROM, TO] satisfies it,
# and fails as well when that window holds no readable sample at all (no file, a sampler that
# died or never started, a window before the first sample, only "?" answers): "never seen" is
# then unproven, not true. A readable sample has no "?" (a failed describe or ConfigMap read).
never_sample() {
  local counts n bad hit
  [[ -f "$1" ]] || fail "$5: cannot be checked, no sample file $1"
  counts="$(awk -v a="$2" -v b="$3" "$AWK_ISR $AWK_CM"'
    $1 >= a && $1 <= b && $0 !~ /[?]/ { n++; if (!found && ('"$4"')) { found = 1; hit = $0 } }
    $1 >= a && $1 <= b && $0 ~ /[?]/ { bad++ }
    END { print n + 0, bad + 0, hit }' "$1")" || fail "$5: cannot be checked, awk failed on $1"
  read -r n bad hit <<<"$counts"
  # shellcheck disable=SC2312 # only the text of the failure being reported
  ((n > 0)) || fail "$5: cannot be checked, no readable sample in the window of $(secs "$2" "$3") s ($bad unreadable) in $(basename "$1")"
  [[ -z "$hit" ]] || fail "$5 (sample: $hit)"
}
# controllers_first_both_ways CM_LOG FROM_MS TO_MS: controllers first in both directions, judged
# on the changes between consecutive readable samples of the window: from both lists holding 4,
# the brokers' may not lose it first (a promotion); from both lacking it, the brokers' may not
# get it back first (a demotion). The other half-way states are a rollout's legitimate middle: a
# promotion's (controllers lack 4, brokers list it) and a demotion's (controllers list 4,
# brokers lack it). Fails the drill on a violation, and when the window holds no readable sample.
controllers_first_both_ways() {
  local out
  out="$(awk -v a="$2" -v b="$3" "$AWK_CM"'
    $1 < a || $1 > b || $0 ~ /[?]/ { next }
    { n++; c = lists($2, 4); k = lists($3, 4) }
    n > 1 && pc && pk && c && !k { print "the brokers lost 4 before the controllers (a promotion out of order): " prev " then " $0; bad = 1; exit }
    n > 1 && !pc && !pk && !c && k { print "the brokers got 4 back before the controllers (a demotion out of order): " prev " then " $0; bad = 1; exit }
    { pc = c; pk = k; prev = $0 }
    END { if (bad) exit 1; if (n == 0) { print "no readable sample of the lists"; exit 1 } }' "$1" 2>&1)" ||
    fail "controllers first: ${out:-cannot be checked (awk failed on $1)}"
}
# wait_demotion AFTER_MS: the automatic demotion of 4 after AFTER_MS, as the zone drills expect it:
# both lists list 4 again, the controllers' first; 4 out of every ISR of isr.log; 4 leads nothing
# from the controllers' write on. Sets T_DCTRL, T_DBRK, T_OUT (epoch ms).
# shellcheck disable=SC2034 # T_OUT and the others are read by the drills that call wait_demotion
T_DCTRL="" T_DBRK="" T_OUT=""
# shellcheck disable=SC2034 # the same, for the assignments below
wait_demotion() {
  local end
  T_DCTRL="$(wait_sample "$SCENARIO_DIR/cm.log" "$1" 'lists($2, 4)' 300 "the controllers' ConfigMap lists 4 again (demotion)")"
  T_DBRK="$(wait_sample "$SCENARIO_DIR/cm.log" "$1" 'lists($3, 4)' 300 "the brokers' ConfigMap lists 4 again (demotion)")"
  ((T_DCTRL <= T_DBRK)) || fail "demotion: the brokers' ConfigMap changed before the controllers' one"
  T_OUT="$(wait_sample "$SCENARIO_DIR/isr.log" "$T_DBRK" 'isr_none(4)' 120 "4 out of every ISR")"
  end="$(now_ms)"
  never_sample "$SCENARIO_DIR/isr.log" "$T_DCTRL" "$end" 'leads(4)' "4 leads a partition after its demotion began"
}
# obs_events REASON: the Events about the ObserverSet with REASON, "<type> <message>" a line.
obs_events() {
  kubectl -n "$KAFKA_NS" get events --field-selector "involvedObject.name=$OBS,reason=$1" \
    -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}'
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1000 }'; }

# ---- message accounting -------------------------------------------------------------------------
# start_stream TOPIC PER_SECOND: acks=all idempotent records into every partition in turn, each
# acknowledgement in acked.log ("<partition> <offset> <key> <ms>").
start_stream() {
  rm -f "$SCENARIO_DIR/stream.stop"
  dc stream "$1" "$SCENARIO_DIR/acked.log" "$SCENARIO_DIR/stream.stop" "$2" > "$SCENARIO_DIR/stream.out" 2> "$SCENARIO_DIR/stream.err" &
  echo "$!" > "$SCENARIO_DIR/stream.pid"
  on_restore "touch '$SCENARIO_DIR/stream.stop'"
}
# stop_stream_and_verify TOPIC: stops the stream, reads TOPIC back to its end (every partition,
# read_committed, "<partition> <offset> <key>" per record into consumed.log) and accounts for
# every acknowledged record (account_stream); fails the drill when the producer did not end
# cleanly, the topic cannot be read back, or a record was lost or duplicated. On success sets
# STREAM_ACCOUNTING ("acked=N read=M lost=0 duplicated=0") for the drill's DRILL line.
# Call it as a command of the drill itself, never inside $(...): it waits for the producer it
# stops, which only the shell that started it can, and its fail must end the drill's own shell.
STREAM_ACCOUNTING=""
stop_stream_and_verify() {
  local pid rc=0 producer v
  STREAM_ACCOUNTING=""
  touch "$SCENARIO_DIR/stream.stop"
  pid="$(cat "$SCENARIO_DIR/stream.pid" 2>/dev/null)" || fail "message accounting: no producer was started (no stream.pid)"
  wait "$pid" 2>/dev/null || rc=$?
  producer="$(cat "$SCENARIO_DIR/stream.out" 2>/dev/null)" || true
  ((rc == 0)) || fail "message accounting: the producer exited with status $rc (producer: ${producer:-no summary}; see stream.err)"
  dc read-all "$1" "$SCENARIO_DIR/consumed.log" >&2 || fail "message accounting: $1 cannot be read back to its end (producer: $producer)"
  v="$(account_stream "$SCENARIO_DIR/acked.log" "$SCENARIO_DIR/consumed.log")" ||
    fail "message accounting: $v (producer: $producer)"
  log "producer: $producer; consumer: $v"
  STREAM_ACCOUNTING="$v"
}
# drill_accounting LABEL TOPIC: the last step of D1, D12, D13 and D14: stop_stream_and_verify
# (a lost or duplicated record fails the drill), then "DRILL <LABEL> acked=N read=M lost=0
# duplicated=0". A command of the drill, never inside $(...), like stop_stream_and_verify.
drill_accounting() {
  stop_stream_and_verify "$2"
  echo "DRILL $1 $STREAM_ACCOUNTING"
}
# account_stream ACKED_LOG CONSUMED_LOG: the pure counting of stop_stream_and_verify, no Kafka
# needed. ACKED_LOG: "<partition> <offset> <key> <ms>" per acknowledged record (start_stream);
# CONSUMED_LOG: "<partition> <offset> <key>" per record read back. Prints
# "acked=N read=M lost=L duplicated=D" (lost: a key acknowledged and never read; duplicated: a
# key read more than once), with first_lost=/first_duplicated= when not 0. Non-zero when L or D
# is not 0, when nothing was acknowledged (an accounting of nothing proves nothing) or a log is
# missing.
account_stream() {
  [[ -f "$1" ]] || { echo "no acknowledgement log $1"; return 1; }
  [[ -f "$2" ]] || { echo "no consumed log $2"; return 1; }
  awk -v acked_log="$1" '
    FILENAME == acked_log { if (NF >= 3 && !($3 in acked)) { acked[$3] = ++na; order[na] = $3 }; next }
    NF >= 3 { nr++; if (++seen[$3] == 2) { nd++; if (fd == "") fd = $3 } }
    END {
      for (i = 1; i <= na; i++) if (!(order[i] in seen)) { nl++; if (fl == "") fl = order[i] }
      printf "acked=%d read=%d lost=%d duplicated=%d", na, nr, nl, nd
      if (fl != "") printf " first_lost=%s", fl
      if (fd != "") printf " first_duplicated=%s", fd
      if (na == 0) printf " (nothing acknowledged)"
      print ""
      exit (na == 0 || nl > 0 || nd > 0) ? 1 : 0
    }' "$1" "$2"
}
# first_ack PARTITION AFTER_MS: the first acknowledgement on PARTITION at or after AFTER_MS.
first_ack() { [[ ! -f "$SCENARIO_DIR/acked.log" ]] || awk -v p="$1" -v after="$2" '$1 == p && $4 >= after { print $4; exit }' "$SCENARIO_DIR/acked.log"; }
wait_ack() { # wait_ack PARTITION AFTER_MS TIMEOUT_S WHAT
  local deadline=$((SECONDS + $3)) t
  while :; do
    t="$(first_ack "$1" "$2")"
    [[ -n "$t" ]] && { echo "$t"; return; }
    ((SECONDS < deadline)) || fail "$4: no acknowledgement on partition $1 within $3s"
    sleep 0.2
  done
}

# new_drill_topic NAME ASSIGNMENT [MIN_ISR]: a topic (min ISR 2 unless given) deleted by
# restore_default; echoes its name.
new_drill_topic() {
  local t
  t="$(new_topic "$1")"
  # shellcheck disable=SC2312 # bootstrap was resolved by run.sh; kafka-topics fails on an empty one
  "$tb/bin/kafka-topics" --bootstrap-server "$(bootstrap)" --create --topic "$t" \
    --replica-assignment "$2" --config "min.insync.replicas=${3:-2}" >/dev/null 2>&1 || fail "cannot create topic $t ($2)"
  echo "$t" >> "$SCENARIO_DIR/topics"
  echo "$t"
}
