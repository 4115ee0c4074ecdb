#!/usr/bin/env bash
# Runs shellcheck over every shell script of the repository: the tracked *.sh files and the tracked
# files without extension whose first line is a bash or sh shebang (.ci/run, ...). Findings of
# severity warning or error, plus the optional SC2312 (check-extra-masked-returns: a command's
# status masked by a $(...) in another command's arguments or in a pipeline), which is info.
# A masked status that is meant says so in place:
#   # shellcheck disable=SC2312 # <why the status does not matter here>
#
#   e2e/shellcheck.sh [FILE...]       default: every script; exit status non-zero on a finding
#
# KOO_SHELLCHECK_SKIP: patterns (bash globs on the path from the repository root, * matches /
# too; separated by spaces or newlines) of scripts whose findings do not fail the run; they are
# still checked, and their count per file is printed as a note (e.g. files someone else is
# rewriting: KOO_SHELLCHECK_SKIP='e2e/testbed/* e2e/lib.sh').
#
# Installs shellcheck with apt-get when it is missing (apt-get update only if that fails); needs
# its version 0.8.0 or later (the first with check-extra-masked-returns).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2

if ! command -v shellcheck >/dev/null; then
  echo "shellcheck: not installed; apt-get install -y shellcheck" >&2
  apt-get install -y shellcheck >&2 || { apt-get update >&2 && apt-get install -y shellcheck >&2; } ||
    { echo "shellcheck: cannot install it" >&2; exit 2; }
fi
optional="$(shellcheck --list-optional)" || { echo "shellcheck --list-optional failed" >&2; exit 2; }
version="$(shellcheck --version | sed -n 's/^version: //p')" || version="?"
[[ "$optional" == *"name:    check-extra-masked-returns"* ]] ||
  { echo "shellcheck $version has no check-extra-masked-returns (SC2312): 0.8.0 or later needed" >&2; exit 2; }

# The scripts: tracked *.sh, and tracked files without a dot in their name that start with a
# bash or sh shebang.
scripts=()
if (($# > 0)); then
  scripts=("$@")
else
  listed="$(git ls-files)" || { echo "git ls-files failed" >&2; exit 2; }
  while IFS= read -r f; do
    [[ -f "$f" ]] || continue # deleted in the work tree
    if [[ "$f" == *.sh ]]; then
      scripts+=("$f")
    elif [[ "${f##*/}" != *.* ]]; then
      IFS= read -r first < "$f" || true # an empty file has no first line: not a script
      [[ "${first:-}" =~ ^#!.*[/[:space:]](bash|sh)([[:space:]]|$) ]] && scripts+=("$f")
    fi
  done <<<"$listed"
fi
((${#scripts[@]} > 0)) || { echo "no script to check" >&2; exit 2; }

# The patterns, split without pathname expansion (e2e/testbed/* must stay a pattern).
skip_patterns=()
read -r -d '' -a skip_patterns <<<"${KOO_SHELLCHECK_SKIP:-}" || true # read's 1 is its end of input
skipped() { # skipped FILE: whether a KOO_SHELLCHECK_SKIP pattern matches it
  local p
  for p in "${skip_patterns[@]}"; do
    # shellcheck disable=SC2053 # p is a glob on purpose
    [[ "$1" == $p ]] && return 0
  done
  return 1
}

# -S info reports SC2312 (info); the filter below keeps warnings, errors and SC2312 ("note" is
# info or style in the gcc format). shellcheck's own status says only "found something".
report="$(shellcheck -x -S info --enable=check-extra-masked-returns -f gcc -- "${scripts[@]}" 2>&1)"
sc_rc=$?
if ((sc_rc != 0 && sc_rc != 1)); then
  echo "shellcheck failed (status $sc_rc):" >&2
  echo "$report" >&2
  exit 2
fi
findings="$(grep -E ': (error|warning): |\[SC2312\]$' <<<"$report")" || findings=""

declare -A skipped_count=()
failing=0 skipped_total=0
while IFS= read -r line; do
  [[ -n "$line" ]] || continue
  file="${line%%:*}"
  if skipped "$file"; then
    skipped_count[$file]=$((${skipped_count[$file]:-0} + 1))
    skipped_total=$((skipped_total + 1))
  else
    echo "$line"
    failing=$((failing + 1))
  fi
done <<<"$findings"

if ((skipped_total > 0)); then
  echo "note: $skipped_total finding(s) in skipped files (KOO_SHELLCHECK_SKIP), not failing the run:"
  for file in "${!skipped_count[@]}"; do printf '  %5d %s\n' "${skipped_count[$file]}" "$file"; done | sort -k2
fi
more=""
((skipped_total == 0)) || more=", $skipped_total more in skipped files"
echo "shellcheck $version (warning and up, plus SC2312): ${#scripts[@]} scripts, $failing finding(s)$more"
((failing == 0))
