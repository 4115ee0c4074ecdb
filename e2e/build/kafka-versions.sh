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
# Smoke runs go two at a time ($KAFKA_VERSIONS_JOBS), each version on its own loopback /24, 127.<major>.<minor>
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
  # shellcheck disable=SC2312 # find/printf/sort: the list of versions; a version missing from it shows as no line
  mapfile -t versions < <(
    { find "$root/patches" -maxdepth 1 -type d -name 'kafka-*' -printf '%f\n' | sed 's/^kafka-//'
      # shellcheck disable=SC2312 # printf of constants, then sort: nothing here can fail
      printf '%s\n' 3.9.2 4.0.2 4.4.0; } | sort -u -V
  )
fi

mkdir -p "$out"
# One run of this script at a time (CI and a manual run share $KOO_CACHE).
exec 9> "$out/.lock"
flock 9

# Smoke clusters side by side: each version has its own /24 and directory, and each cluster
# (1 controller + 3 brokers, 256 MiB heaps) mostly waits, on timeouts and fixed pauses, so two at
# a time on the 2-core machine take about two thirds of the time of one after the other.
# $KAFKA_VERSIONS_JOBS sets how many (1: one after the other; forced with $KAFKA_VERSIONS_NET,
# where every version shares one /24).
jobs="${KAFKA_VERSIONS_JOBS:-2}"
[[ -z "${KAFKA_VERSIONS_NET:-}" ]] || jobs=1
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { log "KAFKA_VERSIONS_JOBS must be a positive number, not '$jobs'"; exit 2; }

one_version() { # one_version <version>: builds and smoke-tests it; its line into $logs/result
  local v="$1" logs="$out/$1" net started build reason checks skipped
  mkdir -p "$logs"
  result() { echo "$*" > "$logs/result"; }
  if [[ ! -d "$root/patches/kafka-$v" ]]; then
    reason="no patches/kafka-$v"
    [[ -f "$KOO_CACHE/kafka/$v/sources/kafka_$SCALA_BINARY_VERSION-$v-sources.jar" ]] ||
      reason="$reason (Maven serves no kafka_$SCALA_BINARY_VERSION-$v-sources.jar here; see patches/README.md)"
    result "KAFKA $v FAIL $reason"
    return
  fi
  net="$(net_of "$v")" || { result "KAFKA $v FAIL no loopback range for this version string"; return; }
  started=$SECONDS
  if ! bash "$here/kafka-patched.sh" "$v" > "$logs/build.log" 2>&1; then
    reason="$(grep -m1 -E 'kafka-patched: .*(not|no|differs|cannot)|error:' "$logs/build.log" || tail -n 1 "$logs/build.log")"
    result "KAFKA $v FAIL build: $reason (log $logs/build.log)"
    return
  fi
  build="build $((SECONDS - started)) s"
  grep -q 'kafka-patched: cached' "$logs/build.log" && build="build cached"
  started=$SECONDS
  if SMOKE_NET="$net" SMOKE_DIR="$logs/smoke" bash "$root/patches/smoke-test.sh" "$v" > "$logs/smoke.log" 2>&1; then
    checks="$(grep -c '^smoke: PASS' "$logs/smoke.log" || true) checks"
    skipped="$(grep -c '^smoke: SKIP' "$logs/smoke.log" || true)"
    [[ "$skipped" == 0 ]] || checks="$checks, $skipped skipped"
    result "KAFKA $v PASS $checks ($build, smoke $((SECONDS - started)) s, $net.x)"
  else
    reason="$(grep -m1 '^smoke: FAIL' "$logs/smoke.log" | sed 's/^smoke: FAIL //' || true)"
    # shellcheck disable=SC2312 # message text only
    result "KAFKA $v FAIL smoke: ${reason:-$(tail -n 1 "$logs/smoke.log")} ($build, smoke $((SECONDS - started)) s, log $logs/smoke.log)"
  fi
}

all_started=$SECONDS
for v in "${versions[@]}"; do
  rm -f "$out/$v/result"
  while running="$(jobs -rp | wc -l)"; ((running >= jobs)); do wait -n || true; done
  one_version "$v" 9>&- &
done
wait
# One line per version, in version order, whatever order they finished in.
failed=0
for v in "${versions[@]}"; do
  line="$(cat "$out/$v/result" 2>/dev/null || echo "KAFKA $v FAIL no result (the run was interrupted?)")"
  echo "$line"
  [[ "$line" == "KAFKA $v PASS"* ]] || failed=1
done
echo "kafka-versions: ${#versions[@]} versions in $((SECONDS - all_started)) s, $jobs at a time"
exit "$failed"
