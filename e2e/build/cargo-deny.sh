#!/usr/bin/env bash
# Build cargo-deny (the dependency policy checker of `make deny`, part of `make check`) from
# crates.io into $KOO_CACHE/cargo-deny/$CARGO_DENY_VERSION/bin. Idempotent: a finished build
# leaves a stamp and is skipped next time. Needs no test bed.
#
# Usage: e2e/build/cargo-deny.sh          logs go to stderr; stdout gets the path of cargo-deny
#        e2e/build/cargo-deny.sh path     prints the path only (builds nothing; it may not exist yet)
#
# `cargo install --locked` builds exactly the dependency versions of cargo-deny's own published
# Cargo.lock. Its own target dir lives in the cache too (not the project's CARGO_TARGET_DIR, whose
# release profile and features it would otherwise disturb) and is removed after the build.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
log_tag="cargo-deny.sh" log_time="%T"

deny_root="$KOO_CACHE/cargo-deny/$CARGO_DENY_VERSION"
bin="$deny_root/bin/cargo-deny"
if [[ "${1:-}" == path ]]; then echo "$bin"; exit 0; fi

mkdir -p "$deny_root"
exec 9>"$deny_root/.lock"
flock 9
stamp="$deny_root/.complete"
if [[ -f "$stamp" && -x "$bin" ]]; then log "cargo-deny $CARGO_DENY_VERSION: cached in $bin"; echo "$bin"; exit 0; fi

t0=$SECONDS
log "cargo-deny $CARGO_DENY_VERSION: cargo install --locked (one time, a few minutes)"
# --root: bin/ under $deny_root; cargo writes its .crates.toml bookkeeping there too.
CARGO_TARGET_DIR="$deny_root/target" cargo install --locked --quiet --root "$deny_root" \
  cargo-deny --version "=$CARGO_DENY_VERSION" >&2
rm -rf "$deny_root/target"
"$bin" --version >&2
touch "$stamp"
log "cargo-deny $CARGO_DENY_VERSION: built in $((SECONDS - t0))s"
echo "$bin"
