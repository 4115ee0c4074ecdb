#!/usr/bin/env bash
# The docs name only what exists: every relative link of every tracked Markdown file points at a
# tracked file or directory (its #anchor, if any, at a heading of that file), and every
# `make <target>` written in the Markdown files, the chart, the examples and .ci/run is a
# target of the Makefile. Run by `make check`; no bed, no network.
#
#   e2e/docs-check.sh            prints each broken reference; non-zero if there is one
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2
tmp="$(mktemp -d)" || exit 2
trap 'rm -rf "$tmp"' EXIT
die() { echo "docs-check: $*" >&2; exit 2; }

bad=0
broken() { echo "docs-check: $*"; bad=$((bad + 1)); }

# A heading's GitHub anchor: lower case, code ticks and punctuation dropped, spaces to dashes.
anchors_of() {
  sed -n 's/^#\{1,6\} \{1,\}//p' "$1" > "$tmp/headings" || return 1
  tr '[:upper:]' '[:lower:]' < "$tmp/headings" | sed -e 's/`//g' -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

git ls-files '*.md' > "$tmp/docs" || die "git ls-files failed"
mapfile -t docs < "$tmp/docs"
((${#docs[@]} > 0)) || die "no tracked Markdown file found"
links=0
for doc in "${docs[@]}"; do
  dir="$(dirname "$doc")"
  # Inline links [text](target), code spans removed first; http(s), mailto and the like apart.
  sed 's/`[^`]*`//g' "$doc" > "$tmp/text" || die "cannot read $doc"
  { grep -oE '\]\([^)[:space:]][^)]*\)' "$tmp/text" || true; } | sed 's/^](//; s/)$//' > "$tmp/links" ||
    die "cannot extract the links of $doc"
  while IFS= read -r target; do
    [[ ! "$target" =~ ^[a-z]+: ]] || continue
    links=$((links + 1))
    target="${target%% *}" # [text](path "title")
    path="${target%%#*}"
    anchor=""
    [[ "$target" != *"#"* ]] || anchor="${target#*#}"
    file="$doc"
    if [[ -n "$path" ]]; then
      file="$(realpath -m --relative-to="$root" "$dir/$path")" || die "realpath failed on $dir/$path"
      if [[ "$file" == ../* ]] || ! { [[ -d "$file" ]] || git ls-files --error-unmatch "$file" >/dev/null 2>&1; }; then
        broken "$doc: link to $target: no such file in the repository"
        continue
      fi
    fi
    if [[ -n "$anchor" && "$file" == *.md ]]; then
      anchors_of "$file" > "$tmp/anchors" || die "cannot read the headings of $file"
      grep -qxF -- "$anchor" "$tmp/anchors" || broken "$doc: link to $target: $file has no heading #$anchor"
    fi
  done < "$tmp/links"
done
((links > 0)) || die "not one relative link found in ${#docs[@]} files: the extraction is broken"

# `make <target>` in the docs, the chart, the examples and .ci/run.
git ls-files '*.md' 'charts/*' 'examples/*' .ci/run > "$tmp/texts" || die "git ls-files failed"
{ xargs grep -ohE '(^|[^a-zA-Z0-9_.-])make( [A-Z_]+=[^ ]+)* [a-z][a-z0-9-]*' < "$tmp/texts" || true; } |
  sed -E 's/.*make( [A-Z_]+=[^ ]+)* //' | sort -u > "$tmp/made" || die "cannot extract the make commands"
mapfile -t made < "$tmp/made"
# The Makefile's targets: every name before the colon of a rule line ("a b: deps").
grep -oE '^[a-z][a-z0-9 -]*:' Makefile > "$tmp/rules" || die "no rule found in the Makefile"
tr -d ':' < "$tmp/rules" | tr ' ' '\n' | sed '/^$/d' | sort -u > "$tmp/targets" || die "cannot list the targets"
((${#made[@]} > 0)) || die "not one make command found in the docs: the extraction is broken"
for t in "${made[@]}"; do
  # English words after "make" in prose ("make sure", "make it") are no targets, nor the
  # placeholder of "make bench-<name>".
  case "$t" in bench- | sure | it | the | a | an | them | this | that | room | up | do | one | every | sense) continue ;; esac
  grep -qxF -- "$t" "$tmp/targets" || broken "\`make $t\` is written in the docs but the Makefile has no target $t"
done

echo "docs-check: ${#docs[@]} Markdown files, $links relative links, ${#made[@]} make targets named; $bad broken"
((bad == 0))
