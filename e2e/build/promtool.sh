#!/usr/bin/env bash
# Build promtool (Prometheus' rule checker and rule unit-test runner) from the Go module proxy into
# $KOO_CACHE/promtool/$PROMETHEUS_VERSION/bin. Idempotent: a finished build leaves a stamp and is
# skipped next time. Used by e2e/alerts-check.sh (make alerts-check); needs no test bed.
#
# Usage: e2e/build/promtool.sh          logs go to stderr; stdout gets the path of promtool
#        e2e/build/promtool.sh path     prints the path only (builds nothing; it may not exist yet)
#
# Prometheus publishes its Go module as v0.3MM.P for release v3.MM.P (the v3 tags are not valid
# Go module versions of github.com/prometheus/prometheus). Its go.mod has no replace directives,
# so `go install module/cmd/promtool@version` builds it with exactly its own go.mod and go.sum.
# Build tag remove_all_sd (Prometheus' own, plugins/*.go) leaves out the service-discovery
# plugins (AWS, Azure, GCE, Kubernetes, ...): checking and unit-testing rules needs none of them,
# and they are most of a cold build.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
log_tag="promtool.sh" log_time="%T"

export CGO_ENABLED=0 GOTOOLCHAIN=local
prom_root="$KOO_CACHE/promtool/$PROMETHEUS_VERSION"
bin="$prom_root/bin/promtool"
if [[ "${1:-}" == path ]]; then echo "$bin"; exit 0; fi

ver="${PROMETHEUS_VERSION#v}"            # 3.16.0
major="${ver%%.*}" rest="${ver#*.}"      # 3, 16.0
minor="${rest%%.*}" patch="${rest#*.}"   # 16, 0
[[ "$major" == 3 ]] || { log "PROMETHEUS_VERSION=$PROMETHEUS_VERSION: only v3.x maps to a module version here"; exit 2; }
module_version="v0.$((300 + minor)).$patch"

mkdir -p "$prom_root"
exec 9>"$prom_root/.lock"
flock 9
stamp="$prom_root/.complete"
tags=remove_all_sd
# The stamp holds the build tags: a change rebuilds.
# shellcheck disable=SC2312 # a stamp that cannot be read compares unequal: rebuilt, the safe answer
if [[ -f "$stamp" && -x "$bin" && "$(cat "$stamp")" == "tags=$tags" ]]; then log "promtool $PROMETHEUS_VERSION: cached in $bin"; echo "$bin"; exit 0; fi

t0=$SECONDS
mod=github.com/prometheus/prometheus
# The go.sum-style hash of the module zip stands in for the git revision (the proxy does not
# give the commit of a tag), and the module's release time for the build date, so the binary
# does not depend on when it was built.
info="$(cd "$prom_root" && go mod download -json "$mod@$module_version")"
sum="$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$info")"
info_file="$(sed -n 's/^\t"Info": "\(.*\)",$/\1/p' <<<"$info")"
date="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info_file")"
v=github.com/prometheus/common/version
log "promtool $PROMETHEUS_VERSION: go install -tags $tags $mod/cmd/promtool@$module_version"
rm -rf "$prom_root/bin.tmp"; mkdir -p "$prom_root/bin.tmp" "$prom_root/bin"
(cd "$prom_root" && GOBIN="$prom_root/bin.tmp" go install -trimpath -tags "$tags" \
  -ldflags "-s -w -X '$v.Version=$ver' -X '$v.Revision=$sum' -X '$v.Branch=HEAD' -X '$v.BuildUser=koo' -X '$v.BuildDate=$date'" \
  "$mod/cmd/promtool@$module_version")
mv -f "$prom_root/bin.tmp/promtool" "$bin"; rmdir "$prom_root/bin.tmp"
"$bin" --version >&2
echo "tags=$tags" > "$stamp"
log "promtool $PROMETHEUS_VERSION: built in $((SECONDS - t0))s"
echo "$bin"
