#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The operator drills' checks that must be able to fail, tested without the test bed (no Kafka, no
# cluster): the message accounting that ends D1, D12, D13 and D14 (account_stream,
# stop_stream_and_verify, drill_accounting, run through run_scenarios as a drill is, with `dc`
# replaced by a stand-in fed fabricated logs), the "nothing in the window matched" checks
# (never_sample, assert_each_list_changed_once, the Kafka suite's never_in_watch) on empty
# windows, and the "nothing changed" checks on reads that fail (kubectl replaced by a stand-in).
#
#   e2e/drills/operator/accounting-selftest.sh      prints "N passed, M failed"; non-zero if M > 0
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export DRILL_WORK="$work/drills"
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=drills-operator.sh
source "$here/drills-operator.sh"
# shellcheck source=../kafka/scenarios-a.sh
source "$here/../kafka/scenarios-a.sh"

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $*"; }
flunk() { failed=$((failed + 1)); echo "FAIL $*"; }
# check NAME EXPECTED_STATUS(0|nonzero) OUTPUT_PATTERN STATUS OUTPUT: one assertion on a status
# and an output (a bash pattern: * for any text, \\[ for a literal [).
check() {
  local name="$1" want="$2" pattern="$3" rc="$4" out="$5" ok=1
  if [[ "$want" == 0 ]]; then ((rc == 0)) || ok=0; else ((rc != 0)) || ok=0; fi
  # shellcheck disable=SC2053 # the pattern is meant to match as a glob
  [[ "$out" == $pattern ]] || ok=0
  if ((ok)); then pass "$name"; else flunk "$name: status $rc (want $want), output: $out (want $pattern)"; fi
}

# ---- fixtures: three acknowledged records over two partitions ----------------------------------
acked_log() { printf '0 0 k0 1000\n1 0 k1 1050\n0 1 k2 1100\n'; }
good_read() { printf '0 0 k0\n0 1 k2\n1 0 k1\n'; }
lost_read() { printf '0 0 k0\n1 0 k1\n'; }                      # k2, acknowledged, never read
dup_read() { printf '0 0 k0\n0 1 k2\n0 2 k2\n1 0 k1\n'; }       # k2 read twice

# ---- account_stream: the counting alone ---------------------------------------------------------
f="$work/fixtures" && mkdir -p "$f"
acked_log > "$f/acked.log"
good_read > "$f/good.log"
lost_read > "$f/lost.log"
dup_read > "$f/dup.log"
: > "$f/empty.log"
run_account() { out="$(account_stream "$1" "$2")"; rc=$?; }
run_account "$f/acked.log" "$f/good.log"
check "account_stream: every acknowledged record read once passes" 0 "acked=3 read=3 lost=0 duplicated=0" "$rc" "$out"
run_account "$f/acked.log" "$f/lost.log"
check "account_stream: one acknowledged record dropped fails" nonzero "acked=3 read=2 lost=1 duplicated=0 first_lost=k2" "$rc" "$out"
run_account "$f/acked.log" "$f/dup.log"
check "account_stream: one record duplicated fails" nonzero "acked=3 read=4 lost=0 duplicated=1 first_duplicated=k2" "$rc" "$out"
run_account "$f/empty.log" "$f/good.log"
check "account_stream: nothing acknowledged fails" nonzero "acked=0 read=3 lost=0 duplicated=0 (nothing acknowledged)" "$rc" "$out"
run_account "$f/acked.log" "$f/missing.log"
check "account_stream: no consumed log fails" nonzero "no consumed log *" "$rc" "$out"

# ---- the drill level: drill_accounting in a drill run by run_scenarios ---------------------------
# dc stand-in. stream: like DrillStream, writes nothing until the stop file exists, then (0.3 s
# later, so a caller that does not really wait for it reads no acknowledgement log) the
# fabricated acknowledgements, its summary, and exits with $FAKE_PRODUCER_RC. read-all: the
# fabricated consumed log, or exit 1 when $FAKE_READ_RC says so.
dc() {
  case "$1" in
    stream)
      until [[ -e "$4" ]]; do sleep 0.05; done
      sleep 0.3
      cp "$FAKE_ACKED" "$3"
      echo "sent=3 acked=3 failed=0"
      return "${FAKE_PRODUCER_RC:-0}"
      ;;
    read-all)
      [[ "${FAKE_READ_RC:-0}" == 0 ]] || { echo "read-all: not at the end of $2 after 120 s" >&2; return 1; }
      cp "$FAKE_CONSUMED" "$3"
      ;;
    *) echo "dc stand-in: unexpected command $1" >&2; return 2 ;;
  esac
}
precondition() { :; }
restore_scenario() { run_restore_file "$SCENARIO_DIR/on-restore"; }
# The end of D1/D12/D13/D14 as they run it: a stream, then drill_accounting.
scenario_x1() { start_stream drill-x1 20; drill_accounting X1 drill-x1; }
# run_drill CONSUMED [PRODUCER_RC [READ_RC]]: runs X1 through run_scenarios; sets out (its result
# line), rc, and drill_line (the DRILL line of its log, if any).
run_drill() {
  FAKE_ACKED="$f/acked.log" FAKE_CONSUMED="$1" FAKE_PRODUCER_RC="${2:-0}" FAKE_READ_RC="${3:-0}"
  out="$(run_scenarios X1)"
  rc=$?
  out="$(head -n1 <<<"$out")"
  drill_line="$(grep -m1 '^DRILL X1' "$drill_work/X1/log" 2>/dev/null)" || drill_line=""
}
run_drill "$f/good.log"
check "drill: every record once: PASS" 0 "X1 PASS *" "$rc" "$out"
check "drill: every record once: its DRILL line" 0 "DRILL X1 acked=3 read=3 lost=0 duplicated=0" 0 "$drill_line"
run_drill "$f/lost.log"
check "drill: one acknowledged record lost: FAIL with the accounting" nonzero "X1 FAIL message accounting: acked=3 read=2 lost=1 duplicated=0 first_lost=k2 *" "$rc" "$out"
check "drill: one acknowledged record lost: no DRILL line" 0 "" 0 "$drill_line"
run_drill "$f/dup.log"
check "drill: one record duplicated: FAIL with the accounting" nonzero "X1 FAIL message accounting: acked=3 read=4 lost=0 duplicated=1 *" "$rc" "$out"
check "drill: one record duplicated: no DRILL line" 0 "" 0 "$drill_line"
run_drill "$f/good.log" 1
check "drill: the producer exits non-zero: FAIL" nonzero "X1 FAIL message accounting: the producer exited with status 1 *" "$rc" "$out"
run_drill "$f/good.log" 0 1
check "drill: the topic cannot be read back: FAIL" nonzero "X1 FAIL message accounting: drill-x1 cannot be read back to its end *" "$rc" "$out"

# ---- run_scenarios: a failure that set -e cannot see still fails the drill ----------------------
scenario_x2() { local t; t="$(fail "an assertion inside a command substitution")" || true; echo "went on: $t"; }
out="$(run_scenarios X2)"
rc=$?
out="$(head -n1 <<<"$out")"
check "run_scenarios: a fail whose status is dropped: FAIL with its reason" nonzero "X2 FAIL an assertion inside a command substitution *" "$rc" "$out"
# Inside an if, bash ignores set -e all the way down: run_scenarios refuses to run there.
if out="$(run_scenarios X1 2>&1)"; then rc=0; else rc=$?; fi
check "run_scenarios: called where set -e is ignored: refused" nonzero "run_scenarios: called where set -e is ignored *" "$rc" "$out"

# ---- "never" checks on empty windows ------------------------------------------------------------
# in_scenario COMMAND...: runs it as a drill step does (a subshell that fail ends); sets rc and
# out (the reason fail wrote, if any).
in_scenario() {
  SCENARIO_DIR="$work/step.$RANDOM"
  mkdir -p "$SCENARIO_DIR"
  ("$@") > /dev/null 2>&1
  rc=$?
  out="$(cat "$SCENARIO_DIR/reason" 2>/dev/null)" || out=""
}
isr="$work/isr.log"
printf '%s\n' "1000 1 ,1,2," "1200 1 ,1,2," "1400 ? ?" "1600 4 ,1,4," > "$isr"
in_scenario never_sample "$isr" 1000 1200 'leads(4)' "4 led"
check "never_sample: samples in the window, none matching: passes" 0 "" "$rc" "$out"
in_scenario never_sample "$isr" 1000 1600 'leads(4)' "4 led"
check "never_sample: a sample matching: fails" nonzero "4 led (sample: 1600 4 ,1,4,)" "$rc" "$out"
in_scenario never_sample "$isr" 2000 3000 'leads(4)' "4 led"
check "never_sample: no sample in the window: fails" nonzero "4 led: cannot be checked, no readable sample in the window of 1.00 s (0 unreadable) in isr.log" "$rc" "$out"
in_scenario never_sample "$isr" 1300 1500 'leads(4)' "4 led"
check "never_sample: only unreadable samples in the window: fails" nonzero "4 led: cannot be checked, no readable sample * (1 unreadable) *" "$rc" "$out"
: > "$work/empty-isr.log"
in_scenario never_sample "$work/empty-isr.log" 0 99999999999999 'leads(4)' "4 led"
check "never_sample: an empty sample file: fails" nonzero "4 led: cannot be checked, no readable sample *" "$rc" "$out"
in_scenario never_sample "$work/no-such.log" 0 1 'leads(4)' "4 led"
check "never_sample: no sample file: fails" nonzero "4 led: cannot be checked, no sample file *" "$rc" "$out"

cm_changes() { SCENARIO_DIR_CM="$1"; shift; cp "$SCENARIO_DIR_CM" "$SCENARIO_DIR/cm.log"; assert_each_list_changed_once "$@"; }
printf '%s\n' "1000 controller=4 broker=4" "1200 controller= broker=4" "1400 controller= broker=" > "$work/cm.log"
in_scenario cm_changes "$work/cm.log" 1000
check "assert_each_list_changed_once: each list once: passes" 0 "" "$rc" "$out"
in_scenario cm_changes "$work/cm.log" 5000
check "assert_each_list_changed_once: no sample since: fails" nonzero "the ConfigMaps' changes cannot be counted: no readable cm.log sample since 5000" "$rc" "$out"

cf() { controllers_first_both_ways "$1" 0 99999; }
printf '%s\n' "1000 controller=4 broker=4" "1200 controller= broker=4" "1400 controller= broker=" \
  "1600 controller=4 broker=" "1700 controller=? broker=?" "1800 controller=4 broker=4" > "$work/cf-ok.log"
in_scenario cf "$work/cf-ok.log"
check "controllers_first_both_ways: a promotion and a demotion in order: passes" 0 "" "$rc" "$out"
printf '%s\n' "1000 controller=4 broker=4" "1100 controller=? broker=?" "1200 controller=4 broker=" > "$work/cf-p.log"
in_scenario cf "$work/cf-p.log"
check "controllers_first_both_ways: brokers promoted first: fails" nonzero "controllers first: the brokers lost 4 before the controllers *" "$rc" "$out"
printf '%s\n' "1000 controller= broker=" "1200 controller= broker=4" > "$work/cf-d.log"
in_scenario cf "$work/cf-d.log"
check "controllers_first_both_ways: brokers demoted first: fails" nonzero "controllers first: the brokers got 4 back before the controllers *" "$rc" "$out"
printf '%s\n' "1000 controller=? broker=?" > "$work/cf-none.log"
in_scenario cf "$work/cf-none.log"
check "controllers_first_both_ways: no readable sample: fails" nonzero "controllers first: no readable sample of the lists" "$rc" "$out"

watch_in() { WATCH_OUT="$1"; shift; never_in_watch "$@"; }
printf '%s\n' "1000 leader=1 isr=1,2,3 hw=5" > "$work/watch.txt"
in_scenario watch_in "$work/watch.txt" ' leader=4 ' "the observer was leader"
check "never_in_watch: samples, none matching: passes" 0 "" "$rc" "$out"
in_scenario watch_in "$work/watch.txt" ' leader=1 ' "1 was leader"
check "never_in_watch: a sample matching: fails" nonzero "1 was leader: 1000 leader=1 *" "$rc" "$out"
: > "$work/watch-empty.txt"
in_scenario watch_in "$work/watch-empty.txt" ' leader=4 ' "the observer was leader"
check "never_in_watch: no sample: fails" nonzero "the observer was leader: cannot be checked, the watch wrote no sample *" "$rc" "$out"

# ---- reads that fail are not "nothing changed" ----------------------------------------------------
# kubectl stand-in: FAKE_KUBECTL=fail: exits 1 (an apiserver away); else prints FAKE_KUBECTL.
kubectl() { [[ "$FAKE_KUBECTL" != fail ]] || return 1; echo "$FAKE_KUBECTL"; }
FAKE_KUBECTL=fail
in_scenario expect_no_auto_promotion "something was promoted"
check "expect_no_auto_promotion: the ObserverSet unreadable: fails" nonzero "something was promoted: cannot be checked, *" "$rc" "$out"
FAKE_KUBECTL=""
in_scenario expect_no_auto_promotion "something was promoted"
check "expect_no_auto_promotion: none: passes" 0 "" "$rc" "$out"
FAKE_KUBECTL="4"
in_scenario expect_no_auto_promotion "something was promoted"
check "expect_no_auto_promotion: 4 promoted: fails" nonzero "something was promoted: autoPromotions \\[4\\]" "$rc" "$out"
FAKE_KUBECTL=fail
in_scenario no_auto_promotion
check "no_auto_promotion (wait_obs, restore): the ObserverSet unreadable: false" nonzero "" "$rc" "$out"
in_scenario cm_lacks broker 4
check "cm_lacks: the ConfigMap unreadable: false" nonzero "" "$rc" "$out"
FAKE_KUBECTL="4"
in_scenario expect_lists_unchanged "controllers=[4] brokers=[4]" "a list changed"
check "expect_lists_unchanged: both still 4: passes" 0 "" "$rc" "$out"
FAKE_KUBECTL=""
in_scenario expect_lists_unchanged "controllers=[4] brokers=[4]" "a list changed"
check "expect_lists_unchanged: emptied: fails" nonzero "a list changed: controllers=\\[4\\] brokers=\\[4\\] before, controllers=\\[\\] brokers=\\[\\] now" "$rc" "$out"
FAKE_KUBECTL=fail
in_scenario expect_lists_unchanged "controllers=[4] brokers=[4]" "a list changed"
check "expect_lists_unchanged: unreadable: fails" nonzero "a list changed: cannot be checked, *" "$rc" "$out"
segments_md5() { [[ "$1" == 1 ]] && echo "${FAKE_SEG_LEADER:-}" || echo "${FAKE_SEG_OBSERVER:-}"; }
FAKE_SEG_LEADER="" FAKE_SEG_OBSERVER=""
in_scenario same_segments t
check "same_segments (S3, S4): no segments on either side: false" nonzero "" "$rc" "$out"
FAKE_SEG_LEADER="0.log abc" FAKE_SEG_OBSERVER="0.log abc"
in_scenario same_segments t
check "same_segments: the same segments: true" 0 "" "$rc" "$out"

echo "$passed passed, $failed failed"
((failed == 0))
