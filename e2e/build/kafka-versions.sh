#!/usr/bin/env bash
# Build the observer patch for every supported Kafka version and smoke-test each one
# (patches/smoke-test.sh: 1 controller + 3 brokers exercising every gate). Prints one line per
# version and exits non-zero if any version fails:
#   KAFKA <v> PASS <n> checks[, <k> skipped] (build <n> s|cached, smoke <n> s, <net>.x)
#   KAFKA <v> FAIL smoke: <first failed check> (build ..., smoke <n> s, log <path>)
#   KAFKA <v> FAIL build: <reason> (log <path>)
#   KAFKA <v> FAIL no patches/kafka-<v> [...]
# Usage: e2e/build/kafka-versions.sh [version...]
#   (default: every patches/kafka-<v>/, and 3.9.2, 4.0.2, 4.4.0 always, so a missing port shows)
#
# Smoke runs go one at a time (flock), each version on its own loopback /24, 127.<major>.<minor>
# (3.9.2 on 127.3.9.x, 4.1.2 on 127.4.1.x), so a run never meets another version's leftovers nor a
# manual patches/smoke-test.sh (127.0.2.x); $KAFKA_VERSIONS_NET puts every version on one /24
# instead. Logs: $KOO_CACHE/kafka-versions/<v>/{build,smoke}.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
net_of() { # net_of <version>: the version's loopback /24 prefix
  local major minor rest
  IFS=. read -r major minor rest <<< "$1"
  [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ && $major -le 255 && $minor -le 255 ]] ||
    { log "cannot derive a loopback range from version $1"; return 1; }
  echo "${KAFKA_VERSIONS_NET:-127.$major.$minor}"
}
out="$KOO_CACHE/kafka-versions"

if [[ $# -gt 0 ]]; then
  versions=("$@")
else
  # Every version we carry a patch for, plus the releases the issue asks for even without one,
  # so a missing port shows up as a line instead of silently dropping out.
  mapfile -t versions < <(
    { find "$root/patches" -maxdepth 1 -type d -name 'kafka-*' -printf '%f\n' | sed 's/^kafka-//'
      printf '%s\n' 3.9.2 4.0.2 4.4.0; } | sort -u -V
  )
fi

mkdir -p "$out"
exec 9> "$out/.lock"
failed=0
for v in "${versions[@]}"; do
  logs="$out/$v"
  mkdir -p "$logs"
  if [[ ! -d "$root/patches/kafka-$v" ]]; then
    reason="no patches/kafka-$v"
    [[ -f "$KOO_CACHE/kafka/$v/sources/kafka_$SCALA_BINARY_VERSION-$v-sources.jar" ]] ||
      reason="$reason (Maven serves no kafka_$SCALA_BINARY_VERSION-$v-sources.jar here; see patches/README.md)"
    echo "KAFKA $v FAIL $reason"
    failed=1
    continue
  fi
  net="$(net_of "$v")" || { echo "KAFKA $v FAIL no loopback range for this version string"; failed=1; continue; }
  started=$SECONDS
  if ! bash "$here/kafka-patched.sh" "$v" > "$logs/build.log" 2>&1; then
    reason="$(grep -m1 -E 'kafka-patched: .*(not|no|differs|cannot)|error:' "$logs/build.log" || tail -n 1 "$logs/build.log")"
    echo "KAFKA $v FAIL build: $reason (log $logs/build.log)"
    failed=1
    continue
  fi
  build="build $((SECONDS - started)) s"
  grep -q 'kafka-patched: cached' "$logs/build.log" && build="build cached"
  # One smoke cluster at a time: 4 JVMs each on a 2-core machine.
  flock 9
  started=$SECONDS
  if SMOKE_NET="$net" SMOKE_DIR="$logs/smoke" bash "$root/patches/smoke-test.sh" "$v" > "$logs/smoke.log" 2>&1; then
    checks="$(grep -c '^smoke: PASS' "$logs/smoke.log" || true) checks"
    skipped="$(grep -c '^smoke: SKIP' "$logs/smoke.log" || true)"
    [[ "$skipped" == 0 ]] || checks="$checks, $skipped skipped"
    echo "KAFKA $v PASS $checks ($build, smoke $((SECONDS - started)) s, $net.x)"
  else
    reason="$(grep -m1 '^smoke: FAIL' "$logs/smoke.log" | sed 's/^smoke: FAIL //' || true)"
    echo "KAFKA $v FAIL smoke: ${reason:-$(tail -n 1 "$logs/smoke.log")} ($build, smoke $((SECONDS - started)) s, log $logs/smoke.log)"
    failed=1
  fi
  flock -u 9
done
exit "$failed"
