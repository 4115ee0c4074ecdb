#!/usr/bin/env bash
# Unit tests of the observer patch's own Java (make patch-unit): patches/test/pom.xml, JUnit 5
# through Maven Surefire, compiling patches/src directly (no Kafka classes, no Kafka node).
# Maven's repository is the default ~/.m2, like the other e2e/build scripts; every plugin is pinned,
# so once it is warm the run needs no network. Build output: $KOO_CACHE/patch-unit (not the tree).
# Prints one line from the Surefire reports:
#   PATCH-UNIT tests=<n> failures=<n> errors=<n> skipped=<n> (<s> s)
# and exits non-zero if Maven failed or no test ran.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
out="$KOO_CACHE/patch-unit/target"
reports="$out/surefire-reports"
rm -rf "$reports"
started=$SECONDS
rc=0
# (Maven 3.8 prints bare colour resets even with -B -q: strip escape sequences.)
(cd "$root/patches/test" && mvn_strict -q -Dstyle.color=never test -Dkoo.build.dir="$out") 2>&1 |
  sed 's/\x1b\[[0-9;]*m//g' || rc=$?
sum() { # sum <attribute>: over every suite's report
  local total=0 f n
  for f in "$reports"/TEST-*.xml; do
    [[ -f "$f" ]] || continue
    n="$(grep -m1 -o "<testsuite [^>]*" "$f" | grep -o " $1=\"[0-9]*\"" | grep -o '[0-9]*')"
    total=$((total + ${n:-0}))
  done
  echo "$total"
}
tests="$(sum tests)"
# shellcheck disable=SC2312 # a report line: sum never fails, and the status is Maven's, below
echo "PATCH-UNIT tests=$tests failures=$(sum failures) errors=$(sum errors) skipped=$(sum skipped) ($((SECONDS - started)) s)"
if [[ $rc -ne 0 ]]; then
  log "Maven failed (status $rc); reports in $reports"
  exit "$rc"
fi
[[ "$tests" -gt 0 ]] || die "no test ran"
