#!/usr/bin/env bash
# Build the observer patch for every supported Kafka version and smoke-test each one
# (patches/smoke-test.sh: 1 controller + 3 brokers exercising every gate). Prints one line per
# version and exits non-zero if any version fails:
#   kafka <v>: patch compiled, smoke PASS (build <n> s|cached, smoke <n> s)
#   kafka <v>: patch compiled, smoke FAIL <first failed check> (build ..., log <path>)
#   kafka <v>: patch NOT compiled: <reason>
# Usage: e2e/build/kafka-versions.sh [version...]   (default: every patches/kafka-<v>/, and 4.4.0 always)
#
# Smoke runs go one at a time (flock) on their own loopback range, $KAFKA_VERSIONS_NET
# (default 127.0.3, so they never meet a manual patches/smoke-test.sh on 127.0.2.x). Logs: $KOO_CACHE/kafka-versions/<v>/{build,smoke}.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/../versions.env"
net="${KAFKA_VERSIONS_NET:-127.0.3}"
out="$KOO_CACHE/kafka-versions"

if [[ $# -gt 0 ]]; then
  versions=("$@")
else
  # Every version we carry a patch for, plus the releases the issue asks for even without one,
  # so a missing port shows up as a line instead of silently dropping out.
  mapfile -t versions < <(
    { find "$repo/patches" -maxdepth 1 -type d -name 'kafka-*' -printf '%f\n' | sed 's/^kafka-//'
      echo 4.4.0; } | sort -u -V
  )
fi

mkdir -p "$out"
exec 9> "$out/.lock"
failed=0
for v in "${versions[@]}"; do
  logs="$out/$v"
  mkdir -p "$logs"
  if [[ ! -d "$repo/patches/kafka-$v" ]]; then
    reason="no patches/kafka-$v"
    [[ -f "$KOO_CACHE/kafka/$v/sources/kafka_$SCALA_BINARY_VERSION-$v-sources.jar" ]] ||
      reason="$reason (Maven serves no kafka_$SCALA_BINARY_VERSION-$v-sources.jar here; see patches/README.md)"
    echo "kafka $v: patch NOT compiled: $reason"
    failed=1
    continue
  fi
  started=$SECONDS
  if ! bash "$here/kafka-patched.sh" "$v" > "$logs/build.log" 2>&1; then
    reason="$(grep -m1 -E 'kafka-patched: .*(not|no|differs|cannot)|error:' "$logs/build.log" || tail -n 1 "$logs/build.log")"
    echo "kafka $v: patch NOT compiled: $reason (log $logs/build.log)"
    failed=1
    continue
  fi
  build="build $((SECONDS - started)) s"
  grep -q 'kafka-patched: cached' "$logs/build.log" && build="build cached"
  # One smoke cluster at a time: 4 JVMs each on a 2-core machine.
  flock 9
  started=$SECONDS
  if SMOKE_NET="$net" SMOKE_DIR="$logs/smoke" bash "$repo/patches/smoke-test.sh" "$v" > "$logs/smoke.log" 2>&1; then
    echo "kafka $v: patch compiled, smoke PASS ($build, smoke $((SECONDS - started)) s)"
  else
    reason="$(grep -m1 '^smoke: FAIL' "$logs/smoke.log" | sed 's/^smoke: FAIL //' || true)"
    echo "kafka $v: patch compiled, smoke FAIL ${reason:-$(tail -n 1 "$logs/smoke.log")} ($build, log $logs/smoke.log)"
    failed=1
  fi
  flock -u 9
done
exit "$failed"
